// SPDX-License-Identifier: MIT
//
// The host IR verifier rejects programs that break an invariant, naming the
// statement.

#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "common/program_builder.h"
#include "host_ir/verifier.h"
#include "ir/ops.h"

namespace mdfuser {
namespace {

using namespace hir;

class VerifierTest : public ::testing::Test {
 protected:
  VerifierTest() {
    auto fusion = std::make_unique<Fusion>();
    in_ = fusion->defineTensor({-1}, {}, DataType::Float);
    tmp_ = makeTensor(*fusion);
    out_ = makeTensor(*fusion);
    fusion->addOutput(out_);
    hic_ = std::make_unique<HostIrContainer>(std::move(fusion));
  }

  static TensorView* makeTensor(Fusion& fusion) {
    std::vector<IterDomain*> ids = {
        fusion.create<IterDomain>(constant(&fusion, 4))};
    return fusion.create<TensorView>(ids, DataType::Float);
  }
  Scope& top() {
    return hic_->topLevel();
  }
  Communication* allreduce(TensorView* in, TensorView* out) {
    return hic_->create<Communication>(
        test::allreduce({0, 1}), in, out, CommunicatorBackend::kNccl);
  }
  Communication* permute(TensorView* in, TensorView* out) {
    return hic_->create<Communication>(
        test::collectivePermute({0, 1}), in, out, CommunicatorBackend::kGloo);
  }

  TensorView* in_;
  TensorView* tmp_;
  TensorView* out_;
  std::unique_ptr<HostIrContainer> hic_;
};

TEST_F(VerifierTest, StreamMustBeCapturedBeforeUse) {
  top().pushBack(hic_->create<SetCurrentStream>(hic_->create<Stream>()));
  EXPECT_INTERNAL_ERROR(verify(*hic_), "before GetCurrentStream captures it");
}

TEST_F(VerifierTest, WorkerStreamIndexMustDependOnEnclosingLoopIndices) {
  Scalar* stray = symbol(hic_->ir());
  top().pushBack(hic_->create<SetCurrentStream>(hic_->create<Stream>(stray)));
  EXPECT_INTERNAL_ERROR(
      verify(*hic_), "is neither an input extent nor an enclosing loop index");
}

TEST_F(VerifierTest, WorkerStreamIndexMayBeAnExpressionOfLoopIndices) {
  auto* loop = hic_->create<ForLoop>(
      symbol(hic_->ir()),
      constant(hic_->ir(), 0),
      constant(hic_->ir(), 3),
      ParallelType::Stream);
  Scalar* previous =
      max(sub(loop->index(), constant(hic_->ir(), 1)), constant(hic_->ir(), 0));
  loop->body().pushBack(
      hic_->create<SetCurrentStream>(hic_->create<Stream>(loop->index())));
  loop->body().pushBack(
      hic_->create<Synchronize>(hic_->create<Stream>(previous)));
  top().pushBack(loop);
  verify(*hic_);
}

TEST_F(VerifierTest, WaitMustFollowItsCommunication) {
  Communication* c = allreduce(in_, out_);
  top().pushBack(hic_->create<Wait>(c));
  top().pushBack(c);
  EXPECT_INTERNAL_ERROR(verify(*hic_), "does not follow its Communication");
}

TEST_F(VerifierTest, EveryCommunicationIsWaitedFor) {
  top().pushBack(allreduce(in_, out_));
  EXPECT_INTERNAL_ERROR(verify(*hic_), "is never waited for");
}

TEST_F(VerifierTest, NoDeallocationBetweenCommunicationAndWait) {
  Communication* c = allreduce(tmp_, out_);
  top().pushBack(hic_->create<Allocate>(out_, std::vector<Scalar*>{}));
  top().pushBack(hic_->create<Allocate>(tmp_, std::vector<Scalar*>{}));
  top().pushBack(hic_->create<LoadStoreOp>(tmp_, in_));
  top().pushBack(c);
  top().pushBack(hic_->create<Deallocate>(tmp_));
  top().pushBack(hic_->create<Wait>(c));
  EXPECT_INTERNAL_ERROR(
      verify(*hic_, {.buffers_allocated = true}), "may still use it");
}

TEST_F(VerifierTest, NoUseAfterDeallocate) {
  top().pushBack(hic_->create<Allocate>(tmp_, std::vector<Scalar*>{}));
  top().pushBack(hic_->create<Allocate>(out_, std::vector<Scalar*>{}));
  top().pushBack(hic_->create<Deallocate>(tmp_));
  top().pushBack(hic_->create<LoadStoreOp>(out_, tmp_));
  EXPECT_INTERNAL_ERROR(
      verify(*hic_, {.buffers_allocated = true}), "no buffer is bound");
}

TEST_F(VerifierTest, OutputsAreNeverDeallocated) {
  top().pushBack(hic_->create<Allocate>(out_, std::vector<Scalar*>{}));
  top().pushBack(hic_->create<Deallocate>(out_));
  EXPECT_INTERNAL_ERROR(
      verify(*hic_, {.buffers_allocated = true}), "never deallocated");
}

TEST_F(VerifierTest, ScalarsDependOnlyOnInputsAndLoopIndices) {
  Scalar* stray = symbol(hic_->ir());
  top().pushBack(hic_->create<Allocate>(tmp_, std::vector<Scalar*>{stray}));
  EXPECT_INTERNAL_ERROR(verify(*hic_), "neither an input extent");
}

TEST_F(VerifierTest, InputExtentsAndLoopIndicesAreFine) {
  Scalar* n = in_->logical()[0]->extent();
  auto* loop = hic_->create<ForLoop>(
      symbol(hic_->ir()), constant(hic_->ir(), 0), n, ParallelType::Serial);
  loop->body().pushBack(hic_->create<Allocate>(
      tmp_, std::vector<Scalar*>{add(n, loop->index())}));
  loop->body().pushBack(hic_->create<Deallocate>(tmp_));
  top().pushBack(loop);
  verify(*hic_, {.buffers_allocated = true});
}

TEST_F(VerifierTest, PermuteInputMayBeReadBeforeItsWait) {
  Communication* c = permute(in_, tmp_);
  top().pushBack(c);
  top().pushBack(hic_->create<LoadStoreOp>(out_, in_));
  top().pushBack(hic_->create<Wait>(c));
  verify(*hic_);
  EXPECT_EQ(
      c->toString(),
      "Communication 0 (type=CollectivePermute, team=(0 1), input=" +
          in_->toString() + ", output=" + tmp_->toString() + ", backend=Gloo)");
}

TEST_F(VerifierTest, PermuteOutputIsNotReadBeforeItsWait) {
  Communication* c = permute(in_, tmp_);
  top().pushBack(c);
  top().pushBack(hic_->create<LoadStoreOp>(out_, tmp_));
  top().pushBack(hic_->create<Wait>(c));
  EXPECT_INTERNAL_ERROR(verify(*hic_), "is read while Communication 0");
}

TEST_F(VerifierTest, PermuteBuffersAreNotWrittenBeforeItsWait) {
  for (bool write_input : {false, true}) {
    SCOPED_TRACE(write_input ? "input" : "output");
    hic_->topLevel().setExprs({});
    Communication* c = permute(tmp_, out_);
    top().pushBack(c);
    top().pushBack(hic_->create<LoadStoreOp>(write_input ? tmp_ : out_, in_));
    top().pushBack(hic_->create<Wait>(c));
    EXPECT_INTERNAL_ERROR(verify(*hic_), "is written while Communication");
  }
}

TEST_F(VerifierTest, PermuteSendsAndReceivesDifferentBuffers) {
  EXPECT_INTERNAL_ERROR(permute(tmp_, tmp_), "receives into another");
  EXPECT_INTERNAL_ERROR(permute(nullptr, tmp_), "receives into another");
}

} // namespace
} // namespace mdfuser
