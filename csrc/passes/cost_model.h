// SPDX-License-Identifier: MIT
#pragma once

// mdfuser's model of a machine's speed, and the costs it gives to the
// operations of a fusion: what the stream chunk count
// (choose_stream_chunks.h) and the rings' payoff (latency_bound_pairs.h)
// are decided by. Torch-free: the runtime measures and caches the model
// (mdfuser.calibration, runtime/stream_chunks.h).

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/ops/tensor_op.h"
#include "ir/scalar_eval.h"
#include "multidevice/communication_type.h"

namespace mdfuser {

// What mdfuser knows of a machine's speed: measured once per machine and
// device type, and cached (mdfuser.calibration). Rates are per second;
// every field positive.
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

// The product of `extents` as `ev` evaluates them.
double extentProduct(
    const std::vector<Scalar*>& extents, const ScalarEvaluator& ev);

// The seconds `model` gives to a GEMM of `flops` computing `outputs`
// elements.
double gemmSeconds(const MachineModel& model, double flops, double outputs);

// The collective a resharding `op` becomes and the devices of its team;
// nullopt for one that is no collective on one mesh.
std::optional<std::pair<CommunicationType, int64_t>> collectiveOf(
    const TensorOp* op);

// What one device moves in a collective, as a share of the larger side of
// `op`, and the steps it takes, each a move that waits for the one before
// it: a ring's, as the CUDA backend runs it and NCCL's ring algorithm
// does.
struct CollectiveCost {
  double share = 1;
  int64_t steps = 1;
};
CollectiveCost collectiveCost(const TensorOp* op);

// The bytes one device sends or receives in the resharding `op` (its
// larger side), as a share `share` of its local extents.
double reshardedBytes(
    const TensorOp* op, const ScalarEvaluator& ev, double share = 1.0);

} // namespace mdfuser
