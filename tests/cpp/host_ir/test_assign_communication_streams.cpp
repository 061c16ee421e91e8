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
    return permuteInto(received_);
  }
  // A move into a buffer of its own (moves outstanding at once), of `in_`
  // or of `from`.
  Communication* permuteInto(TensorView* out, TensorView* from = nullptr) {
    return hic_->create<Communication>(
        test::collectivePermute({0, 1}),
        from == nullptr ? in_ : from,
        out,
        CommunicatorBackend::kGloo);
  }
  TensorView* buffer() {
    return hic_->create<TensorView>(in_->logical(), DataType::Float);
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

TEST_F(AssignCommunicationStreamsTest, OutstandingMovesTakeLanesOfTheirOwn) {
  // A direct form's moves, each of its own part: three issued before any is
  // waited for, then, once the first is waited for, a fourth, which takes
  // the lane it freed; a ring step after all the waits is back on lane 0.
  std::vector<Communication*> moves;
  for (int i = 0; i < 3; ++i) {
    moves.push_back(permuteInto(buffer(), buffer()));
    hic_->topLevel().pushBack(moves.back());
    hic_->topLevel().pushBack(hic_->create<LoadStoreOp>(out_, in_));
  }
  hic_->topLevel().pushBack(hic_->create<Wait>(moves[0]));
  moves.push_back(permuteInto(buffer(), buffer()));
  hic_->topLevel().pushBack(moves.back());
  for (int i = 1; i < 4; ++i) {
    hic_->topLevel().pushBack(hic_->create<Wait>(moves[i]));
  }
  step(hic_->topLevel());
  assignCommunicationStreams(*hic_, /*lanes=*/4);
  verify(*hic_);
  EXPECT_EQ(test::outline(*hic_), R"(Stream 0 = GetCurrentStream
SetCurrentStream(CommunicationStream 0)
Communication 0 T3 -> T4
SetCurrentStream(Stream 0)
T2 = set(T0)
SetCurrentStream(CommunicationStream 0 lane 1)
Communication 1 T5 -> T6
SetCurrentStream(Stream 0)
T2 = set(T0)
SetCurrentStream(CommunicationStream 0 lane 2)
Communication 2 T7 -> T8
SetCurrentStream(Stream 0)
T2 = set(T0)
Wait 0
SetCurrentStream(CommunicationStream 0)
Communication 3 T9 -> T10
SetCurrentStream(Stream 0)
Wait 1
Wait 2
Wait 3
SetCurrentStream(CommunicationStream 0)
Communication 4 T0 -> T1
SetCurrentStream(Stream 0)
T2 = set(T0)
Wait 4
)");
}

TEST_F(AssignCommunicationStreamsTest, MoreOutstandingMovesThanLanesShareThem) {
  std::vector<Communication*> moves;
  for (int i = 0; i < 3; ++i) {
    moves.push_back(permuteInto(buffer(), buffer()));
    hic_->topLevel().pushBack(moves.back());
  }
  for (Communication* c : moves) {
    hic_->topLevel().pushBack(hic_->create<Wait>(c));
  }
  assignCommunicationStreams(*hic_, /*lanes=*/2);
  verify(*hic_);
  const std::string outline = test::outline(*hic_);
  EXPECT_EQ(test::occurrences(outline, "CommunicationStream 0 lane 1"), 1)
      << outline;
  EXPECT_EQ(test::occurrences(outline, "(CommunicationStream 0)"), 2)
      << outline;
  EXPECT_INTERNAL_ERROR(
      assignCommunicationStreams(*hic_, /*lanes=*/5), "communication lanes");
}

TEST_F(AssignCommunicationStreamsTest, FanOutKeepsToOneLane) {
  // The direct allreduce's allgather: one reduced part sent to three peers,
  // all outstanding at once, beside a move of another buffer, which takes
  // the next free lane; once the fan-out is waited for, its lane is free.
  std::vector<Communication*> moves;
  for (int i = 0; i < 3; ++i) {
    moves.push_back(permuteInto(buffer()));
    hic_->topLevel().pushBack(moves.back());
  }
  moves.push_back(permuteInto(buffer(), buffer()));
  hic_->topLevel().pushBack(moves.back());
  for (int i = 0; i < 3; ++i) {
    hic_->topLevel().pushBack(hic_->create<Wait>(moves[i]));
  }
  moves.push_back(permuteInto(buffer(), buffer()));
  hic_->topLevel().pushBack(moves.back());
  for (int i = 3; i < 5; ++i) {
    hic_->topLevel().pushBack(hic_->create<Wait>(moves[i]));
  }
  assignCommunicationStreams(*hic_, /*lanes=*/4);
  verify(*hic_);
  EXPECT_EQ(test::outline(*hic_), R"(Stream 0 = GetCurrentStream
SetCurrentStream(CommunicationStream 0)
Communication 0 T0 -> T3
SetCurrentStream(Stream 0)
SetCurrentStream(CommunicationStream 0)
Communication 1 T0 -> T4
SetCurrentStream(Stream 0)
SetCurrentStream(CommunicationStream 0)
Communication 2 T0 -> T5
SetCurrentStream(Stream 0)
SetCurrentStream(CommunicationStream 0 lane 1)
Communication 3 T6 -> T7
SetCurrentStream(Stream 0)
Wait 0
Wait 1
Wait 2
SetCurrentStream(CommunicationStream 0)
Communication 4 T8 -> T9
SetCurrentStream(Stream 0)
Wait 3
Wait 4
)");
}

TEST_F(AssignCommunicationStreamsTest, RunningTwiceIsABug) {
  step(hic_->topLevel());
  assignCommunicationStreams(*hic_);
  EXPECT_INTERNAL_ERROR(assignCommunicationStreams(*hic_), "ran twice");
}

} // namespace
} // namespace mdfuser
