// SPDX-License-Identifier: MIT
//
// Which allgather + linear and linear + reduce-scatter pairs the fused
// kernels compute (fusedAllgatherLinearObstacle,
// fusedLinearReduceScatterObstacle), when a choice fuses them
// (fusesAllgatherLinear, fusesLinearReduceScatter), and the error of a
// forced choice the run cannot have (checkFusedMatmulRequest).

#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "multidevice/fused_matmul_choice.h"

namespace mdfuser {
namespace {

// Two devices gathering the rows of a BFloat16 [8, K] input.
AllgatherLinearPair qualifying() {
  AllgatherLinearPair pair;
  pair.team_size = 2;
  pair.in_rank = 2;
  pair.weight_rank = 2;
  pair.out_rank = 2;
  pair.axis = 0;
  pair.out_axis = 0;
  pair.in_dtype = DataType::BFloat16;
  pair.weight_dtype = DataType::BFloat16;
  pair.out_dtype = DataType::BFloat16;
  pair.rows = 8;
  return pair;
}

TEST(FusedMatmulChoice, ARowGatherOfHalvesWithoutBiasQualifies) {
  EXPECT_EQ(fusedAllgatherLinearObstacle(qualifying()), "");
  AllgatherLinearPair half = qualifying();
  half.in_dtype = half.weight_dtype = half.out_dtype = DataType::Half;
  half.team_size = 4;
  EXPECT_EQ(fusedAllgatherLinearObstacle(half), "");
  // Symbolic rows: a device split, which divides evenly by construction.
  AllgatherLinearPair symbolic = qualifying();
  symbolic.rows.reset();
  symbolic.team_size = 3;
  EXPECT_EQ(fusedAllgatherLinearObstacle(symbolic), "");
}

TEST(FusedMatmulChoice, EachObstacleIsNamed) {
  auto obstacle = [](auto change) {
    AllgatherLinearPair pair = qualifying();
    change(pair);
    return fusedAllgatherLinearObstacle(pair);
  };
  EXPECT_EQ(
      obstacle([](auto& p) { p.team_size = 1; }),
      "its team has 1 device; it needs two or more");
  EXPECT_EQ(obstacle([](auto& p) { p.bias = true; }), "the linear has a bias");
  EXPECT_EQ(
      obstacle([](auto& p) { p.in_rank = 3; }),
      "the kernel takes a 2-D input, weight and output, got 3-D, 2-D and "
      "2-D");
  EXPECT_EQ(
      obstacle([](auto& p) { p.axis = 1; }),
      "the kernel gathers rows (axis 0), got axis 1 of the input and 0 of "
      "the output");
  EXPECT_EQ(
      obstacle([](auto& p) { p.in_dtype = DataType::Float; }),
      "the kernel takes BFloat16 or Half throughout, got Float input, "
      "BFloat16 weight and BFloat16 output");
  EXPECT_EQ(
      obstacle([](auto& p) { p.out_dtype = DataType::Half; }),
      "the kernel takes BFloat16 or Half throughout, got BFloat16 input, "
      "BFloat16 weight and Half output");
  EXPECT_EQ(
      obstacle([](auto& p) { p.team_size = 3; }),
      "its 8 rows do not divide evenly among 3 devices");
}

TEST(FusedMatmulChoice, OnlyOnFusesAndOnlyWhereTheKernelsAreUsable) {
  const AllgatherLinearPair pair = qualifying();
  EXPECT_TRUE(fusesAllgatherLinear(FusedMatmulChoice::kOn, true, pair));
  EXPECT_FALSE(fusesAllgatherLinear(FusedMatmulChoice::kOn, false, pair));
  // Auto is off until a cost model decides.
  EXPECT_FALSE(fusesAllgatherLinear(FusedMatmulChoice::kAuto, true, pair));
  EXPECT_FALSE(fusesAllgatherLinear(FusedMatmulChoice::kOff, true, pair));
  AllgatherLinearPair with_bias = pair;
  with_bias.bias = true;
  EXPECT_FALSE(fusesAllgatherLinear(FusedMatmulChoice::kOn, true, with_bias));
}

TEST(FusedMatmulChoice, AForcedChoiceTheRunCannotHaveIsAValueError) {
  EXPECT_VALUE_ERROR(
      checkFusedMatmulRequest(FusedMatmulChoice::kOn, "the inputs are CPU"),
      "_enable_options=[\"fused_matmul_communication\"] asks for the fused "
      "allgather + linear and linear + reduce-scatter kernels, which this "
      "run cannot have: the inputs are CPU");
  checkFusedMatmulRequest(FusedMatmulChoice::kOn, "");
  checkFusedMatmulRequest(FusedMatmulChoice::kAuto, "no kernels");
  checkFusedMatmulRequest(FusedMatmulChoice::kOff, "no kernels");
}

// Two devices scattering the rows of a BFloat16 [8, N] sum.
LinearReduceScatterPair qualifyingScatter() {
  LinearReduceScatterPair pair;
  pair.team_size = 2;
  pair.in_rank = 2;
  pair.weight_rank = 2;
  pair.out_rank = 2;
  pair.axis = 0;
  pair.in_dtype = DataType::BFloat16;
  pair.weight_dtype = DataType::BFloat16;
  pair.out_dtype = DataType::BFloat16;
  pair.rows = 8;
  return pair;
}

TEST(FusedMatmulChoice, ARowReduceScatterOfHalvesWithoutBiasQualifies) {
  EXPECT_EQ(fusedLinearReduceScatterObstacle(qualifyingScatter()), "");
  LinearReduceScatterPair half = qualifyingScatter();
  half.in_dtype = half.weight_dtype = half.out_dtype = DataType::Half;
  half.team_size = 4;
  EXPECT_EQ(fusedLinearReduceScatterObstacle(half), "");
  LinearReduceScatterPair symbolic = qualifyingScatter();
  symbolic.rows.reset();
  symbolic.team_size = 3;
  EXPECT_EQ(fusedLinearReduceScatterObstacle(symbolic), "");
}

TEST(FusedMatmulChoice, EachReduceScatterObstacleIsNamed) {
  auto obstacle = [](auto change) {
    LinearReduceScatterPair pair = qualifyingScatter();
    change(pair);
    return fusedLinearReduceScatterObstacle(pair);
  };
  EXPECT_EQ(
      obstacle([](auto& p) { p.team_size = 1; }),
      "its team has 1 device; it needs two or more");
  EXPECT_EQ(obstacle([](auto& p) { p.bias = true; }), "the linear has a bias");
  EXPECT_EQ(
      obstacle([](auto& p) { p.weight_rank = 3; }),
      "the kernel takes a 2-D input, weight and output, got 2-D, 3-D and "
      "2-D");
  EXPECT_EQ(
      obstacle([](auto& p) { p.out_rank = 1; }),
      "the kernel takes a 2-D input, weight and output, got 2-D, 2-D and "
      "1-D");
  EXPECT_EQ(
      obstacle([](auto& p) { p.axis = 1; }),
      "the kernel scatters rows (axis 0), got axis 1 of the output");
  EXPECT_EQ(
      obstacle([](auto& p) { p.weight_dtype = DataType::Half; }),
      "the kernel takes BFloat16 or Half throughout, got BFloat16 input, "
      "Half weight and BFloat16 output");
  EXPECT_EQ(
      obstacle([](auto& p) {
        p.in_dtype = p.weight_dtype = p.out_dtype = DataType::Float;
      }),
      "the kernel takes BFloat16 or Half throughout, got Float input, "
      "Float weight and Float output");
  EXPECT_EQ(
      obstacle([](auto& p) { p.team_size = 3; }),
      "its 8 rows do not divide evenly among 3 devices");
}

TEST(FusedMatmulChoice, OnlyOnFusesAReduceScatterWhereTheKernelsAreUsable) {
  const LinearReduceScatterPair pair = qualifyingScatter();
  EXPECT_TRUE(fusesLinearReduceScatter(FusedMatmulChoice::kOn, true, pair));
  EXPECT_FALSE(fusesLinearReduceScatter(FusedMatmulChoice::kOn, false, pair));
  // Auto is off until a cost model decides.
  EXPECT_FALSE(fusesLinearReduceScatter(FusedMatmulChoice::kAuto, true, pair));
  EXPECT_FALSE(fusesLinearReduceScatter(FusedMatmulChoice::kOff, true, pair));
  LinearReduceScatterPair with_bias = pair;
  with_bias.bias = true;
  EXPECT_FALSE(
      fusesLinearReduceScatter(FusedMatmulChoice::kOn, true, with_bias));
}

} // namespace
} // namespace mdfuser
