// SPDX-License-Identifier: MIT
#pragma once

// The Lowerer, which lowers one operation at a time into its scope (private
// to host_ir/lower.cpp, whose lowerToHostIr drives it). Its ring
// decompositions are in lower_rings.cpp, its collectives in
// lower_collectives.cpp.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "host_ir/host_ir_container.h"
#include "host_ir/lower.h"
#include "host_ir/ring_decomposition.h"
#include "host_ir/stream_loop.h"
#include "ir/ops.h"
#include "multidevice/communication_type.h"
#include "multidevice/sharding.h"

namespace mdfuser::hir {
namespace lower_detail {

bool onDevice(const TensorView* tv, int64_t device);

class Lowerer {
 public:
  // `segment_of` numbers the operations by the scope they are lowered into:
  // a Stream loop, or the top level.
  Lowerer(
      HostIrContainer& hic,
      const LoweringOptions& options,
      std::unordered_map<const TensorOp*, size_t> segment_of)
      : hic_(hic), options_(options), segment_of_(std::move(segment_of)) {}

  // Appends the statements for `op` to `scope`; `loop` is the enclosing
  // Stream loop, if any.
  void lowerOp(Scope& scope, const TensorOp* op, StreamLoop* loop);

 private:
  TensorView* operand(TensorView* tv);

  // ----------------------------------------------------- ring decompositions

  bool ringsWanted() const;

  // Whether the pair of `linear` takes a ring where rings are wanted:
  // always where the user asked for rings or for the fused kernels, and
  // otherwise unless the runtime found it too short for a ring's steps
  // (LoweringOptions::pairs_without_rings).
  bool pairTakesRing(const TensorOp* linear) const;

  // Whether the fused kernels compute the pair of `linear`: the options'
  // choice, kOn where it is kAuto and the runtime chose the pair
  // (LoweringOptions::fused_pairs).
  FusedMatmulChoice fusedChoiceOf(const TensorOp* linear) const;

  // The team a collective `r` from `producer` to `consumer` runs over, when
  // it can become a ring on this device: one mesh holding it, two devices
  // or more along the collective's axis.
  std::optional<std::vector<int64_t>> ringTeam(
      const Resharding& r,
      const TensorView* producer,
      const TensorView* consumer) const;

  Ring ring(const std::vector<int64_t>& team);

  // `tv`'s only use, when it has one and is no program output.
  const TensorOp* onlyUse(const TensorView* tv) const;

  bool sameSegment(const TensorOp* a, const TensorOp* b) const;

  // The extent of `tv`'s non-reduction axis `axis` in the buffer this scope
  // sees: one stream chunk's inside a loop that cuts it.
  Scalar* extentInScope(const TensorView* tv, int64_t axis) const;

  // An allgather whose only use is a linear's input waits for that linear,
  // with which it becomes one ring.
  bool deferGatherToRing(const TensorOp* op);

  // The ring of a deferred allgather and the linear consuming it.
  bool lowerGatherRing(const TensorOp* op);

  // The partial sums of a linear without bias whose only use is their
  // reduce-scatter or allreduce are computed by that reduction's ring.
  bool deferPartialSumsToRing(const TensorOp* op);

  // The ring of a reduction whose partial sums were deferred.
  bool lowerReductionRing(const TensorOp* op);

  // Whether the reduction of partial sums over a team of `team_size`
  // devices takes its direct form (emitDirectLinearReduceScatter,
  // emitDirectLinearAllreduce) rather than a ring: over three devices or
  // more, and at two where the pair runs as one chunk (outside Stream
  // loops, or in a loop of one chunk), unless the option keeps the ring.
  bool directReduction(size_t team_size) const;

  // A fresh intermediate of `tv`'s shape, mesh and dtype (of one stream
  // chunk's shape inside a Stream loop that cuts it).
  TensorView* bufferLike(const TensorView* tv);
  // `count` of them.
  std::vector<TensorView*> buffersLike(const TensorView* tv, size_t count);

  // ------------------------------------------------------------ collectives

  // The backend of the collectives that stay collectives: NCCL beside the
  // CUDA backend's rings.
  CommunicatorBackend collectiveBackend() const;

  // Stream chunk i of a gathered tensor that is device i's part
  // (chunksAreDeviceParts): a Broadcast from device i of its whole part
  // into this iteration's chunk, the root changing with the loop index.
  bool lowerChunkBroadcast(const TensorOp* op);

  void lowerResharding(const TensorOp* op);

  void post(
      const CommunicationSpec& spec,
      TensorView* producer,
      TensorView* consumer);

  // A copy, after taking this device's part where the consumer is sharded
  // and the producer is not.
  void lowerLocal(
      const TensorOp* op, TensorView* producer, TensorView* consumer);

  // Where this iteration's chunk of `consumer` on this device (`index` on
  // the device axis `device`) starts in the whole tensor, along the axis
  // that both `stream` and `device` split:
  //   [stream{s}, device{d}, n/(s*d)]  chunk i, then the device's part of it
  //   [device{d}, stream{s}, ...]      the device's shard, then chunk i of it
  //                                    (`chunk`, in the shard's coordinates)
  Scalar* startInWhole(
      const TensorView* consumer,
      const ParallelAxis& stream,
      const ParallelAxis& device,
      const StreamChunk& chunk,
      Scalar* index);

  // The position of the producer's device axis that a sum over devices
  // reduces, or -1.
  static int64_t deviceAxisOf(
      const TensorOp* op,
      const TensorView* producer,
      const TensorView* consumer);

  static ReduceKind reduceKind(const TensorOp* op);

  // An allgather deferred to the linear that consumes it: this device's
  // part, the team, the gathered axis and the linear output's axis it
  // becomes.
  struct DeferredGather {
    TensorView* in;
    std::vector<int64_t> team;
    int64_t axis;
    int64_t out_axis;
  };
  // A linear deferred to the reduction of its partial sums: the linear, its
  // operands and the axis the ring cuts.
  struct DeferredPartials {
    const LinearOp* linear;
    TensorView* in;
    TensorView* weight;
    int64_t axis;
  };

  HostIrContainer& hic_;
  const LoweringOptions& options_;
  std::unordered_map<const TensorOp*, size_t> segment_of_;
  std::unordered_map<const TensorView*, DeferredGather> gathers_;
  std::unordered_map<const TensorView*, DeferredPartials> partials_;
  Scope* scope_ = nullptr;
  StreamLoop* loop_ = nullptr;
  const TensorOp* op_ = nullptr;
};

} // namespace lower_detail
} // namespace mdfuser::hir
