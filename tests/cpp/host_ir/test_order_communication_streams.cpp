// SPDX-License-Identifier: MIT
//
// OrderCommunicationStreams on hand-built programs in the form
// AssignCommunicationStreams leaves: the communication stream waits for the
// compute stream exactly when the data it sends is fresh or the buffer it
// receives into was in use, also by the previous iteration of a loop.

#include <gtest/gtest.h>

#include "common/host_ir_outline.h"
#include "common/program_builder.h"
#include "host_ir/passes/order_communication_streams.h"
#include "host_ir/verifier.h"
#include "ir/ops.h"

namespace mdfuser {
namespace {

using namespace hir;

class OrderCommunicationStreamsTest : public ::testing::Test {
 protected:
  OrderCommunicationStreamsTest() {
    test::ProgramBuilder b;
    in_ = b.input({4});
    sent_ = b.tensor({4});
    received_ = b.tensor({4});
    out_ = b.tensor({4});
    b.output(out_);
    hic_ = b.build();
    compute_ = hic_->create<Stream>();
    top().pushBack(hic_->create<GetCurrentStream>(compute_));
  }

  Scope& top() {
    return hic_->topLevel();
  }
  // The move from `in` to `out` on the communication stream; returns it
  // for the Wait.
  Communication* move(
      Scope& scope,
      TensorView* in,
      TensorView* out,
      CommunicatorBackend backend = CommunicatorBackend::kGloo,
      int64_t lane = 0) {
    auto* c = hic_->create<Communication>(
        test::collectivePermute({0, 1}), in, out, backend);
    scope.pushBack(hic_->create<SetCurrentStream>(hic_->create<Stream>(
        constant(hic_->ir(), 0), Stream::Kind::kCommunication, lane)));
    scope.pushBack(c);
    scope.pushBack(hic_->create<SetCurrentStream>(compute_));
    return c;
  }
  Expr* copy(TensorView* out, TensorView* in) {
    return hic_->create<LoadStoreOp>(out, in);
  }
  // A view of `tv`, as a ring's chunks are.
  TensorView* view(Scope& scope, TensorView* tv) {
    auto* v = hic_->create<TensorView>(
        tv->logical(), tv->dtype(), tv->contiguity(), MemoryType::Local);
    Scalar* zero = constant(hic_->ir(), 0);
    scope.pushBack(hic_->create<RingChunk>(
        v, tv, 0, zero, 1, zero, constant(hic_->ir(), 4)));
    return v;
  }
  std::string run() {
    orderCommunicationStreams(*hic_);
    verify(*hic_);
    return test::outline(*hic_);
  }

  TensorView* in_;
  TensorView* sent_;
  TensorView* received_;
  TensorView* out_;
  Stream* compute_;
  std::unique_ptr<HostIrContainer> hic_;
};

TEST_F(OrderCommunicationStreamsTest, FreshDataWaitsForItsProducer) {
  top().pushBack(copy(sent_, in_));
  top().pushBack(hic_->create<Wait>(move(top(), sent_, received_)));
  EXPECT_EQ(run(), R"(Stream 0 = GetCurrentStream
T1 = set(T0)
SetCurrentStream(CommunicationStream 0)
Synchronize(Stream 0)
Communication 0 T1 -> T2
SetCurrentStream(Stream 0)
Wait 0
)");
}

TEST_F(OrderCommunicationStreamsTest, NothingInUseNeedsNoWait) {
  // The input arrives complete and nothing on the compute stream used the
  // receive buffer.
  top().pushBack(copy(out_, in_));
  top().pushBack(hic_->create<Wait>(move(top(), in_, received_)));
  EXPECT_EQ(run(), R"(Stream 0 = GetCurrentStream
T3 = set(T0)
SetCurrentStream(CommunicationStream 0)
Communication 0 T0 -> T2
SetCurrentStream(Stream 0)
Wait 0
)");
}

TEST_F(OrderCommunicationStreamsTest, TheCudaBackendWaitsOnceAtTheRunStart) {
  // Nothing in this run used the buffers, but the CUDA backend's symmetric
  // buffers outlive a run: the first move waits for the compute stream, the
  // second, with nothing used since, does not. The first posts its receive
  // once the previous run is done, before this run's work, and sends after
  // it.
  top().pushBack(copy(out_, in_));
  Communication* first =
      move(top(), in_, received_, CommunicatorBackend::kCuda);
  top().pushBack(hic_->create<Wait>(first));
  Communication* second = move(top(), in_, sent_, CommunicatorBackend::kCuda);
  top().pushBack(hic_->create<Wait>(second));
  EXPECT_EQ(run(), R"(Stream 0 = GetCurrentStream
SetCurrentStream(CommunicationStream 0)
Synchronize(previous run)
SetCurrentStream(Stream 0)
T3 = set(T0)
SetCurrentStream(CommunicationStream 0)
Communication 0 T0 -> T2 after Stream 0
SetCurrentStream(Stream 0)
Wait 0
SetCurrentStream(CommunicationStream 0)
Communication 1 T0 -> T1
SetCurrentStream(Stream 0)
Wait 1
)");
}

TEST_F(OrderCommunicationStreamsTest, EachLaneWaitsForItself) {
  // The same fresh data sent on two lanes: the second lane's stream has
  // not waited when the first did, so it waits too; a second move on the
  // first lane does not. Neither receive buffer was in use: both lanes
  // post their receives at the start, and send after the data is written.
  auto* other = hic_->create<TensorView>(in_->logical(), DataType::Float);
  auto* third = hic_->create<TensorView>(in_->logical(), DataType::Float);
  top().pushBack(copy(sent_, in_));
  Communication* a =
      move(top(), sent_, received_, CommunicatorBackend::kCuda, 0);
  Communication* b = move(top(), sent_, other, CommunicatorBackend::kCuda, 1);
  Communication* c = move(top(), sent_, third, CommunicatorBackend::kCuda, 0);
  for (Communication* m : {a, b, c}) {
    top().pushBack(hic_->create<Wait>(m));
  }
  EXPECT_EQ(run(), R"(Stream 0 = GetCurrentStream
SetCurrentStream(CommunicationStream 0)
Synchronize(previous run)
SetCurrentStream(Stream 0)
SetCurrentStream(CommunicationStream 0 lane 1)
Synchronize(previous run)
SetCurrentStream(Stream 0)
T1 = set(T0)
SetCurrentStream(CommunicationStream 0)
Communication 0 T1 -> T2 after Stream 0
SetCurrentStream(Stream 0)
SetCurrentStream(CommunicationStream 0 lane 1)
Communication 1 T1 -> T4 after Stream 0
SetCurrentStream(Stream 0)
SetCurrentStream(CommunicationStream 0)
Communication 2 T1 -> T5
SetCurrentStream(Stream 0)
Wait 0
Wait 1
Wait 2
)");
}

TEST_F(OrderCommunicationStreamsTest, ReuseByTheNextIterationWaits) {
  // Each iteration receives into T2 and then reads it: the next iteration's
  // receive must wait for that read.
  ForLoop* loop = hic_->create<ForLoop>(
      symbol(hic_->ir()),
      constant(hic_->ir(), 0),
      constant(hic_->ir(), 3),
      ParallelType::Serial);
  Communication* c = move(loop->body(), in_, received_);
  loop->body().pushBack(hic_->create<Wait>(c));
  loop->body().pushBack(copy(out_, received_));
  top().pushBack(loop);
  EXPECT_EQ(run(), R"(Stream 0 = GetCurrentStream
FOR i0 serial
  SetCurrentStream(CommunicationStream 0)
  Synchronize(Stream 0)
  Communication 0 T0 -> T2
  SetCurrentStream(Stream 0)
  Wait 0
  T3 = set(T2)
)");
}

TEST_F(OrderCommunicationStreamsTest, ViewsCountAsTheirBuffer) {
  // A part of T2 is read; a receive into another part of it waits.
  top().pushBack(copy(out_, view(top(), received_)));
  TensorView* part = view(top(), received_);
  top().pushBack(hic_->create<Wait>(move(top(), in_, part)));
  const std::string after = run();
  EXPECT_NE(
      after.find("SetCurrentStream(CommunicationStream 0)\n"
                 "Synchronize(Stream 0)\n"
                 "Communication 0 T0 -> T5"),
      std::string::npos)
      << after;
}

// The exchange of a stream loop with the GEMMs in order: each iteration
// computes its partial sum on the caller's stream into T1, the buffer T2
// the peer's lands in is allocated, and the iteration moves to its worker,
// which waits for the caller's stream; the move sends T1 and returns to the
// worker, which reads the arrival (T3 = T2).
class EarlyReceiveTest : public OrderCommunicationStreamsTest {
 protected:
  // With `per_iteration`, T2 is allocated in the loop body (a buffer of
  // each iteration), else once before the loop (one for all).
  void build(bool per_iteration) {
    ForLoop* loop = hic_->create<ForLoop>(
        symbol(hic_->ir()),
        constant(hic_->ir(), 0),
        constant(hic_->ir(), 2),
        ParallelType::Stream);
    Scope& body = loop->body();
    auto* allocate = hic_->create<Allocate>(
        received_, std::vector<Scalar*>{constant(hic_->ir(), 4)});
    auto* worker = hic_->create<Stream>(loop->index());
    body.pushBack(copy(sent_, in_));
    (per_iteration ? body : top()).pushBack(allocate);
    body.pushBack(hic_->create<SetCurrentStream>(worker));
    body.pushBack(hic_->create<Synchronize>(compute_));
    auto* c = hic_->create<Communication>(
        test::collectivePermute({0, 1}),
        sent_,
        received_,
        CommunicatorBackend::kCuda);
    body.pushBack(hic_->create<SetCurrentStream>(
        hic_->create<Stream>(loop->index(), Stream::Kind::kCommunication)));
    body.pushBack(c);
    body.pushBack(hic_->create<SetCurrentStream>(worker));
    body.pushBack(hic_->create<Wait>(c));
    body.pushBack(copy(out_, received_));
    body.pushBack(hic_->create<SetCurrentStream>(compute_));
    top().pushBack(loop);
  }
};

TEST_F(EarlyReceiveTest, AFreshLandingIsPostedBeforeTheWorkerWaits) {
  // T2 is a buffer of its iteration: the previous iterations' uses were of
  // others. The communication stream waits for the previous run before the
  // worker waits for this iteration's data, posts the receive there, and
  // the copy waits for the worker.
  build(/*per_iteration=*/true);
  EXPECT_EQ(run(), R"(Stream 0 = GetCurrentStream
FOR i0 stream
  T1 = set(T0)
  Allocate T2
  SetCurrentStream(Stream i0)
  SetCurrentStream(CommunicationStream i0)
  Synchronize(previous run)
  SetCurrentStream(Stream i0)
  Synchronize(Stream 0)
  SetCurrentStream(CommunicationStream i0)
  Communication 0 T1 -> T2 after Stream i0
  SetCurrentStream(Stream i0)
  Wait 0
  T3 = set(T2)
  SetCurrentStream(Stream 0)
)");
}

TEST_F(EarlyReceiveTest, ALandingOfEveryIterationWaitsAtTheMove) {
  // One T2 for all iterations: the next iteration's receive must wait for
  // this one's read of it, after the worker waited for its data.
  build(/*per_iteration=*/false);
  const std::string after = run();
  EXPECT_NE(
      after.find("SetCurrentStream(CommunicationStream i0)\n"
                 "  Synchronize(Stream i0)\n"
                 "  Communication 0 T1 -> T2\n"),
      std::string::npos)
      << after;
  EXPECT_EQ(after.find("previous run"), std::string::npos) << after;
}

TEST_F(OrderCommunicationStreamsTest, OneEarlyWaitServesALanesMoves) {
  // A direct form's moves, each sending data made just before it into a
  // landing nothing used: each copy waits for its own data, and one wait
  // for the previous run, before any data is made, serves the receives of
  // a lane; a move on another lane has its own.
  auto buffer = [&] {
    return hic_->create<TensorView>(in_->logical(), in_->dtype());
  };
  std::vector<Communication*> moves;
  for (int64_t lane : {0, 0, 1}) {
    TensorView* sent = buffer();
    top().pushBack(copy(sent, in_));
    moves.push_back(
        move(top(), sent, buffer(), CommunicatorBackend::kCuda, lane));
  }
  for (Communication* c : moves) {
    top().pushBack(hic_->create<Wait>(c));
  }
  EXPECT_EQ(run(), R"(Stream 0 = GetCurrentStream
SetCurrentStream(CommunicationStream 0)
Synchronize(previous run)
SetCurrentStream(Stream 0)
SetCurrentStream(CommunicationStream 0 lane 1)
Synchronize(previous run)
SetCurrentStream(Stream 0)
T4 = set(T0)
SetCurrentStream(CommunicationStream 0)
Communication 0 T4 -> T5 after Stream 0
SetCurrentStream(Stream 0)
T6 = set(T0)
SetCurrentStream(CommunicationStream 0)
Communication 1 T6 -> T7 after Stream 0
SetCurrentStream(Stream 0)
T8 = set(T0)
SetCurrentStream(CommunicationStream 0 lane 1)
Communication 2 T8 -> T9 after Stream 0
SetCurrentStream(Stream 0)
Wait 0
Wait 1
Wait 2
)");
}

} // namespace
} // namespace mdfuser
