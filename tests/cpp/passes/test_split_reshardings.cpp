// SPDX-License-Identifier: MIT
//
// splitReshardings turns a move that changes several device parallel types
// at once (which no single collective makes) into a chain of moves, one
// type each: partial sums first, then local slices, all-to-alls and
// allgathers last.

#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "ir/ops.h"
#include "multidevice/communication_type.h"
#include "multidevice/sharding.h"
#include "passes/decompose_reshardings.h"
#include "passes/propagate_shardings.h"
#include "passes/split_reshardings.h"

namespace mdfuser {
namespace {

const DeviceMesh k2x2({0, 1, 2, 3}, {2, 2});

void shard(TensorView* tv, int64_t axis, ParallelType pt) {
  tv->outerSplit(axis, 2);
  tv->parallelize(axis, pt);
}

// The collective of each operation, in order.
std::vector<std::string> moves(const Fusion& fusion) {
  std::vector<std::string> result;
  for (TensorOp* op : fusion.exprs()) {
    result.push_back(
        isResharding(op) ? chooseResharding(op).toString()
                         : std::string(op->opName()));
  }
  return result;
}

TEST(SplitReshardings, GatheringBothMeshAxesTakesTwoAllgathers) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({4, 6}, {}, DataType::Float);
  TensorView* y = set(x);
  fusion.addOutput(y);
  x->setDeviceMesh(k2x2);
  y->setDeviceMesh(k2x2);
  shard(x, 1, ParallelType::DIDx);
  shard(x, 0, ParallelType::DIDy);
  EXPECT_VALUE_ERROR(
      chooseResharding(fusion.exprs()[0]),
      "more than one device parallel type changes");

  splitReshardings(&fusion);
  EXPECT_EQ(
      moves(fusion),
      (std::vector<std::string>{
          "Allgather on mesh_x axis 1", "Allgather on mesh_y axis 0"}));
  EXPECT_EQ(fusion.exprs().back()->out(), y) << "the output keeps its identity";
  EXPECT_FALSE(isSharded(y));
}

TEST(SplitReshardings, TwoMeshAxesOnOneTensorAxisGatherInnerFirst) {
  // Axis 0 split by mesh_y, then each part by mesh_x, as DTensor's
  // (Shard(0), Shard(0)) lays it out.
  Fusion fusion;
  TensorView* x = fusion.defineTensor({8, 3}, {}, DataType::Float);
  TensorView* y = set(x);
  fusion.addOutput(y);
  x->setDeviceMesh(k2x2);
  y->setDeviceMesh(k2x2);
  shard(x, 0, ParallelType::DIDy);
  shard(x, 1, ParallelType::DIDx);

  splitReshardings(&fusion);
  const std::vector<TensorOp*> ops = fusion.exprs();
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(
      moves(fusion),
      (std::vector<std::string>{
          "Allgather on mesh_x axis 0", "Allgather on mesh_y axis 0"}));
  // In between, axis 0 is split by mesh_y only.
  EXPECT_EQ(
      deviceParallelTypes(ops[0]->out()),
      (std::vector<ParallelType>{ParallelType::DIDy}));
}

TEST(SplitReshardings, ASumOverMeshXThenAGatherOnMeshY) {
  // Rows on mesh_y, the reduced columns on mesh_x; the replicated result
  // takes an allreduce on mesh_x (while the rows are still split) and an
  // allgather on mesh_y.
  Fusion fusion;
  TensorView* x = fusion.defineTensor({4, 8}, {}, DataType::Float);
  TensorView* y = reduce(OpType::Sum, x, {1});
  fusion.addOutput(y);
  x->setDeviceMesh(k2x2);
  y->setDeviceMesh(k2x2);
  shard(x, 1, ParallelType::DIDx);
  shard(x, 0, ParallelType::DIDy);
  propagateShardings(&fusion);
  decomposeReshardings(&fusion);

  splitReshardings(&fusion);
  EXPECT_EQ(
      moves(fusion),
      (std::vector<std::string>{
          "sum", "Allreduce on mesh_x", "Allgather on mesh_y axis 0"}));
  EXPECT_EQ(fusion.exprs().back()->out(), y);
}

TEST(SplitReshardings, OneChangeStaysOneMove) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({4, 6}, {}, DataType::Float);
  TensorView* y = set(x);
  fusion.addOutput(y);
  x->setDeviceMesh(k2x2);
  y->setDeviceMesh(k2x2);
  shard(x, 1, ParallelType::DIDx);
  shard(x, 0, ParallelType::DIDy);
  shard(y, 0, ParallelType::DIDy);
  splitReshardings(&fusion);
  EXPECT_EQ(
      moves(fusion), (std::vector<std::string>{"Allgather on mesh_x axis 1"}));
}

TEST(SplitReshardings, TwoAllToAllsOnSwappedAxesAreLeftToLowering) {
  // Each step would need both types on one axis, split by types from
  // different tensors: the move is left alone, and lowering reports it.
  Fusion fusion;
  TensorView* x = fusion.defineTensor({4, 4}, {}, DataType::Float);
  TensorView* y = set(x);
  fusion.addOutput(y);
  x->setDeviceMesh(k2x2);
  y->setDeviceMesh(k2x2);
  shard(x, 1, ParallelType::DIDx);
  shard(x, 0, ParallelType::DIDy);
  shard(y, 1, ParallelType::DIDy);
  shard(y, 0, ParallelType::DIDx);
  splitReshardings(&fusion);
  ASSERT_EQ(fusion.exprs().size(), 1u);
  EXPECT_VALUE_ERROR(
      chooseResharding(fusion.exprs()[0]),
      "more than one device parallel type changes");
}

} // namespace
} // namespace mdfuser
