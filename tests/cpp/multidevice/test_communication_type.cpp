// SPDX-License-Identifier: MIT
//
// chooseCommunication names the one collective that implements a resharding
// set or sum, from how the producer's and the consumer's device axes
// relate: dropped (allgather), added (scatter), moved (all-to-all) or summed
// over (allreduce, or reduce-scatter when the result is sharded again).

#include <sstream>

#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "ir/fusion.h"
#include "multidevice/communication_type.h"

namespace mdfuser {
namespace {

const DeviceMesh kMesh({0, 1});

void shard(TensorView* tv, int64_t axis, int64_t parts, ParallelType pt) {
  tv->outerSplit(axis, parts);
  tv->parallelize(axis, pt);
}

// y = set(x) for x: [8, 4] on kMesh, each sharded on DIDx along the given
// axis, or not at all for -1.
const TensorOp* setOp(Fusion& fusion, int64_t x_axis, int64_t y_axis) {
  TensorView* x = fusion.defineTensor({8, 4}, {}, DataType::Float);
  TensorView* y = set(x);
  x->setDeviceMesh(kMesh);
  y->setDeviceMesh(kMesh);
  if (x_axis >= 0) {
    shard(x, x_axis, 2, ParallelType::DIDx);
  }
  if (y_axis >= 0) {
    shard(y, y_axis, 2, ParallelType::DIDx);
  }
  return static_cast<const TensorOp*>(y->definition());
}

// out = sum of `in` over its logical axis `reduced`, as decomposeReshardings
// builds it after an rFactor.
TensorView* sumOver(TensorView* in, size_t reduced) {
  Fusion* fusion = fusionOf(in);
  std::vector<IterDomain*> ids;
  const std::vector<IterDomain*> logical = in->logicalNoReductions();
  for (size_t i = 0; i < logical.size(); ++i) {
    ids.push_back(fusion->create<IterDomain>(
        logical[i]->extent(),
        i == reduced ? IterType::Reduction : IterType::Iteration));
  }
  auto* out = fusion->create<TensorView>(ids, in->dtype());
  out->setDeviceMesh(*in->deviceMesh());
  fusion->create<ReductionOp>(out, in)->registerAsDefinition();
  return out;
}

// Each device holds a partial sum of the whole [2, 8] tensor: axis 0 is the
// device part of an rFactored reduction.
TensorView* partialSums(Fusion& fusion) {
  TensorView* partial = fusion.defineTensor({2, 8}, {}, DataType::Float);
  partial->setDeviceMesh(kMesh);
  partial->parallelize(0, ParallelType::DIDx);
  return partial;
}

void expectCommunication(
    const TensorOp* op, CommunicationType type, ParallelType pt) {
  CommunicationInfo info = chooseCommunication(op);
  EXPECT_EQ(info.type, type);
  EXPECT_EQ(info.parallel_type, pt);
}

TEST(CommunicationType, Names) {
  EXPECT_EQ(communicationTypeName(CommunicationType::Allreduce), "Allreduce");
  EXPECT_EQ(
      communicationTypeName(CommunicationType::ReduceScatter), "ReduceScatter");
  EXPECT_EQ(communicationTypeName(CommunicationType::AllToAll), "AllToAll");
  std::ostringstream ss;
  ss << CommunicationType::Allgather;
  EXPECT_EQ(ss.str(), "Allgather");
}

TEST(ChooseCommunication, SetFromShardedToUnshardedIsAnAllgather) {
  Fusion fusion;
  expectCommunication(
      setOp(fusion, 0, -1), CommunicationType::Allgather, ParallelType::DIDx);
}

TEST(ChooseCommunication, SetFromUnshardedToShardedIsAScatter) {
  Fusion fusion;
  expectCommunication(
      setOp(fusion, -1, 1), CommunicationType::Scatter, ParallelType::DIDx);
}

TEST(ChooseCommunication, MovingTheShardedAxisIsAnAllToAll) {
  Fusion fusion;
  expectCommunication(
      setOp(fusion, 0, 1), CommunicationType::AllToAll, ParallelType::DIDx);
}

TEST(ChooseCommunication, OnlyTheChangedMeshAxisTakesPart) {
  Fusion fusion;
  const DeviceMesh mesh({0, 1, 2, 3, 4, 5}, {2, 3});
  TensorView* x = fusion.defineTensor({4, 6}, {}, DataType::Float);
  TensorView* y = set(x);
  for (TensorView* tv : {x, y}) {
    tv->setDeviceMesh(mesh);
    shard(tv, 1, 3, ParallelType::DIDx);
  }
  shard(x, 0, 2, ParallelType::DIDy);
  expectCommunication(
      static_cast<const TensorOp*>(y->definition()),
      CommunicationType::Allgather,
      ParallelType::DIDy);
}

TEST(ChooseCommunication, SumOverTheDeviceAxisAfterRFactorIsAnAllreduce) {
  Fusion fusion;
  TensorView* out = sumOver(partialSums(fusion), 0);
  out->parallelize(0, ParallelType::DIDx); // rdeviceIdx.x, as rFactor leaves it
  ASSERT_EQ(out->axis(0)->toString().rfind("rdeviceIdx.x", 0), 0u);
  expectCommunication(
      static_cast<const TensorOp*>(out->definition()),
      CommunicationType::Allreduce,
      ParallelType::DIDx);
}

TEST(ChooseCommunication, SumThatShardsItsResultIsAReduceScatter) {
  Fusion fusion;
  TensorView* out = sumOver(partialSums(fusion), 0);
  shard(out, 1, 2, ParallelType::DIDx);
  expectCommunication(
      static_cast<const TensorOp*>(out->definition()),
      CommunicationType::ReduceScatter,
      ParallelType::DIDx);
}

TEST(ChooseCommunication, MultiInputOperationsAreNotCollectives) {
  Fusion fusion;
  TensorView* in = fusion.defineTensor({2, 8}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({4, 8}, {}, DataType::Float);
  TensorView* out = linear(in, w);
  for (TensorView* tv : {in, w, out}) {
    tv->setDeviceMesh(kMesh);
  }
  shard(in, 1, 2, ParallelType::DIDx);
  EXPECT_VALUE_ERROR(
      chooseCommunication(static_cast<const TensorOp*>(out->definition())),
      "cannot turn linear into a collective: it reshards and has 2 inputs");
}

TEST(ChooseCommunication, ChangingTheMeshIsAUserError) {
  Fusion fusion;
  const TensorOp* op = setOp(fusion, 0, 0);
  op->out()->setDeviceMesh(DeviceMesh({2, 3}));
  EXPECT_VALUE_ERROR(
      chooseCommunication(op),
      "(DeviceMesh{2 3}) changes the device mesh, which mdfuser does not "
      "support yet");
}

TEST(ChooseCommunication, TwoChangedAxesAreNotOneCollective) {
  Fusion fusion;
  const DeviceMesh mesh({0, 1, 2, 3}, {2, 2});
  TensorView* x = fusion.defineTensor({4, 6}, {}, DataType::Float);
  TensorView* y = set(x);
  x->setDeviceMesh(mesh);
  y->setDeviceMesh(mesh);
  shard(x, 0, 2, ParallelType::DIDy);
  shard(x, 2, 2, ParallelType::DIDx);
  EXPECT_VALUE_ERROR(
      chooseCommunication(static_cast<const TensorOp*>(y->definition())),
      "into a single collective: 2 device axes change");
}

TEST(ChooseCommunication, ASetThatMovesNothingIsNotACollective) {
  Fusion fusion;
  EXPECT_VALUE_ERROR(
      chooseCommunication(setOp(fusion, 1, 1)), "0 device axes change");
}

} // namespace
} // namespace mdfuser
