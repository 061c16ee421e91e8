// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/fusion.h"
#include "ir/iter_domain.h"
#include "ir/scalar_eval.h"

namespace mdfuser {

// What mdfuser knows of a machine's speed when it chooses a number of stream
// chunks: measured once per machine and device type, and cached
// (mdfuser.calibration). Rates are per second; every field positive.
struct MachineModel {
  // A large GEMM's throughput, in floating-point operations.
  double gemm_flops = 0;
  // The output elements at which a GEMM reaches half that throughput: a
  // GEMM computing o elements (rows times columns) runs at
  // gemm_flops * o / (o + gemm_half_outputs). Its output tiles are what
  // fill the device's cores, so a GEMM of many columns runs near its full
  // rate on fewer rows.
  double gemm_half_outputs = 0;
  // Bytes a copy moves within the device (pointwise and layout operations).
  double memory_bytes = 0;
  // Bytes a copy moves to a peer (communication).
  double link_bytes = 0;
  // Host time of one statement: a kernel launch, a collective's issue.
  double statement_seconds = 0;
  // Device time of one step of a collective apart from the bytes it moves:
  // a move to a peer that waits for the step before it (a copy issued
  // after another stream's signal). A ring allreduce over d devices takes
  // 2 (d - 1) steps, an allgather or reduce-scatter d - 1.
  double move_seconds = 0;

  // "gemm 1.2e+14 flop/s (half at 512 rows), memory ... ".
  std::string toString() const;
};

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

// One stream chunk's work in the stream loops of `compiled` (a fusion whose
// chosen counts are `count` and whose fusion passes ran; `extents`
// evaluates its extents), in seconds by `model`: its computation, its
// communication and the host's issue of its statements. With `rings` (the
// CUDA backend, or the ring_decomposition option), a GEMM beside an
// allgather, allreduce or reduce-scatter runs in one part per device of
// its ring, each part a GEMM of fewer outputs. With `fused` (the fused
// matmul–communication kernels chosen and usable), an allgather and the
// linear consuming it, or a linear and the reduce-scatter of its partial
// sums, that a fused kernel computes (fusedAllgatherLinearObstacle,
// fusedLinearReduceScatterObstacle) are one GEMM of the linear's whole
// shape, in one part, whose communication the kernel hides.
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
    bool rings,
    bool fused = false);

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
    bool rings,
    bool fused = false);

// The count of least estimated time (the smaller on a tie).
ChunkChoice fastestChunkCount(
    const std::vector<std::pair<int64_t, double>>& seconds);

} // namespace mdfuser
