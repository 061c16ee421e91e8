// SPDX-License-Identifier: MIT
#pragma once

// Which matmul–collective pairs a ring does not pay for. A ring hides a
// collective behind the GEMM beside it in d - 1 steps (2 (d - 1) for an
// allreduce), each a handshake with a peer, a move and a part of the GEMM;
// it can save at most the shorter of the two, and its steps cost their
// latency whatever the size. Where the overlap is shorter than the steps
// (the reference's M = N = K = 1024, whose GEMM takes 7 µs), the collective
// then the whole GEMM is faster, and the runtime has lowering take it
// (hir::LoweringOptions::pairs_without_rings).

#include <cstdint>
#include <string>
#include <vector>

#include "ir/fusion.h"
#include "ir/ops/tensor_op.h"
#include "ir/scalar_eval.h"
#include "passes/cost_model.h"

namespace mdfuser {

// A ring's step costs this many of the model's moves: beside the move
// itself, the handshake that frees the peer's buffer and the launch of a
// GEMM part. On four H200s at M = N = K = 1024 (fp16) the rings' steps took
// 19 µs each beyond the collective alone, against a calibrated move of 11.
inline constexpr double kRingStepMoves = 2.0;

// A linear and the collective beside it: an allgather whose output the
// linear reads, or an allreduce or reduce-scatter of its partial sums.
struct LatencyBoundPair {
  const TensorOp* linear = nullptr;
  const TensorOp* collective = nullptr;
  // The shorter of the GEMM and the collective's transfer, and what the
  // ring's steps cost, in seconds by the model.
  double overlap_seconds = 0;
  double steps_seconds = 0;
  // The linear's GEMM on this device: rows (every row of the output but
  // its last axis), columns (out_features) and depth (in_features).
  int64_t rows = 0;
  int64_t columns = 0;
  int64_t depth = 0;

  // "linear T2 beside Allgather: overlap 4.1 us, ring steps 44 us".
  std::string toString() const;
};

// The pairs of `compiled` (a fusion whose passes ran; `extents` evaluates
// its extents) outside Stream loops whose overlap, by `model`, is shorter
// than their ring's steps. Pairs in Stream loops are left out: there the
// loop's chunks overlap the collectives whether or not they are rings.
std::vector<LatencyBoundPair> latencyBoundPairs(
    const Fusion& compiled,
    const ScalarEvaluator& extents,
    const MachineModel& model);

} // namespace mdfuser
