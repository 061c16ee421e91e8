// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ir/dtype.h"
#include "ir/ops.h"

// Whether an allgather and the linear consuming it, or a linear and the
// reduce-scatter of its partial sums, are computed by one fused kernel (the
// host statements AllgatherLinear and LinearReduceScatter; the kernels are
// described in runtime/fused_matmul.h) instead of a ring of moves beside
// GEMMs. Lowering (host_ir/lower_rings.cpp) and the stream-chunk cost model
// (passes/choose_stream_chunks.cpp) ask the same question here, which is why
// it lives below both.
namespace mdfuser {

// Fusing matmul–communication pairs: never (kOff), where mdfuser judges it
// faster (kAuto: the pairs the runtime chose, hir::LoweringOptions::
// fused_pairs, which lowering then treats as kOn; nothing by itself), or
// wherever the kernel can compute the pair (kOn).
enum class FusedMatmulChoice { kOff, kAuto, kOn };

// What both fused kernels need to know of the linear they compute and the
// collective beside it.
struct FusedLinearPair {
  // The devices the collective runs over.
  int64_t team_size = 0;
  // The ranks, without reduction axes, of the linear's input, its weight
  // and the pair's output.
  int64_t in_rank = 0;
  int64_t weight_rank = 0;
  int64_t out_rank = 0;
  bool bias = false;
  DataType in_dtype = DataType::Float;
  DataType weight_dtype = DataType::Float;
  DataType out_dtype = DataType::Float;
  // The rows the collective cuts among the team (gathered or scattered)
  // where they are a constant; nullopt where they are symbolic, and then a
  // device split of them, which the fusion passes require to divide evenly
  // (requireEvenSplits).
  std::optional<int64_t> rows;
};

// out = linear(allgather(in) along `axis`, weight[, bias]).
struct AllgatherLinearPair : FusedLinearPair {
  // The gathered axis of the input, and the output's axis it becomes.
  int64_t axis = -1;
  int64_t out_axis = -1;
};

// out = reduce_scatter(linear(in, weight[, bias])) along `axis`, each
// device's `in` and `weight` holding its part of in_features.
struct LinearReduceScatterPair : FusedLinearPair {
  // The output's scattered axis.
  int64_t axis = -1;
};

// Why the fused kernel cannot compute `pair` ("it has a bias"), or empty
// when it can: two devices or more, a 2-D input [rows, K] and weight and a
// 2-D output gathered along their rows (axis 0), no bias, BFloat16 or Half
// throughout, the rows divided evenly among the team.
std::string fusedAllgatherLinearObstacle(const AllgatherLinearPair& pair);

// The same for the linear + reduce-scatter kernel: two devices or more, a
// 2-D input [rows, K] and weight and a 2-D output scattered along its rows
// (axis 0), no bias, BFloat16 or Half throughout, the rows divided evenly
// among the team.
std::string fusedLinearReduceScatterObstacle(
    const LinearReduceScatterPair& pair);

// Whether `choice` has `pair` computed by the fused kernel, the kernels
// being `usable` in this run (the CUDA communication backend, a device and
// a build that have them).
bool fusesAllgatherLinear(
    FusedMatmulChoice choice, bool usable, const AllgatherLinearPair& pair);
bool fusesLinearReduceScatter(
    FusedMatmulChoice choice, bool usable, const LinearReduceScatterPair& pair);

// User error (ValueError) when `choice` forces the fused kernels and this
// run cannot have them, `why_unusable` saying why ("the inputs are CPU
// tensors"); nothing when it is empty or the choice is not kOn.
void checkFusedMatmulRequest(
    FusedMatmulChoice choice, std::string_view why_unusable);

// The pair of `linear`, whose input is gathered along `axis` over
// `team_size` devices into its output's `out_axis`; `rows` is the gathered
// extent in the scope the pair runs in (one stream chunk's in a Stream
// loop).
AllgatherLinearPair allgatherLinearPair(
    const LinearOp* linear,
    int64_t team_size,
    int64_t axis,
    int64_t out_axis,
    const Scalar* rows);

// The pair an allgather `gather` (a resharding set) forms with the linear
// that is its only use, gathering an axis that the linear's output keeps;
// nullopt where it forms none.
std::optional<AllgatherLinearPair> allgatherLinearPairOf(
    const TensorOp* gather);

// The pair of `linear`, whose partial sums are reduce-scattered over
// `team_size` devices into `out` along its `axis`; `rows` is the extent of
// the linear's input along that axis in the scope the pair runs in.
LinearReduceScatterPair linearReduceScatterPair(
    const LinearOp* linear,
    const TensorView* out,
    int64_t team_size,
    int64_t axis,
    const Scalar* rows);

// The pair a reduce-scatter `sum` (a sum over devices) forms with the
// linear (of one out_features axis) whose output is its input and has no
// other use; nullopt where it forms none.
std::optional<LinearReduceScatterPair> linearReduceScatterPairOf(
    const TensorOp* sum);

} // namespace mdfuser
