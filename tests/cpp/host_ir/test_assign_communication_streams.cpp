// SPDX-License-Identifier: MIT
//
// AssignCommunicationStreams on hand-built programs: each CollectivePermute
// moves to a communication stream and the computation after it comes back
// to the compute stream; collectives stay where they are.

#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "common/host_ir_outline.h"
#include "common/program_builder.h"
#include "host_ir/passes/assign_communication_streams.h"
#include "host_ir/verifier.h"
#include "ir/ops.h"

namespace mdfuser {
namespace {

using namespace hir;

class AssignCommunicationStreamsTest : public ::testing::Test {
 protected:
  AssignCommunicationStreamsTest() {
    test::ProgramBuilder b;
    in_ = b.input({4});
    received_ = b.tensor({4});
    out_ = b.tensor({4});
    b.output(out_);
    hic_ = b.build();
  }

  Communication* permute() {
    return hic_->create<Communication>(
        test::collectivePermute({0, 1}),
        in_,
        received_,
        CommunicatorBackend::kGloo);
  }
  // A ring step: the move, the GEMM beside it, the wait.
  void step(Scope& scope) {
    Communication* c = permute();
    scope.pushBack(c);
    scope.pushBack(hic_->create<LoadStoreOp>(out_, in_));
    scope.pushBack(hic_->create<Wait>(c));
  }
  ForLoop* loop(ParallelType pt) {
    return hic_->create<ForLoop>(
        symbol(hic_->ir()),
        constant(hic_->ir(), 0),
        constant(hic_->ir(), 2),
        pt);
  }
  std::string run() {
    assignCommunicationStreams(*hic_);
    verify(*hic_);
    return test::outline(*hic_);
  }

  TensorView* in_;
  TensorView* received_;
  TensorView* out_;
  std::unique_ptr<HostIrContainer> hic_;
};

TEST_F(AssignCommunicationStreamsTest, TopLevelStepComesBackToTheCaller) {
  step(hic_->topLevel());
  // Before: T0 -> T1, set, wait, all on the caller's stream.
  EXPECT_EQ(run(), R"(Stream 0 = GetCurrentStream
SetCurrentStream(CommunicationStream 0)
Communication 0 T0 -> T1
SetCurrentStream(Stream 0)
T2 = set(T0)
Wait 0
)");
}

TEST_F(AssignCommunicationStreamsTest, RingInStreamLoopUsesTheLoopsIndex) {
  // A Stream loop as AssignStreams leaves it, a ring loop inside.
  auto* main = hic_->create<Stream>();
  hic_->topLevel().pushBack(hic_->create<GetCurrentStream>(main));
  ForLoop* chunks = loop(ParallelType::Stream);
  chunks->body().pushBack(
      hic_->create<SetCurrentStream>(hic_->create<Stream>(chunks->index())));
  chunks->body().pushBack(hic_->create<Synchronize>(main));
  ForLoop* ring = loop(ParallelType::Serial);
  step(ring->body());
  chunks->body().pushBack(ring);
  hic_->topLevel().pushBack(chunks);
  hic_->topLevel().pushBack(hic_->create<SetCurrentStream>(main));

  EXPECT_EQ(run(), R"(Stream 0 = GetCurrentStream
FOR i0 stream
  SetCurrentStream(Stream i0)
  Synchronize(Stream 0)
  FOR i1 serial
    SetCurrentStream(CommunicationStream i0)
    Communication 0 T0 -> T1
    SetCurrentStream(Stream i0)
    T2 = set(T0)
    Wait 0
SetCurrentStream(Stream 0)
)");
}

TEST_F(AssignCommunicationStreamsTest, CollectivesStayOnTheirStream) {
  auto* c = hic_->create<Communication>(
      test::allreduce({0, 1}), in_, out_, CommunicatorBackend::kGloo);
  hic_->topLevel().pushBack(c);
  hic_->topLevel().pushBack(hic_->create<Wait>(c));
  EXPECT_EQ(run(), "Communication 0 T0 -> T2\nWait 0\n");
}

TEST_F(AssignCommunicationStreamsTest, RunningTwiceIsABug) {
  step(hic_->topLevel());
  assignCommunicationStreams(*hic_);
  EXPECT_INTERNAL_ERROR(assignCommunicationStreams(*hic_), "ran twice");
}

} // namespace
} // namespace mdfuser
