// SPDX-License-Identifier: MIT
//
// propagateShardings lets users annotate only the fusion inputs: meshes,
// device splits and stream splits flow from producers to consumers along
// the axes each operation maps to each other.

#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "common/row_parallel.h"
#include "multidevice/sharding.h"
#include "passes/propagate_shardings.h"

namespace mdfuser {
namespace {

const DeviceMesh kMesh({0, 1});

void shard(TensorView* tv, int64_t axis, int64_t parts, ParallelType pt) {
  tv->outerSplit(axis, parts);
  tv->parallelize(axis, pt);
}

TEST(PropagateShardings, RowParallelLinearOutput) {
  auto fusion = test::makeRowParallelLinear(/*h=*/4, /*d=*/2, /*s=*/3);
  TensorView* out = fusion->outputs()[0];
  EXPECT_EQ(out->toString(), "T2_g___bfloat[iS4{i0}, iS5{4}, rS6{16}]");
  propagateShardings(fusion.get());
  // The stream split of the tokens reaches the output's tokens; the device
  // split of in_features reaches the reduction axis.
  EXPECT_EQ(
      out->toString(),
      "T2_g___bfloat[istreamIdx15{3}, iS16{ceilDiv(i0, 3)}, iS5{4}, "
      "rdeviceIdx.x13{2}, rS14{8}] (DeviceMesh{0 1})");
  auto* device_split = dynamic_cast<Split*>(out->axis(3)->definition());
  ASSERT_NE(device_split, nullptr);
  EXPECT_EQ(device_split->in(), out->logical()[2]);
  EXPECT_FALSE(device_split->innerSplit());
  // The inputs were already annotated and keep their schedule.
  EXPECT_EQ(
      fusion->inputs()[1]->toString(),
      "T1_g___bfloat[iS2{4}, ideviceIdx.x11{2}, iS12{8}] (DeviceMesh{0 1})");
}

TEST(PropagateShardings, AnInputWithoutAMeshIsReplicatedOnTheMesh) {
  // A row-parallel linear whose bias the user left without a mesh.
  Fusion fusion;
  TensorView* x = fusion.defineTensor({4, 8}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({6, 8}, {}, DataType::Float);
  TensorView* b = fusion.defineTensor({6}, {}, DataType::Float);
  fusion.addOutput(linear(x, w, b));
  for (TensorView* tv : {x, w}) {
    tv->setDeviceMesh(kMesh);
    shard(tv, 1, 2, ParallelType::DIDx);
  }
  propagateShardings(&fusion);
  EXPECT_EQ(b->toString(), "T2_g_float[iS4{6}] (DeviceMesh{0 1})");
}

TEST(PropagateShardings, FlowsThroughAChain) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({8, -1}, {}, DataType::Float);
  TensorView* y = set(x);
  TensorView* z = set(y);
  fusion.addOutput(z);
  x->setDeviceMesh(kMesh);
  shard(x, 0, 2, ParallelType::DIDx);
  shard(x, 2, 3, ParallelType::Stream);
  propagateShardings(&fusion);
  for (TensorView* tv : {y, z}) {
    ASSERT_TRUE(tv->hasDeviceMesh()) << tv->toString();
    EXPECT_EQ(*tv->deviceMesh(), kMesh);
    ASSERT_EQ(tv->nDims(), 4) << tv->toString();
    EXPECT_EQ(tv->axis(0)->parallelType(), ParallelType::DIDx);
    EXPECT_EQ(tv->axis(0)->extent()->value(), 2);
    EXPECT_EQ(tv->axis(1)->extent()->value(), 4);
    EXPECT_EQ(tv->axis(2)->parallelType(), ParallelType::Stream);
    EXPECT_EQ(tv->axis(3)->extent()->toString(), "ceilDiv(i0, 3)");
  }
}

TEST(PropagateShardings, ReplaysInnerSplitsAsInnerSplits) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({12}, {}, DataType::Float);
  TensorView* y = set(x);
  fusion.addOutput(y);
  x->innerSplit(0, 4);
  x->parallelize(0, ParallelType::Stream);
  propagateShardings(&fusion);
  ASSERT_EQ(y->nDims(), 2);
  auto* s = dynamic_cast<Split*>(y->axis(0)->definition());
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->innerSplit());
  EXPECT_EQ(y->axis(0)->toString(), "istreamIdx4{3}");
  EXPECT_EQ(y->axis(1)->toString(), "iS5{4}");
  EXPECT_FALSE(y->hasDeviceMesh()) << "no producer has a mesh";
}

TEST(PropagateShardings, WeightShardingOfOutFeaturesReachesTheOutput) {
  Fusion fusion;
  TensorView* in = fusion.defineTensor({-1, 8}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({4, 8}, {}, DataType::Float);
  TensorView* out = linear(in, w);
  fusion.addOutput(out);
  in->setDeviceMesh(kMesh);
  w->setDeviceMesh(kMesh);
  shard(w, 0, 2, ParallelType::DIDx);
  propagateShardings(&fusion);
  EXPECT_EQ(
      out->toString(),
      "T2_g_float[iS4{i0}, ideviceIdx.x9{2}, iS10{2}, rS6{8}] "
      "(DeviceMesh{0 1})");
}

TEST(PropagateShardings, AConsumerKeepsAParallelTypeItAlreadyUses) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({8, 6}, {}, DataType::Float);
  TensorView* y = set(x);
  fusion.addOutput(y);
  x->setDeviceMesh(kMesh);
  shard(x, 0, 2, ParallelType::DIDx);
  shard(y, 1, 2, ParallelType::DIDx);
  const std::string before = y->toString();
  propagateShardings(&fusion);
  EXPECT_EQ(y->toString().substr(before.size()), " (DeviceMesh{0 1})");
  EXPECT_EQ(y->toString().substr(0, before.size()), before);
}

TEST(PropagateShardings, AnAlreadySplitAxisIsLeftAlone) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({8}, {}, DataType::Float);
  TensorView* y = set(x);
  fusion.addOutput(y);
  x->setDeviceMesh(kMesh);
  shard(x, 0, 2, ParallelType::DIDx);
  y->split(0, 4);
  propagateShardings(&fusion);
  EXPECT_EQ(loopAxis(y, ParallelType::DIDx), nullptr);
  EXPECT_EQ(y->nDims(), 2);
  EXPECT_TRUE(y->hasDeviceMesh());
}

TEST(PropagateShardings, AConsumerKeepsItsOwnMesh) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({8}, {}, DataType::Float);
  TensorView* y = set(x);
  fusion.addOutput(y);
  x->setDeviceMesh(kMesh);
  y->setDeviceMesh(DeviceMesh({2, 3}));
  propagateShardings(&fusion);
  EXPECT_EQ(*y->deviceMesh(), DeviceMesh({2, 3}));
}

TEST(PropagateShardings, AStreamSplitStopsAtAReduction) {
  // A reduction over the chunked axis would need the chunks summed across
  // loop iterations: the consumer is not chunked and runs after the loop.
  Fusion fusion;
  TensorView* in = fusion.defineTensor({4, 9}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({6, 9}, {}, DataType::Float);
  TensorView* out = linear(in, w);
  fusion.addOutput(out);
  shard(in, 1, 3, ParallelType::Stream);
  propagateShardings(&fusion);
  EXPECT_EQ(out->toString(), "T2_g_float[iS4{4}, iS5{6}, rS6{9}]");
}

TEST(PropagateShardings, LeavesAnUnscheduledFusionAlone) {
  Fusion fusion;
  TensorView* in = fusion.defineTensor({-1, 8}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({4, 8}, {}, DataType::Float);
  fusion.addOutput(set(linear(in, w)));
  const std::string before = fusion.toString();
  propagateShardings(&fusion);
  EXPECT_EQ(fusion.toString(), before);
}

} // namespace
} // namespace mdfuser
