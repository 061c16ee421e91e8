// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "host_ir/nodes.h"

namespace mdfuser::hir {

// A linear and the collective beside it along the rows, computed by one
// fused kernel that moves the rows through symmetric memory while its GEMM
// computes (sm_90a; runtime/fused_matmul.h): AllgatherLinear and
// LinearReduceScatter. Lowering emits one in place of the pair's ring where
// LoweringOptions::fused_matmul_communication asks for it (multidevice/
// fused_matmul_choice.h says which pairs qualify). It runs on the current
// stream and has no Wait: the kernel returns when `out` is complete there.
class FusedMatmulCommunication : public HostExpr {
 public:
  // Ranks in team order, this one among them.
  const std::vector<int64_t>& team() const {
    return team_;
  }
  TensorView* in() const;
  TensorView* weight() const;
  TensorView* out() const;
  // The axis the collective cuts: the rows (0).
  int64_t axis() const {
    return axis_;
  }
  // The pair in words, for messages: "allgather + linear".
  virtual std::string_view pairName() const = 0;
  // The kernel that computes it: "sm90" (Hopper's), or, for a
  // LinearReduceScatter, whose members pull the partial sums, "sm90_pulls".
  virtual std::string_view kernelName() const {
    return "sm90";
  }

  // "T5 = AllgatherLinear(T0, T1, team=(0 1), kernel=sm90)"
  std::string toString() const override;

 protected:
  // `op` names the statement in the errors of its checks.
  FusedMatmulCommunication(
      IrContainer* container,
      std::string_view op,
      std::vector<int64_t> team,
      TensorView* in,
      TensorView* weight,
      TensorView* out,
      int64_t axis);

 private:
  std::vector<int64_t> team_;
  int64_t axis_;
};

// out = linear(allgather(in) over `team` along the rows, weight): `in` is
// this device's rows, `out` the output over the gathered rows. The kernel
// pushes each member's rows into its peers' symmetric memory while its GEMM
// computes the tiles of the rows that have arrived.
class AllgatherLinear : public FusedMatmulCommunication {
 public:
  AllgatherLinear(
      IrContainer* container,
      std::vector<int64_t> team,
      TensorView* in,
      TensorView* weight,
      TensorView* out,
      int64_t axis = 0);

  std::string_view opName() const override {
    return "AllgatherLinear";
  }
  std::string_view pairName() const override {
    return "allgather + linear";
  }
};

// out = reduce_scatter(linear(in, weight)) over `team` along the rows:
// `in` [M, K] and `weight` [N, K] hold this device's part of K, `out`
// [M / d, N] its rows of the sum. The kernel computes the peers' rows
// first, and each member's pulling CTAs read the peers' partial sums of
// its rows as they are stored, which the kernel adds to its own (no copy
// engine: a CUDA graph can replay it).
class LinearReduceScatter : public FusedMatmulCommunication {
 public:
  LinearReduceScatter(
      IrContainer* container,
      std::vector<int64_t> team,
      TensorView* in,
      TensorView* weight,
      TensorView* out,
      int64_t axis = 0);

  std::string_view kernelName() const override {
    return "sm90_pulls";
  }

  std::string_view opName() const override {
    return "LinearReduceScatter";
  }
  std::string_view pairName() const override {
    return "linear + reduce-scatter";
  }
};

} // namespace mdfuser::hir
