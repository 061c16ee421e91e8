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
