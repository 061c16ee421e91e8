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
  // second, with nothing used since, does not.
  top().pushBack(copy(out_, in_));
  Communication* first =
      move(top(), in_, received_, CommunicatorBackend::kCuda);
  top().pushBack(hic_->create<Wait>(first));
  Communication* second = move(top(), in_, sent_, CommunicatorBackend::kCuda);
  top().pushBack(hic_->create<Wait>(second));
  EXPECT_EQ(run(), R"(Stream 0 = GetCurrentStream
T3 = set(T0)
SetCurrentStream(CommunicationStream 0)
Synchronize(Stream 0)
Communication 0 T0 -> T2
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
  // first lane does not.
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
T1 = set(T0)
SetCurrentStream(CommunicationStream 0)
Synchronize(Stream 0)
Communication 0 T1 -> T2
SetCurrentStream(Stream 0)
SetCurrentStream(CommunicationStream 0 lane 1)
Synchronize(Stream 0)
Communication 1 T1 -> T4
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

} // namespace
} // namespace mdfuser
