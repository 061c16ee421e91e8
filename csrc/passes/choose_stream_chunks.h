// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/fusion.h"
#include "ir/iter_domain.h"
#include "ir/scalar_eval.h"
#include "passes/cost_model.h"

namespace mdfuser {

// The stream chunk count mdfuser chose, and the time its model gave for
// each count it tried (printed with NVFUSER_DUMP=host_ir or fusion_ir).
struct ChunkChoice {
  int64_t count = 1;
  std::vector<std::pair<int64_t, double>> seconds;
  std::string toString() const;
};

// The splits of `fusion` whose number of parts mdfuser chooses (an
// outer_split given no factor). User error when one's outer part is not
// parallelized on streams: the count is a number of stream chunks.
std::vector<const Split*> chosenSplits(const Fusion& fusion);

// Whether `fusion` has a split whose number of parts mdfuser chooses.
bool choosesStreamChunks(const Fusion& fusion);

// User error when a count mdfuser chooses would decide how `tv` is laid out
// across devices (a stream split above a device split of one of its axes):
// a fusion's inputs and outputs are sharded before it is compiled.
void checkLayoutNeedsNoChosenCount(const TensorView* tv);

// Gives every count of `fusion` that mdfuser chooses the value `count`.
void chooseStreamChunks(Fusion& fusion, int64_t count);

// The counts worth trying for `splits` (taken from a fusion whose extents
// `extents` evaluates): the common divisors, up to kMaxStreamChunks, of the
// extents they split.
inline constexpr int64_t kMaxStreamChunks = 16;
std::vector<int64_t> candidateChunkCounts(
    const std::vector<const Split*>& splits, const ScalarEvaluator& extents);

// How the lowering decomposes the collectives beside GEMMs, which decides
// what the model prices:
//  - `rings` (the CUDA backend, or the ring_decomposition option): a GEMM
//    beside an allgather, allreduce or reduce-scatter runs in one part per
//    device of its ring, each part a GEMM of fewer outputs;
//  - `fused` (the fused matmul–communication kernels chosen and usable): an
//    allgather and the linear consuming it, or a linear and the
//    reduce-scatter of its partial sums, that a fused kernel computes
//    (fusedAllgatherLinearObstacle, fusedLinearReduceScatterObstacle) are
//    one GEMM of the linear's whole shape, in one part, whose communication
//    the kernel hides;
//  - `exchanged` (LoweringOptions::exchange_allreduce): the allreduce of a
//    linear's partial sums over two devices is one move of the whole
//    partial sum, not a reduce-scatter's step and an allgather's, beside
//    the linear's GEMM in one part; the move waits for no step before it
//    (its receive posted early, its handshake beside the GEMM), so no
//    step's latency (MachineModel::move_seconds) is added.
struct Decompositions {
  bool rings = false;
  bool fused = false;
  bool exchanged = false;
};

// One stream chunk's work in the stream loops of `compiled` (a fusion whose
// chosen counts are `count` and whose fusion passes ran; `extents`
// evaluates its extents), in seconds by `model`: its computation, its
// communication and the host's issue of its statements, the collectives
// decomposed as `decompositions` says.
struct StreamWork {
  double compute = 0;
  double communication = 0;
  double host = 0;
};
StreamWork estimateStreamWork(
    const Fusion& compiled,
    const ScalarEvaluator& extents,
    const MachineModel& model,
    int64_t count,
    const Decompositions& decompositions);

// The time `model` gives to the stream-parallel work of `compiled` (a fusion
// whose chosen counts are `count` and whose fusion passes ran; `extents`
// evaluates its extents): its chunks form a pipeline whose stages are the
// chunk's computation, its communication and the host's issue of its
// statements, so it takes a chunk's three stages once (filling and draining)
// plus the slowest stage for every further chunk. The work outside the
// stream loops is the same for every count and left out.
double estimateStreamSeconds(
    const Fusion& compiled,
    const ScalarEvaluator& extents,
    const MachineModel& model,
    int64_t count,
    const Decompositions& decompositions);

// Whether every collective in the stream loops of `compiled` (a fusion
// whose fusion passes ran) is the allreduce of the partial sums of a linear
// without bias over two devices, and there is one: the loops whose
// allreduces the lowering can exchange (LoweringOptions::
// exchange_allreduce).
bool streamLoopsExchangePartialSums(const Fusion& compiled);

// The count of least estimated time (the smaller on a tie).
ChunkChoice fastestChunkCount(
    const std::vector<std::pair<int64_t, double>>& seconds);

} // namespace mdfuser
