// SPDX-License-Identifier: MIT
//
// decomposeReshardings on grouped_mm: an expert-sharded weight (its group
// axis on mesh_x) and a sharded K both leave partial sums, summed by an
// allreduce, without moving the weight; sharded tokens, the ragged axis,
// are gathered first.

#include <gtest/gtest.h>

#include "ir/ops.h"
#include "multidevice/communication_type.h"
#include "multidevice/sharding.h"
#include "passes/decompose_reshardings.h"
#include "passes/propagate_shardings.h"

namespace mdfuser {
namespace {

const DeviceMesh kMesh({0, 1});

struct Experts {
  Fusion fusion;
  TensorView* tokens;
  TensorView* weight;
  TensorView* offsets;
  TensorView* out;

  Experts() {
    tokens = fusion.defineTensor({6, 8}, {}, DataType::Float);
    weight = fusion.defineTensor({4, 8, 6}, {}, DataType::Float);
    offsets = fusion.defineTensor({4}, {}, DataType::Int32);
    out = groupedMm(tokens, weight, offsets);
    fusion.addOutput(out);
    for (TensorView* tv : {tokens, weight, offsets}) {
      tv->setDeviceMesh(kMesh);
    }
  }

  std::vector<TensorOp*> decomposed() {
    propagateShardings(&fusion);
    decomposeReshardings(&fusion);
    return fusion.exprs();
  }
};

TEST(DecomposeGroupedMm, ExpertShardedWeightLeavesPartialSumsAndAnAllreduce) {
  Experts e;
  e.weight->outerSplit(0, 2);
  e.weight->parallelize(0, ParallelType::DIDx);
  const std::vector<TensorOp*> exprs = e.decomposed();
  ASSERT_EQ(exprs.size(), 2u);
  auto* local = dynamic_cast<GroupedMmOp*>(exprs[0]);
  ASSERT_NE(local, nullptr);
  EXPECT_EQ(local->b(), e.weight) << "the weight is not moved";
  EXPECT_EQ(local->offsets(), e.offsets);
  EXPECT_FALSE(isResharding(exprs[0]));
  EXPECT_EQ(exprs[1]->out(), e.out);
  EXPECT_EQ(chooseResharding(exprs[1]).type, CommunicationType::Allreduce);
}

TEST(
    DecomposeGroupedMm,
    ExpertShardedWeightWithTokenShardedOutputReduceScatters) {
  Experts e;
  e.weight->outerSplit(0, 2);
  e.weight->parallelize(0, ParallelType::DIDx);
  e.out->setDeviceMesh(kMesh);
  e.out->outerSplit(0, 2);
  e.out->parallelize(0, ParallelType::DIDx);
  const std::vector<TensorOp*> exprs = e.decomposed();
  ASSERT_EQ(exprs.size(), 2u);
  EXPECT_NE(dynamic_cast<GroupedMmOp*>(exprs[0]), nullptr);
  const Resharding r = chooseResharding(exprs[1]);
  EXPECT_EQ(r.type, CommunicationType::ReduceScatter);
  EXPECT_EQ(r.axis, 0);
}

TEST(DecomposeGroupedMm, ShardedKIsRowParallel) {
  Experts e;
  e.tokens->outerSplit(1, 2);
  e.tokens->parallelize(1, ParallelType::DIDx);
  e.weight->outerSplit(1, 2);
  e.weight->parallelize(1, ParallelType::DIDx);
  const std::vector<TensorOp*> exprs = e.decomposed();
  ASSERT_EQ(exprs.size(), 2u);
  EXPECT_NE(dynamic_cast<GroupedMmOp*>(exprs[0]), nullptr);
  EXPECT_FALSE(isResharding(exprs[0]));
  EXPECT_EQ(chooseResharding(exprs[1]).type, CommunicationType::Allreduce);
}

TEST(DecomposeGroupedMm, ShardedNStaysLocal) {
  Experts e;
  e.weight->outerSplit(2, 2);
  e.weight->parallelize(2, ParallelType::DIDx);
  const std::vector<TensorOp*> exprs = e.decomposed();
  ASSERT_EQ(exprs.size(), 1u);
  EXPECT_FALSE(isResharding(exprs[0]));
  EXPECT_TRUE(isSharded(e.out));
}

TEST(DecomposeGroupedMm, ShardedTokensAreGatheredFirst) {
  // The offsets index the whole token axis: a device cannot compute from
  // its rows alone.
  Experts e;
  e.tokens->outerSplit(0, 2);
  e.tokens->parallelize(0, ParallelType::DIDx);
  const std::vector<TensorOp*> exprs = e.decomposed();
  ASSERT_EQ(exprs.size(), 2u);
  ASSERT_NE(dynamic_cast<LoadStoreOp*>(exprs[0]), nullptr);
  EXPECT_EQ(exprs[0]->tensorInputs()[0], e.tokens);
  EXPECT_EQ(chooseResharding(exprs[0]).type, CommunicationType::Allgather);
  EXPECT_FALSE(isSharded(e.out));
}

} // namespace
} // namespace mdfuser
