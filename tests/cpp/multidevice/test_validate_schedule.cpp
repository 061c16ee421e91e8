// SPDX-License-Identifier: MIT
//
// validateSchedule rejects annotations that cannot describe a sharding,
// before any pass reads them; validateReshardings rejects, after the
// passes, data movement that no single collective implements. Each error
// names the tensor and what was expected.

#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "common/row_parallel.h"
#include "multidevice/validate_schedule.h"

namespace mdfuser {
namespace {

const DeviceMesh kMesh({0, 1});

void shard(TensorView* tv, int64_t axis, int64_t parts, ParallelType pt) {
  tv->outerSplit(axis, parts);
  tv->parallelize(axis, pt);
}

// x: [8, 6] on kMesh; out = set(x).
struct SetFusion {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({8, 6}, {}, DataType::Float);
  TensorView* out = set(x);

  SetFusion() {
    fusion.addOutput(out);
    x->setDeviceMesh(kMesh);
  }
};

TEST(ValidateSchedule, AcceptsTheRowParallelExample) {
  auto fusion = test::makeRowParallelLinear(/*h=*/4, /*d=*/2, /*s=*/3);
  EXPECT_NO_THROW(validateSchedule(*fusion));
  Fusion unsharded;
  unsharded.addOutput(set(unsharded.defineTensor({-1}, {}, DataType::Float)));
  EXPECT_NO_THROW(validateSchedule(unsharded));
}

TEST(ValidateSchedule, PartsMustMatchTheMeshSize) {
  SetFusion f;
  shard(f.x, 0, 4, ParallelType::DIDx);
  EXPECT_VALUE_ERROR(
      validateSchedule(f.fusion),
      "the mesh_x axis ideviceIdx.x4{4} of T0_g_float[ideviceIdx.x4{4}, "
      "iS5{2}, iS1{6}] (DeviceMesh{0 1}) has 4 parts, but DeviceMesh{0 1} "
      "has 2 devices on mesh_x");
}

TEST(ValidateSchedule, AWholeAxisOnDevicesMustHaveOneElementPerDevice) {
  SetFusion f;
  f.x->parallelize(0, ParallelType::DIDx);
  EXPECT_VALUE_ERROR(validateSchedule(f.fusion), "has 8 parts");
}

TEST(ValidateSchedule, StaticExtentsMustDivideEvenly) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({10}, {}, DataType::Float);
  x->setDeviceMesh(DeviceMesh({0, 1, 2, 3}));
  shard(x, 0, 4, ParallelType::DIDx);
  fusion.addOutput(set(x));
  EXPECT_VALUE_ERROR(
      validateSchedule(fusion),
      "axis iS0{10} of T0_g_float[ideviceIdx.x1{4}, iS2{3}] (DeviceMesh{0 1 2 "
      "3}) has extent 10, which is not divisible into 4 equal parts");
}

TEST(ValidateSchedule, SymbolicExtentsAreLeftToRunTime) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({-1}, {}, DataType::Float);
  x->setDeviceMesh(DeviceMesh({0, 1, 2, 3}));
  shard(x, 0, 4, ParallelType::DIDx);
  fusion.addOutput(set(x));
  EXPECT_NO_THROW(validateSchedule(fusion));
}

TEST(ValidateSchedule, DeviceAxisMustBeTheOuterPartOfASplit) {
  SetFusion f;
  f.x->innerSplit(0, 2);
  f.x->parallelize(1, ParallelType::DIDx);
  EXPECT_VALUE_ERROR(
      validateSchedule(f.fusion),
      "is the inner part of a split, which would give each device a strided "
      "shard; parallelize the outer part instead");
}

TEST(ValidateSchedule, StreamAxisMustBeTheOuterPartOfASplit) {
  SetFusion f;
  f.x->innerSplit(0, 2);
  f.x->parallelize(1, ParallelType::Stream);
  EXPECT_VALUE_ERROR(
      validateSchedule(f.fusion),
      "the stream axis istreamIdx5{2} of T0_g_float[iS4{4}, istreamIdx5{2}, "
      "iS1{6}] (DeviceMesh{0 1}) is the inner part of a split");
}

TEST(ValidateSchedule, ShardedTensorsNeedAMesh) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({8}, {}, DataType::Float);
  shard(x, 0, 2, ParallelType::DIDx);
  fusion.addOutput(set(x));
  EXPECT_VALUE_ERROR(
      validateSchedule(fusion),
      "T0_g_float[ideviceIdx.x1{2}, iS2{4}] has an axis parallelized on "
      "mesh_x but no device mesh; call set_device_mesh on it");
}

TEST(ValidateSchedule, TheMeshMustHaveTheParallelTypesAxis) {
  SetFusion f;
  shard(f.x, 0, 2, ParallelType::DIDy);
  EXPECT_VALUE_ERROR(
      validateSchedule(f.fusion), "mesh_y needs a mesh of at least 2 axes");
}

TEST(ValidateSchedule, TensorsMayLiveOnDifferentMeshes) {
  // The move between them becomes a communication (SendRecv here).
  SetFusion f;
  f.out->setDeviceMesh(DeviceMesh({2, 3}));
  EXPECT_NO_THROW(validateSchedule(f.fusion));
  EXPECT_NO_THROW(validateReshardings(f.fusion));
}

TEST(ValidateReshardings, GatheringANonOutermostShardIsRefused) {
  // [serial{2}, device{2}, rest]: each device holds a run of rows of both
  // halves; an allgather would concatenate them in device order.
  SetFusion f;
  f.out->setDeviceMesh(kMesh);
  f.x->outerSplit(0, 2);
  shard(f.x, 1, 2, ParallelType::DIDx);
  EXPECT_NO_THROW(validateSchedule(f.fusion));
  EXPECT_VALUE_ERROR(
      validateReshardings(f.fusion),
      "lies below the serial split iS4{2} (non-outermost sharding): mdfuser "
      "computes on such shards but cannot move them between devices yet "
      "(Allgather on mesh_x axis 0 into T1_g_float[iS2{8}, iS3{6}]");
}

TEST(ValidateSchedule, SplitsAboveADeviceSplitMustBeEven) {
  // [stream{3}, device{2}, rest]: each of the 3 chunks of 8 rows is not
  // split evenly across 2 devices.
  SetFusion f;
  shard(f.x, 0, 3, ParallelType::Stream);
  shard(f.x, 1, 2, ParallelType::DIDx);
  EXPECT_VALUE_ERROR(
      validateSchedule(f.fusion),
      "has extent 3, which is not divisible into 2 equal parts");
}

TEST(ValidateSchedule, AnInputWithoutAMeshBesideOneMeshIsValid) {
  // propagateShardings replicates it on that mesh.
  Fusion fusion;
  TensorView* x = fusion.defineTensor({4, 8}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({6, 8}, {}, DataType::Float);
  x->setDeviceMesh(kMesh);
  fusion.addOutput(linear(x, w));
  validateSchedule(fusion);
}

TEST(ValidateSchedule, EveryInputNeedsAMeshBesideSeveralMeshes) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({4, 8}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({6, 8}, {}, DataType::Float);
  TensorView* y = set(x);
  x->setDeviceMesh(kMesh);
  y->setDeviceMesh(DeviceMesh({1}));
  fusion.addOutput(linear(y, w));
  EXPECT_VALUE_ERROR(
      validateSchedule(fusion),
      "fusion input T1_g_float[iS2{6}, iS3{8}] has no device mesh while "
      "T0_g_float[iS0{4}, iS1{8}] (DeviceMesh{0 1}) and "
      "T2_g_float[iS4{4}, iS5{8}] (DeviceMesh{1}) are on different meshes");
}

TEST(ValidateSchedule, StreamAxisOnAReductionIsAUserError) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({4, 8}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({6, 8}, {}, DataType::Float);
  TensorView* out = linear(x, w);
  fusion.addOutput(out);
  // TensorView::parallelize refuses this; IterDomain::parallelize does not
  // check, so the validator must.
  out->axis(2)->parallelize(ParallelType::Stream);
  EXPECT_VALUE_ERROR(
      validateSchedule(fusion),
      "the stream axis rstreamIdx6{8} of T2_g_float[iS4{4}, iS5{6}, "
      "rstreamIdx6{8}] comes from a reduction axis");
}

TEST(ValidateReshardings, AcceptsASetThatIsOneCollective) {
  SetFusion f;
  f.out->setDeviceMesh(kMesh);
  shard(f.x, 0, 2, ParallelType::DIDx);
  EXPECT_NO_THROW(validateReshardings(f.fusion));
}

TEST(ValidateReshardings, AComputeOperationThatMovesDataIsABug) {
  // decomposeReshardings makes every compute operation local; one left
  // over is mdfuser's fault.
  Fusion fusion;
  TensorView* in = fusion.defineTensor({4, 8}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({6, 8}, {}, DataType::Float);
  TensorView* out = linear(in, w);
  fusion.addOutput(out);
  for (TensorView* tv : {in, w, out}) {
    tv->setDeviceMesh(kMesh);
  }
  shard(in, 1, 2, ParallelType::DIDx);
  shard(out, 2, 2, ParallelType::DIDx);
  EXPECT_INTERNAL_ERROR(
      validateReshardings(fusion),
      "left a compute operation that moves data between devices");
}

TEST(ValidateReshardings, StreamChunksMustCoverTheSameElements) {
  // The producer is sharded and chunked per device ([device, stream]); the
  // consumer, gathered, is chunked over the whole axis: chunk i of one is
  // not chunk i of the other.
  SetFusion f;
  f.out->setDeviceMesh(kMesh);
  shard(f.x, 0, 2, ParallelType::DIDx);
  shard(f.x, 1, 2, ParallelType::Stream);
  shard(f.out, 0, 2, ParallelType::Stream);
  EXPECT_VALUE_ERROR(
      validateReshardings(f.fusion), "cover different elements in set");
}

TEST(ValidateReshardings, ASetNeedingTwoCollectivesIsAUserError) {
  Fusion fusion;
  const DeviceMesh mesh({0, 1, 2, 3}, {2, 2});
  TensorView* x = fusion.defineTensor({4, 6}, {}, DataType::Float);
  TensorView* y = set(x);
  fusion.addOutput(y);
  x->setDeviceMesh(mesh);
  y->setDeviceMesh(mesh);
  shard(x, 0, 2, ParallelType::DIDy);
  shard(x, 2, 2, ParallelType::DIDx);
  EXPECT_VALUE_ERROR(
      validateReshardings(fusion),
      "more than one device parallel type changes");
}

} // namespace
} // namespace mdfuser
