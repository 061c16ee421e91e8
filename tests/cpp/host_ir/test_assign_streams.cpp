// SPDX-License-Identifier: MIT
//
// AssignStreams on hand-built programs: the program before, the outline
// after.

#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "common/host_ir_outline.h"
#include "common/program_builder.h"
#include "host_ir/passes/assign_streams.h"
#include "host_ir/verifier.h"
#include "ir/ops.h"

namespace mdfuser {
namespace {

using namespace hir;

class AssignStreamsTest : public ::testing::Test {
 protected:
  AssignStreamsTest() {
    auto fusion = std::make_unique<Fusion>();
    in_ = fusion->defineTensor({4}, {}, DataType::Float);
    std::vector<IterDomain*> ids = {
        fusion->create<IterDomain>(constant(fusion.get(), 4))};
    out_ = fusion->create<TensorView>(ids, DataType::Float);
    fusion->addOutput(out_);
    hic_ = std::make_unique<HostIrContainer>(std::move(fusion));
  }

  ForLoop* loop(ParallelType pt) {
    return hic_->create<ForLoop>(
        symbol(hic_->ir()),
        constant(hic_->ir(), 0),
        constant(hic_->ir(), 3),
        pt);
  }
  Expr* work() {
    return hic_->create<LoadStoreOp>(out_, in_);
  }
  std::string run() {
    assignStreams(*hic_);
    verify(*hic_);
    return test::outline(*hic_);
  }

  TensorView* in_;
  TensorView* out_;
  std::unique_ptr<HostIrContainer> hic_;
};

TEST_F(AssignStreamsTest, StreamLoopRunsOnWorkersAndJoins) {
  ForLoop* l = loop(ParallelType::Stream);
  l->body().pushBack(work());
  hic_->topLevel().pushBack(l);

  // The worker is made current before it waits for the main stream, and
  // the join loop has an index of its own.
  EXPECT_EQ(run(), R"(Stream 0 = GetCurrentStream
FOR i0 stream
  SetCurrentStream(Stream i0)
  Synchronize(Stream 0)
  T1 = set(T0)
SetCurrentStream(Stream 0)
FOR i1 serial
  Synchronize(Stream i1)
)");
}

TEST_F(AssignStreamsTest, SerialLoopIsLeftAlone) {
  ForLoop* l = loop(ParallelType::Serial);
  l->body().pushBack(work());
  hic_->topLevel().pushBack(l);
  hic_->topLevel().pushBack(work());

  EXPECT_EQ(run(), R"(FOR i0 serial
  T1 = set(T0)
T1 = set(T0)
)");
}

TEST_F(AssignStreamsTest, StreamLoopInsideSerialLoopIsRewrittenInPlace) {
  ForLoop* outer = loop(ParallelType::Serial);
  ForLoop* inner = loop(ParallelType::Stream);
  inner->body().pushBack(work());
  outer->body().pushBack(inner);
  hic_->topLevel().pushBack(outer);

  EXPECT_EQ(run(), R"(FOR i0 serial
  Stream 0 = GetCurrentStream
  FOR i1 stream
    SetCurrentStream(Stream i1)
    Synchronize(Stream 0)
    T1 = set(T0)
  SetCurrentStream(Stream 0)
  FOR i2 serial
    Synchronize(Stream i2)
)");
}

TEST_F(AssignStreamsTest, NestedStreamLoopUsesItsWorkerAsMainStream) {
  ForLoop* outer = loop(ParallelType::Stream);
  ForLoop* inner = loop(ParallelType::Stream);
  inner->body().pushBack(work());
  outer->body().pushBack(inner);
  hic_->topLevel().pushBack(outer);

  EXPECT_EQ(run(), R"(Stream 1 = GetCurrentStream
FOR i0 stream
  SetCurrentStream(Stream i0)
  Synchronize(Stream 1)
  Stream 0 = GetCurrentStream
  FOR i1 stream
    SetCurrentStream(Stream i1)
    Synchronize(Stream 0)
    T1 = set(T0)
  SetCurrentStream(Stream 0)
  FOR i2 serial
    Synchronize(Stream i2)
SetCurrentStream(Stream 1)
FOR i3 serial
  Synchronize(Stream i3)
)");
}

TEST_F(AssignStreamsTest, CommunicationPerStreamKeepsComputeOnTheMainStream) {
  ForLoop* l = loop(ParallelType::Stream);
  auto* comm = hic_->create<Communication>(
      test::allreduce({0, 1}), out_, out_, CommunicatorBackend::kNccl);
  l->body().pushBack(work());
  l->body().pushBack(comm);
  l->body().pushBack(hic_->create<Wait>(comm));
  hic_->topLevel().pushBack(l);

  assignStreams(*hic_, StreamSchedule::kCommunicationPerStream);
  verify(*hic_);
  // The copy runs on the main stream in iteration order; the allreduce of
  // iteration i0 waits for it on worker i0 while the next copy proceeds.
  EXPECT_EQ(test::outline(*hic_), R"(Stream 0 = GetCurrentStream
FOR i0 stream
  T1 = set(T0)
  SetCurrentStream(Stream i0)
  Synchronize(Stream 0)
  Communication 0 T1 -> T1
  Wait 0
  SetCurrentStream(Stream 0)
SetCurrentStream(Stream 0)
FOR i1 serial
  Synchronize(Stream i1)
)");
}

TEST_F(AssignStreamsTest, CommunicationPerStreamWithoutCommunication) {
  ForLoop* l = loop(ParallelType::Stream);
  l->body().pushBack(work());
  hic_->topLevel().pushBack(l);
  assignStreams(*hic_, StreamSchedule::kCommunicationPerStream);
  EXPECT_EQ(test::outline(*hic_), R"(Stream 0 = GetCurrentStream
FOR i0 stream
  SetCurrentStream(Stream i0)
  Synchronize(Stream 0)
  T1 = set(T0)
SetCurrentStream(Stream 0)
FOR i1 serial
  Synchronize(Stream i1)
)") << "with nothing to overlap, the whole iteration goes to its worker";
}

TEST_F(
    AssignStreamsTest, CommunicationPerStreamKeepsADecompositionsGemmsInOrder) {
  // A direct allreduce's iteration, in short: a partial sum moved to a
  // peer, the own part's GEMM after the arrival, the arrival added, the
  // reduced part moved to the peer and copied out.
  auto* partial = hic_->create<TensorView>(in_->logical(), DataType::Float);
  auto* arrived = hic_->create<TensorView>(in_->logical(), DataType::Float);
  auto* own = hic_->create<TensorView>(in_->logical(), DataType::Float);
  auto* gathered = hic_->create<TensorView>(in_->logical(), DataType::Float);
  auto permute = [&](TensorView* from, TensorView* to) {
    return hic_->create<Communication>(
        test::collectivePermute({0, 1}), from, to, CommunicatorBackend::kCuda);
  };
  ForLoop* l = loop(ParallelType::Stream);
  Communication* scatter = permute(partial, arrived);
  Communication* gather = permute(own, gathered);
  l->body().pushBack(hic_->create<MatmulOp>(partial, in_, in_));
  l->body().pushBack(scatter);
  l->body().pushBack(hic_->create<Wait>(scatter));
  l->body().pushBack(hic_->create<MatmulOp>(own, in_, in_));
  l->body().pushBack(hic_->create<PointwiseOp>(
      OpType::Add, own, std::vector<Val*>{own, arrived}));
  l->body().pushBack(gather);
  l->body().pushBack(hic_->create<Wait>(gather));
  l->body().pushBack(hic_->create<LoadStoreOp>(out_, gathered));
  hic_->topLevel().pushBack(l);

  assignStreams(*hic_, StreamSchedule::kCommunicationPerStream);
  verify(*hic_);
  // Both GEMMs, the first move and its wait on the main stream in
  // iteration order; from the sum of the arrival on, the worker.
  EXPECT_EQ(test::outline(*hic_), R"(Stream 0 = GetCurrentStream
FOR i0 stream
  T2 = matmul(T0, T0)
  Communication 0 T2 -> T3
  Wait 0
  T4 = matmul(T0, T0)
  SetCurrentStream(Stream i0)
  Synchronize(Stream 0)
  T4 = add(T4, T3)
  Communication 1 T4 -> T5
  Wait 1
  T1 = set(T5)
  SetCurrentStream(Stream 0)
SetCurrentStream(Stream 0)
FOR i1 serial
  Synchronize(Stream i1)
)");
}

TEST_F(AssignStreamsTest, CommunicationPerStreamSwitchesAtAnEarlierCollective) {
  // A collective (which the stream it is issued on waits for) between two
  // GEMMs: the main stream keeps the GEMM before it, the worker the rest
  // from the first move on.
  auto* partial = hic_->create<TensorView>(in_->logical(), DataType::Float);
  auto* arrived = hic_->create<TensorView>(in_->logical(), DataType::Float);
  ForLoop* l = loop(ParallelType::Stream);
  auto* move = hic_->create<Communication>(
      test::collectivePermute({0, 1}),
      partial,
      arrived,
      CommunicatorBackend::kNccl);
  auto* reduce = hic_->create<Communication>(
      test::allreduce({0, 1}), arrived, arrived, CommunicatorBackend::kNccl);
  l->body().pushBack(hic_->create<MatmulOp>(partial, in_, in_));
  l->body().pushBack(move);
  l->body().pushBack(hic_->create<Wait>(move));
  l->body().pushBack(reduce);
  l->body().pushBack(hic_->create<Wait>(reduce));
  l->body().pushBack(hic_->create<MatmulOp>(out_, arrived, in_));
  hic_->topLevel().pushBack(l);

  assignStreams(*hic_, StreamSchedule::kCommunicationPerStream);
  verify(*hic_);
  EXPECT_EQ(test::outline(*hic_), R"(Stream 0 = GetCurrentStream
FOR i0 stream
  T2 = matmul(T0, T0)
  SetCurrentStream(Stream i0)
  Synchronize(Stream 0)
  Communication 0 T2 -> T3
  Wait 0
  Communication 1 T3 -> T3
  Wait 1
  T1 = matmul(T3, T0)
  SetCurrentStream(Stream 0)
SetCurrentStream(Stream 0)
FOR i1 serial
  Synchronize(Stream i1)
)");
}

TEST_F(AssignStreamsTest, RunningTwiceIsABug) {
  ForLoop* l = loop(ParallelType::Stream);
  l->body().pushBack(work());
  hic_->topLevel().pushBack(l);
  assignStreams(*hic_);
  EXPECT_INTERNAL_ERROR(assignStreams(*hic_), "AssignStreams ran twice");
}

TEST_F(AssignStreamsTest, EmptyProgramStaysEmpty) {
  EXPECT_EQ(run(), "");
}

} // namespace
} // namespace mdfuser
