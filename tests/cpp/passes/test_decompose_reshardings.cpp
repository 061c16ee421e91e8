// SPDX-License-Identifier: MIT
//
// decomposeReshardings turns a contraction over a device-sharded axis into a
// local contraction (each device reduces its own slice into a partial
// tensor, whose device axis becomes an iteration axis marked rf) and a sum
// over the devices, which lowering turns into an allreduce.

#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "common/row_parallel.h"
#include "ir/ops.h"
#include "multidevice/communication_type.h"
#include "multidevice/sharding.h"
#include "passes/decompose_reshardings.h"
#include "passes/propagate_shardings.h"

namespace mdfuser {
namespace {

const DeviceMesh kMesh({0, 1});

std::unique_ptr<Fusion> decomposedRowParallel() {
  auto fusion = test::makeRowParallelLinear(/*h=*/4, /*d=*/2, /*s=*/3);
  propagateShardings(fusion.get());
  decomposeReshardings(fusion.get());
  return fusion;
}

TEST(DecomposeReshardings, RowParallelLinearBecomesLocalLinearPlusSum) {
  auto fusion = decomposedRowParallel();
  TensorView* out = fusion->outputs()[0];
  const std::vector<TensorOp*> exprs = fusion->exprs();
  ASSERT_EQ(exprs.size(), 2u);
  auto* local = dynamic_cast<LinearOp*>(exprs[0]);
  auto* sum = dynamic_cast<ReductionOp*>(exprs[1]);
  ASSERT_NE(local, nullptr);
  ASSERT_NE(sum, nullptr);
  EXPECT_EQ(local->in(), fusion->inputs()[0]);
  EXPECT_EQ(local->weight(), fusion->inputs()[1]);
  EXPECT_EQ(sum->out(), out) << "the output keeps its identity";
  EXPECT_EQ(sum->in(), local->out());

  // Each device reduces its 8 of the 16 in_features; the device part of the
  // split is now an iteration axis of the partial result.
  TensorView* partial = local->out();
  EXPECT_EQ(
      partial->toString(),
      "T3_g___bfloat[istreamIdx22{3}, iS23{ceilDiv(i0, 3)}, iS18{4}, "
      "ideviceIdx.x20{2}rf, rS21{8}rf] (DeviceMesh{0 1})");
  ASSERT_TRUE(partial->hasRoot());
  ASSERT_EQ(partial->root().size(), 3u);
  EXPECT_EQ(partial->root()[2]->toString(), "rS19{16}");
  ASSERT_EQ(partial->logical().size(), 4u);
  EXPECT_TRUE(partial->logical()[2]->isRFactorProduct());
  EXPECT_FALSE(partial->logical()[2]->isReduction());
  EXPECT_TRUE(partial->logical()[3]->isReduction());

  // The output sums over the devices only.
  EXPECT_EQ(
      out->toString(),
      "T2_g___bfloat[istreamIdx15{3}, iS16{ceilDiv(i0, 3)}, iS5{4}, "
      "rdeviceIdx.x24{2}] (DeviceMesh{0 1})");
  EXPECT_FALSE(out->hasRoot());
  EXPECT_EQ(out->logical()[2], out->axis(3));
}

TEST(DecomposeReshardings, OnlyTheSumMovesDataAndItIsAnAllreduce) {
  auto fusion = decomposedRowParallel();
  const std::vector<TensorOp*> exprs = fusion->exprs();
  ASSERT_EQ(exprs.size(), 2u);
  EXPECT_FALSE(isResharding(exprs[0]));
  EXPECT_TRUE(isResharding(exprs[1]));
  const Resharding r = chooseResharding(exprs[1]);
  EXPECT_EQ(r.type, CommunicationType::Allreduce);
  EXPECT_EQ(r.parallel_type, ParallelType::DIDx);
}

TEST(DecomposeReshardings, ThePartialsDeviceAxisTracesBackToTheRoot) {
  auto fusion = decomposedRowParallel();
  TensorView* partial = fusion->exprs()[0]->out();
  ParallelAxis in_root =
      findParallelAxis(partial, ParallelType::DIDx, partial->root());
  EXPECT_EQ(in_root.source, partial->root()[2]);
  ASSERT_NE(in_root.split, nullptr);
  EXPECT_EQ(in_root.partExtent()->value(), 8);
  ParallelAxis in_logical =
      findParallelAxis(partial, ParallelType::DIDx, partial->logical());
  EXPECT_EQ(in_logical.source, partial->logical()[2]);
  EXPECT_EQ(in_logical.split, nullptr);
  // One device's partial result is [t, 4, 1]: the device axis holds data.
  EXPECT_EQ(localExtents(partial)[2]->value(), 1);
}

TEST(DecomposeReshardings, PrintedFusionShowsTheRFactor) {
  const std::string text = decomposedRowParallel()->toString();
  for (const char* line :
       {"    root: [iS17{i0}, iS18{4}, rS19{16}]\n",
        "      Outer split: rS19{16} by factor 2 -> ideviceIdx.x20{2}rf, "
        "rS21{8}rf\n",
        "    logical: [iS17{i0}, iS18{4}, ideviceIdx.x20{2}rf, rS21{8}rf]\n",
        "     = sum(T3_g___bfloat[istreamIdx22{3}"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\nin:\n" << text;
  }
}

TEST(DecomposeReshardings, RunningTwiceChangesNothing) {
  auto fusion = decomposedRowParallel();
  const std::string once = fusion->toString();
  decomposeReshardings(fusion.get());
  EXPECT_EQ(fusion->toString(), once);
}

TEST(DecomposeReshardings, MatmulOverShardedKIsDecomposedToo) {
  Fusion fusion;
  TensorView* a = fusion.defineTensor({4, 8}, {}, DataType::Float);
  TensorView* b = fusion.defineTensor({8, 6}, {}, DataType::Float);
  fusion.addOutput(matmul(a, b));
  for (TensorView* tv : {a, b}) {
    tv->setDeviceMesh(kMesh);
  }
  a->outerSplit(1, 2);
  a->parallelize(1, ParallelType::DIDx);
  b->outerSplit(0, 2);
  b->parallelize(0, ParallelType::DIDx);
  propagateShardings(&fusion);
  decomposeReshardings(&fusion);
  const std::vector<TensorOp*> exprs = fusion.exprs();
  ASSERT_EQ(exprs.size(), 2u);
  EXPECT_NE(dynamic_cast<MatmulOp*>(exprs[0]), nullptr);
  EXPECT_FALSE(isResharding(exprs[0]));
  EXPECT_EQ(chooseResharding(exprs[1]).type, CommunicationType::Allreduce);
}

TEST(DecomposeReshardings, DataParallelOnMeshYRowParallelOnMeshX) {
  // A 2x2 mesh: rows split across mesh_y, in_features across mesh_x. Only
  // mesh_x is summed over; the rows stay sharded on mesh_y.
  Fusion fusion;
  TensorView* in = fusion.defineTensor({4, 8}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({6, 8}, {}, DataType::Float);
  TensorView* out = linear(in, w);
  fusion.addOutput(out);
  const DeviceMesh mesh({0, 1, 2, 3}, {2, 2});
  in->setDeviceMesh(mesh);
  w->setDeviceMesh(mesh);
  in->outerSplit(1, 2);
  in->parallelize(1, ParallelType::DIDx);
  in->outerSplit(0, 2);
  in->parallelize(0, ParallelType::DIDy);
  w->outerSplit(1, 2);
  w->parallelize(1, ParallelType::DIDx);
  propagateShardings(&fusion);
  decomposeReshardings(&fusion);
  const std::vector<TensorOp*> exprs = fusion.exprs();
  ASSERT_EQ(exprs.size(), 2u);
  // The partial result keeps its rows sharded on mesh_y.
  IterDomain* rows = loopAxis(exprs[0]->out(), ParallelType::DIDy);
  ASSERT_NE(rows, nullptr);
  EXPECT_EQ(rows->extent()->value(), 2);
  const Resharding r = chooseResharding(exprs[1]);
  EXPECT_EQ(r.type, CommunicationType::Allreduce);
  EXPECT_EQ(r.parallel_type, ParallelType::DIDx);
  EXPECT_EQ(
      shardingOfLogicalAxes(out),
      (std::vector<ParallelType>{ParallelType::DIDy, ParallelType::Serial}));
}

TEST(DecomposeReshardings, ALinearWithBiasAddsTheBiasAfterTheSum) {
  // sum_d(in_d @ w_d^T + bias) would add the bias once per device: the bias
  // is added once, after the sum over devices.
  Fusion fusion;
  TensorView* in = fusion.defineTensor({4, 8}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({6, 8}, {}, DataType::Float);
  TensorView* bias = fusion.defineTensor({6}, {}, DataType::Float);
  TensorView* out = linear(in, w, bias);
  fusion.addOutput(out);
  for (TensorView* tv : {in, w, bias}) {
    tv->setDeviceMesh(kMesh);
  }
  in->outerSplit(1, 2);
  in->parallelize(1, ParallelType::DIDx);
  w->outerSplit(1, 2);
  w->parallelize(1, ParallelType::DIDx);
  propagateShardings(&fusion);
  decomposeReshardings(&fusion);
  const std::vector<TensorOp*> exprs = fusion.exprs();
  ASSERT_EQ(exprs.size(), 3u) << fusion.toString();
  auto* local = dynamic_cast<LinearOp*>(exprs[0]);
  ASSERT_NE(local, nullptr);
  EXPECT_EQ(local->bias(), nullptr);
  EXPECT_TRUE(isDeviceSum(exprs[1]));
  EXPECT_EQ(chooseResharding(exprs[1]).type, CommunicationType::Allreduce);
  EXPECT_EQ(exprs[2]->type(), OpType::Add);
  EXPECT_EQ(exprs[2]->out(), out);
  EXPECT_EQ(
      exprs[2]->tensorInputs(),
      (std::vector<TensorView*>{exprs[1]->out(), bias}));
}

TEST(DecomposeReshardings, ASumShardedOnAnotherAxisIsAReduceScatter) {
  // The output sharded on its rows by the user: the partial sums are
  // reduced and scattered over the rows at once.
  Fusion fusion;
  TensorView* in = fusion.defineTensor({4, 8}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({6, 8}, {}, DataType::Float);
  TensorView* out = linear(in, w);
  fusion.addOutput(out);
  for (TensorView* tv : {in, w, out}) {
    tv->setDeviceMesh(kMesh);
  }
  in->outerSplit(1, 2);
  in->parallelize(1, ParallelType::DIDx);
  w->outerSplit(1, 2);
  w->parallelize(1, ParallelType::DIDx);
  out->outerSplit(0, 2);
  out->parallelize(0, ParallelType::DIDx);
  propagateShardings(&fusion);
  decomposeReshardings(&fusion);
  const std::vector<TensorOp*> exprs = fusion.exprs();
  ASSERT_EQ(exprs.size(), 2u);
  EXPECT_FALSE(isResharding(exprs[0]));
  EXPECT_EQ(exprs[1]->out(), out);
  const Resharding r = chooseResharding(exprs[1]);
  EXPECT_EQ(r.type, CommunicationType::ReduceScatter);
  EXPECT_EQ(r.axis, 0);
}

TEST(DecomposeReshardings, AProducerShardedOtherwiseIsReshardedFirst) {
  // Sequence parallel: the input's rows and the weight's out_features are
  // both on mesh_x. The weight decides; the input is gathered before the
  // linear.
  Fusion fusion;
  TensorView* in = fusion.defineTensor({4, 8}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({6, 8}, {}, DataType::Float);
  TensorView* out = linear(in, w);
  fusion.addOutput(out);
  in->setDeviceMesh(kMesh);
  w->setDeviceMesh(kMesh);
  in->outerSplit(0, 2);
  in->parallelize(0, ParallelType::DIDx);
  w->outerSplit(0, 2);
  w->parallelize(0, ParallelType::DIDx);
  propagateShardings(&fusion);
  decomposeReshardings(&fusion);
  const std::vector<TensorOp*> exprs = fusion.exprs();
  ASSERT_EQ(exprs.size(), 2u);
  ASSERT_NE(dynamic_cast<LoadStoreOp*>(exprs[0]), nullptr);
  EXPECT_EQ(exprs[0]->tensorInputs()[0], in);
  EXPECT_EQ(chooseResharding(exprs[0]).type, CommunicationType::Allgather);
  EXPECT_FALSE(isSharded(exprs[0]->out()));
  EXPECT_EQ(exprs[1]->out(), out);
  EXPECT_FALSE(isResharding(exprs[1]));
  EXPECT_EQ(
      shardingOfLogicalAxes(out),
      (std::vector<ParallelType>{ParallelType::Serial, ParallelType::DIDx}));
}

TEST(DecomposeReshardings, ASliceOfAnAxisShardedOnMeshXKeepsMeshY) {
  // On a 2x2 mesh, rows on mesh_y and columns on mesh_x; the slice cuts the
  // columns, which are gathered first (mesh_x only), and the rows stay
  // split.
  Fusion fusion;
  TensorView* x = fusion.defineTensor({4, 8}, {}, DataType::Float);
  Scalar* zero = constant(&fusion, 0);
  TensorView* out =
      slice(x, {zero, zero}, {constant(&fusion, 4), constant(&fusion, 4)});
  fusion.addOutput(out);
  x->setDeviceMesh(DeviceMesh({0, 1, 2, 3}, {2, 2}));
  x->outerSplit(1, 2);
  x->parallelize(1, ParallelType::DIDx);
  x->outerSplit(0, 2);
  x->parallelize(0, ParallelType::DIDy);
  propagateShardings(&fusion);
  decomposeReshardings(&fusion);
  const std::vector<TensorOp*> exprs = fusion.exprs();
  ASSERT_EQ(exprs.size(), 2u);
  const Resharding gather = chooseResharding(exprs[0]);
  EXPECT_EQ(gather.type, CommunicationType::Allgather);
  EXPECT_EQ(gather.parallel_type, ParallelType::DIDx);
  EXPECT_EQ(exprs[1]->out(), out);
  EXPECT_FALSE(isResharding(exprs[1]));
  EXPECT_EQ(
      shardingOfLogicalAxes(out),
      (std::vector<ParallelType>{ParallelType::DIDy, ParallelType::Serial}));
}

TEST(DecomposeReshardings, ReshardedProducersAreSharedByTheirConsumers) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({4, 8}, {}, DataType::Float);
  TensorView* w1 = fusion.defineTensor({6, 8}, {}, DataType::Float);
  TensorView* w2 = fusion.defineTensor({6, 8}, {}, DataType::Float);
  fusion.addOutput(linear(x, w1));
  fusion.addOutput(linear(x, w2));
  for (TensorView* tv : {x, w1, w2}) {
    tv->setDeviceMesh(kMesh);
    tv->outerSplit(0, 2);
    tv->parallelize(0, ParallelType::DIDx);
  }
  propagateShardings(&fusion);
  decomposeReshardings(&fusion);
  int gathers = 0;
  for (TensorOp* op : fusion.exprs()) {
    gathers += dynamic_cast<LoadStoreOp*>(op) != nullptr ? 1 : 0;
  }
  EXPECT_EQ(gathers, 1);
}

TEST(DecomposeReshardings, LeavesLocalReductionsAlone) {
  Fusion fusion;
  TensorView* in = fusion.defineTensor({4, 8}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({6, 8}, {}, DataType::Float);
  TensorView* out = linear(in, w);
  fusion.addOutput(out);
  in->setDeviceMesh(kMesh);
  w->setDeviceMesh(kMesh);
  in->outerSplit(0, 2);
  in->parallelize(0, ParallelType::DIDx); // shards rows, not in_features
  propagateShardings(&fusion);
  decomposeReshardings(&fusion);
  ASSERT_EQ(fusion.exprs().size(), 1u);
  EXPECT_EQ(out->definition(), fusion.exprs()[0]);
  EXPECT_FALSE(out->hasRoot());
}

TEST(DecomposeReshardings, AnUnsplitDeviceReductionLeavesOnePartialPerDevice) {
  // in_features of extent 2 on 2 devices without a split: each device holds
  // one of them, its partial result is its product, and the sum is over the
  // devices.
  Fusion fusion;
  TensorView* in = fusion.defineTensor({4, 2}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({6, 2}, {}, DataType::Float);
  fusion.addOutput(linear(in, w));
  for (TensorView* tv : {in, w}) {
    tv->setDeviceMesh(kMesh);
    tv->parallelize(1, ParallelType::DIDx);
  }
  propagateShardings(&fusion);
  decomposeReshardings(&fusion);
  const std::vector<TensorOp*> exprs = fusion.exprs();
  ASSERT_EQ(exprs.size(), 2u);
  EXPECT_FALSE(isResharding(exprs[0]));
  EXPECT_EQ(chooseResharding(exprs[1]).type, CommunicationType::Allreduce);
}

TEST(DecomposeReshardings, ASumToOneDeviceIsALocalSumAndAReduce) {
  // x on {0 1} split along the summed rows, the sum on {1}: each device
  // sums its rows where they are, and the partial sums are reduced to 1.
  Fusion fusion;
  TensorView* x = fusion.defineTensor({4, 5}, {}, DataType::Float);
  TensorView* y = reduce(OpType::Sum, x, {0});
  fusion.addOutput(y);
  x->setDeviceMesh(kMesh);
  x->outerSplit(0, 2);
  x->parallelize(0, ParallelType::DIDx);
  y->setDeviceMesh(DeviceMesh({1}));
  propagateShardings(&fusion);
  decomposeReshardings(&fusion);
  const std::vector<TensorOp*> exprs = fusion.exprs();
  ASSERT_EQ(exprs.size(), 2u) << fusion.toString();
  EXPECT_EQ(exprs[0]->out()->deviceMesh(), kMesh);
  EXPECT_FALSE(isResharding(exprs[0]));
  EXPECT_EQ(exprs[1]->out(), y);
  const Resharding r = chooseResharding(exprs[1]);
  EXPECT_EQ(r.type, CommunicationType::Reduce);
  EXPECT_EQ(r.root, 1);
}

} // namespace
} // namespace mdfuser
