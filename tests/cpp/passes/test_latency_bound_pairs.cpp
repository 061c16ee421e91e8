// SPDX-License-Identifier: MIT
//
// A matmul–collective pair outside Stream loops is latency bound where the
// shorter of its GEMM and its collective's transfer, by the machine model,
// is shorter than its ring's steps (kRingStepMoves moves each): the
// reference's 1024-token allgather + linear at four devices is, the same
// pair at 64k tokens is not, and neither is a pair in a Stream loop, whose
// chunks overlap it whatever lowering makes of it.

#include <gtest/gtest.h>

#include "common/column_parallel.h"
#include "common/row_parallel.h"
#include "ir/ops/tensor_op.h"
#include "passes/latency_bound_pairs.h"
#include "passes/pipeline.h"

namespace mdfuser {
namespace {

// An H200-like machine with the move the GPU machines calibrate.
MachineModel hopper() {
  MachineModel model;
  model.gemm_flops = 700e12;
  model.gemm_half_outputs = 1024.0 * 1024;
  model.memory_bytes = 4e12;
  model.link_bytes = 300e9;
  model.statement_seconds = 8e-6;
  model.move_seconds = 11e-6;
  return model;
}

struct Compiled {
  std::unique_ptr<Fusion> fusion;
  ScalarEvaluator extents;
};

// `fusion` through the fusion passes, its input's tokens bound to `t`.
Compiled compiled(std::unique_ptr<Fusion> fusion, int64_t t) {
  runFusionPasses(fusion.get());
  Compiled c;
  c.extents.bind(fusion->inputs()[0]->logical()[0]->extent(), t);
  c.fusion = std::move(fusion);
  return c;
}

const TensorOp* onlyLinear(const Fusion& fusion) {
  const TensorOp* found = nullptr;
  for (const TensorOp* op : fusion.exprs()) {
    if (op->type() == OpType::Linear) {
      EXPECT_EQ(found, nullptr) << "one linear";
      found = op;
    }
  }
  return found;
}

TEST(LatencyBoundPairs, ShortAllgatherLinearAtFourDevices) {
  // x [1024, 1024] across four devices, w [4096, 1024] split on
  // out_features: a GEMM of 2.1 GFLOP (a few µs) beside 1.5 MiB of
  // allgather, against three ring steps.
  Compiled c = compiled(
      test::makeGatheredLinear(1024, 4, 1, DataType::Half, false), 1024);
  const std::vector<LatencyBoundPair> pairs =
      latencyBoundPairs(*c.fusion, c.extents, hopper());
  ASSERT_EQ(pairs.size(), 1u);
  EXPECT_EQ(pairs[0].linear, onlyLinear(*c.fusion));
  EXPECT_DOUBLE_EQ(pairs[0].steps_seconds, kRingStepMoves * 3 * 11e-6);
  EXPECT_LT(pairs[0].overlap_seconds, pairs[0].steps_seconds);
  // The GEMM on one device: every gathered row, its quarter of
  // out_features, all of in_features.
  EXPECT_EQ(pairs[0].rows, 1024);
  EXPECT_EQ(pairs[0].columns, 1024);
  EXPECT_EQ(pairs[0].depth, 1024);
  EXPECT_NE(
      pairs[0].toString().find("beside Allgather: overlap "), std::string::npos)
      << pairs[0].toString();
}

TEST(LatencyBoundPairs, LongAllgatherLinearPaysForItsRing) {
  Compiled c = compiled(
      test::makeGatheredLinear(1024, 4, 1, DataType::Half, false), 65536);
  EXPECT_TRUE(latencyBoundPairs(*c.fusion, c.extents, hopper()).empty());
}

TEST(LatencyBoundPairs, ReduceScatterPairsByTheirSize) {
  for (int64_t d : {2, 4}) {
    SCOPED_TRACE(testing::Message() << "d = " << d);
    Compiled small = compiled(
        test::makeScatteredLinear(256 * d, d, 1, DataType::BFloat16, false),
        1024);
    const std::vector<LatencyBoundPair> pairs =
        latencyBoundPairs(*small.fusion, small.extents, hopper());
    ASSERT_EQ(pairs.size(), 1u);
    EXPECT_DOUBLE_EQ(
        pairs[0].steps_seconds,
        kRingStepMoves * static_cast<double>(d - 1) * 11e-6);
    Compiled large = compiled(
        test::makeScatteredLinear(8192, d, 1, DataType::BFloat16, false), 8192);
    EXPECT_TRUE(
        latencyBoundPairs(*large.fusion, large.extents, hopper()).empty());
  }
}

TEST(LatencyBoundPairs, AllreduceCountsTwiceTheSteps) {
  // in_features split, the output replicated: the partial sums are
  // allreduced, 2 (d - 1) steps.
  auto fusion = test::makeShardedLinear(DeviceMesh({0, 1, 2, 3}));
  Compiled c = compiled(std::move(fusion), 16);
  const std::vector<LatencyBoundPair> pairs =
      latencyBoundPairs(*c.fusion, c.extents, hopper());
  ASSERT_EQ(pairs.size(), 1u);
  EXPECT_DOUBLE_EQ(pairs[0].steps_seconds, kRingStepMoves * 6 * 11e-6);
  EXPECT_NE(pairs[0].toString().find("beside Allreduce"), std::string::npos)
      << pairs[0].toString();
}

TEST(LatencyBoundPairs, PairsInStreamLoopsAreLeftOut) {
  Compiled c = compiled(
      test::makeGatheredLinear(1024, 4, 2, DataType::Half, false), 1024);
  EXPECT_TRUE(latencyBoundPairs(*c.fusion, c.extents, hopper()).empty());
}

TEST(LatencyBoundPairs, ALinearWithoutCollectiveIsNoPair) {
  Compiled c = compiled(test::makeRowParallelLinear(64, 1, 1), 16);
  EXPECT_TRUE(latencyBoundPairs(*c.fusion, c.extents, hopper()).empty());
}

} // namespace
} // namespace mdfuser
