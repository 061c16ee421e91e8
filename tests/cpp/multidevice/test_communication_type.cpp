// SPDX-License-Identifier: MIT
//
// chooseResharding names what moving a tensor from one sharding to another
// takes: nothing, a local slice, or one collective. It is a pure function
// of the two shardings, so the first tests enumerate every pair of states
// on one mesh and every move between meshes; the last ones check that the
// states read off a set or sum are the right ones.

#include <sstream>

#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "ir/fusion.h"
#include "ir/ops.h"
#include "multidevice/communication_type.h"

namespace mdfuser {
namespace {

using Kind = DeviceSharding::Kind;
constexpr ParallelType kX = ParallelType::DIDx;
constexpr ParallelType kY = ParallelType::DIDy;
const DeviceMesh kMesh({0, 1});

DeviceSharding replicated() {
  return {};
}
DeviceSharding sharded(
    int64_t axis, int64_t layout = 0, std::string above = "") {
  return {Kind::kSharded, axis, layout, std::move(above)};
}
DeviceSharding partial() {
  return {Kind::kPartial, -1, 0, ""};
}

ShardingState state(const DeviceMesh& mesh, DeviceSharding x) {
  return {mesh, {{kX, x}}};
}

TEST(CommunicationType, Names) {
  EXPECT_EQ(communicationTypeName(CommunicationType::Allreduce), "Allreduce");
  EXPECT_EQ(
      communicationTypeName(CommunicationType::ReduceScatter), "ReduceScatter");
  EXPECT_EQ(communicationTypeName(CommunicationType::AllToAll), "AllToAll");
  EXPECT_EQ(communicationTypeName(CommunicationType::SendRecv), "SendRecv");
  std::ostringstream ss;
  ss << CommunicationType::Allgather;
  EXPECT_EQ(ss.str(), "Allgather");
}

// Every (producer, consumer) pair of states on one mesh, one device
// parallel type, two axes.
TEST(ChooseResharding, EveryPairOfStatesOnOneMesh) {
  struct Case {
    DeviceSharding producer;
    DeviceSharding consumer;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {replicated(), replicated(), "local"},
      {replicated(), sharded(0), "local"},
      {replicated(), sharded(1), "local"},
      {sharded(0), replicated(), "Allgather on mesh_x axis 0"},
      {sharded(1), replicated(), "Allgather on mesh_x axis 1"},
      {sharded(0), sharded(0), "local"},
      {sharded(1), sharded(1), "local"},
      {sharded(0), sharded(1), "AllToAll on mesh_x axis 0 to axis 1"},
      {sharded(1), sharded(0), "AllToAll on mesh_x axis 1 to axis 0"},
      {partial(), replicated(), "Allreduce on mesh_x"},
      {partial(), sharded(0), "ReduceScatter on mesh_x axis 0"},
      {partial(), sharded(1), "ReduceScatter on mesh_x axis 1"},
  };
  for (const Case& c : cases) {
    const Resharding r =
        chooseResharding(state(kMesh, c.producer), state(kMesh, c.consumer));
    EXPECT_EQ(r.toString(), c.expected)
        << "producer kind " << static_cast<int>(c.producer.kind) << " axis "
        << c.producer.axis << ", consumer kind "
        << static_cast<int>(c.consumer.kind) << " axis " << c.consumer.axis;
  }
}

TEST(ChooseResharding, ReplicatedToShardedTakesALocalPart) {
  const Resharding r =
      chooseResharding(state(kMesh, replicated()), state(kMesh, sharded(0)));
  EXPECT_EQ(r.kind, Resharding::Kind::kLocal);
}

TEST(ChooseResharding, OneAxisCutTwoWaysIsAUserErrorNamingTheCuts) {
  EXPECT_VALUE_ERROR(
      chooseResharding(
          state(kMesh, sharded(0, 3, "below a stream split into 3")),
          state(kMesh, sharded(0, /*layout=*/0))),
      "axis 0 is cut into parts two ways: its mesh_x split lies below a "
      "stream split into 3 in the producer and is the outermost split in "
      "the consumer; split both alike");
  EXPECT_VALUE_ERROR(
      chooseResharding(
          state(kMesh, sharded(0, /*layout=*/0)),
          state(kMesh, sharded(0, 2, "below a split into 2"))),
      "its mesh_x split is the outermost split in the producer and lies "
      "below a split into 2 in the consumer");
}

TEST(ChooseResharding, OnlyOneDeviceParallelTypeMayChange) {
  const DeviceMesh mesh({0, 1, 2, 3}, {2, 2});
  const ShardingState from{mesh, {{kX, sharded(1)}, {kY, sharded(0)}}};
  const ShardingState to{mesh, {}};
  EXPECT_VALUE_ERROR(
      chooseResharding(from, to), "more than one device parallel type changes");
  // The other axis keeps its sharding: a collective along mesh_y only.
  const ShardingState keep_x{mesh, {{kX, sharded(1)}}};
  EXPECT_EQ(
      chooseResharding(from, keep_x).toString(), "Allgather on mesh_y axis 0");
}

TEST(ChooseResharding, EveryMoveBetweenMeshes) {
  const DeviceMesh one({0});
  const DeviceMesh other({1});
  const DeviceMesh two({0, 1});
  const DeviceMesh shifted({2, 3});
  const DeviceMesh three({1, 2, 3});
  struct Case {
    ShardingState producer;
    ShardingState consumer;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {state(one, replicated()),
       state(other, replicated()),
       "SendRecv on mesh_x root 0"},
      {state(one, replicated()),
       state(three, replicated()),
       "Broadcast on mesh_x root 0"},
      {state(one, replicated()),
       state(three, sharded(1)),
       "Scatter on mesh_x axis 1 root 0"},
      {state(two, sharded(0)),
       state(other, replicated()),
       "Gather on mesh_x axis 0 root 1"},
      {state(three, sharded(1)),
       state(one, replicated()),
       "Gather on mesh_x axis 1 root 0"},
      {state(two, partial()),
       state(DeviceMesh({3}), replicated()),
       "Reduce on mesh_x root 3"},
      {state(two, replicated()),
       state(DeviceMesh({3}), replicated()),
       "SendRecv on mesh_x root 0"},
      {state(two, replicated()), state(other, replicated()), "local"},
      {state(two, sharded(0)),
       state(shifted, sharded(0)),
       "SendRecv on mesh_x"},
      {state(two, replicated()),
       state(shifted, replicated()),
       "SendRecv on mesh_x"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(chooseResharding(c.producer, c.consumer).toString(), c.expected)
        << c.producer.mesh << " -> " << c.consumer.mesh;
  }
}

TEST(ChooseResharding, UnsupportedMovesBetweenMeshesAreUserErrors) {
  const DeviceMesh two({0, 1});
  const DeviceMesh three({2, 3, 4});
  EXPECT_VALUE_ERROR(
      chooseResharding(state(two, sharded(0)), state(three, sharded(0))),
      "both meshes have as many devices");
  EXPECT_VALUE_ERROR(
      chooseResharding(
          state(two, sharded(0)), state(DeviceMesh({2, 3}), sharded(1))),
      "keeps its sharding");
  EXPECT_VALUE_ERROR(
      chooseResharding(
          state(DeviceMesh({0, 1, 2, 3}, {2, 2}), replicated()),
          state(DeviceMesh({4}), replicated())),
      "1-D meshes only");
}

// y = set(x) for x: [8, 4] on kMesh, each sharded on mesh_x along the given
// axis, or not at all for -1.
const TensorOp* setOp(Fusion& fusion, int64_t x_axis, int64_t y_axis) {
  TensorView* x = fusion.defineTensor({8, 4}, {}, DataType::Float);
  TensorView* y = set(x);
  x->setDeviceMesh(kMesh);
  y->setDeviceMesh(kMesh);
  if (x_axis >= 0) {
    x->outerSplit(x_axis, 2);
    x->parallelize(x_axis, kX);
  }
  if (y_axis >= 0) {
    y->outerSplit(y_axis, 2);
    y->parallelize(y_axis, kX);
  }
  return static_cast<const TensorOp*>(y->definition());
}

TEST(ShardingStates, OfASet) {
  Fusion fusion;
  const TensorOp* op = setOp(fusion, 0, 1);
  EXPECT_EQ(producerState(op).of(kX), sharded(0));
  EXPECT_EQ(consumerState(op).of(kX), sharded(1));
  EXPECT_EQ(chooseResharding(op).type, CommunicationType::AllToAll);
  EXPECT_EQ(
      chooseResharding(setOp(fusion, 0, -1)).type,
      CommunicationType::Allgather);
  EXPECT_EQ(
      chooseResharding(setOp(fusion, -1, 1)).kind, Resharding::Kind::kLocal);
}

// out = sum over devices of partial: [2, 8] with axis 0 the device part of
// an rFactored reduction; out reduces it.
const TensorOp* deviceSum(Fusion& fusion, bool shard_result) {
  TensorView* partial = fusion.defineTensor({2, 8}, {}, DataType::Float);
  partial->setDeviceMesh(kMesh);
  partial->parallelize(0, kX);
  auto* reduced = fusion.create<IterDomain>(
      constant(&fusion, 2),
      IterType::Reduction,
      shard_result ? ParallelType::Serial : kX);
  auto* kept = fusion.create<IterDomain>(constant(&fusion, 8));
  auto* out = fusion.create<TensorView>(
      std::vector<IterDomain*>{reduced, kept}, DataType::Float);
  out->setDeviceMesh(kMesh);
  if (shard_result) {
    out->outerSplit(1, 2);
    out->parallelize(1, kX);
  }
  return fusion.create<ReductionOp>(OpType::Sum, out, partial);
}

TEST(ShardingStates, OfASumOverDevices) {
  Fusion fusion;
  const TensorOp* allreduce = deviceSum(fusion, false);
  EXPECT_EQ(producerState(allreduce).of(kX), partial());
  EXPECT_EQ(consumerState(allreduce).of(kX), replicated());
  EXPECT_EQ(chooseResharding(allreduce).type, CommunicationType::Allreduce);

  const TensorOp* reduce_scatter = deviceSum(fusion, true);
  // The consumer's axis 0 (out's first non-reduction axis) gets the parts.
  EXPECT_EQ(consumerState(reduce_scatter).of(kX), sharded(0));
  const Resharding r = chooseResharding(reduce_scatter);
  EXPECT_EQ(r.type, CommunicationType::ReduceScatter);
  EXPECT_EQ(r.axis, 0);
}

TEST(ShardingStates, AcrossMeshes) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({8, 4}, {}, DataType::Float);
  TensorView* y = set(x);
  x->setDeviceMesh(DeviceMesh({0}));
  y->setDeviceMesh(DeviceMesh({1, 2}));
  y->outerSplit(0, 2);
  y->parallelize(0, kX);
  const Resharding r =
      chooseResharding(static_cast<const TensorOp*>(y->definition()));
  EXPECT_EQ(r.toString(), "Scatter on mesh_x axis 0 root 0");
}

} // namespace
} // namespace mdfuser
