// SPDX-License-Identifier: MIT
//
// The Lowerer's ring decompositions: the matmul–collective pairs it defers
// and lowers as one ring (host_ir/ring_decomposition.h) or one fused
// AllgatherLinear or LinearReduceScatter.
#include <algorithm>

#include "host_ir/lowerer.h"
#include "host_ir/ring_decomposition.h"
#include "multidevice/fused_matmul_choice.h"
#include "multidevice/sharding.h"
#include "passes/swizzled_gathers.h"

namespace mdfuser::hir::lower_detail {

bool Lowerer::ringsWanted() const {
  return makesRings(options_);
}

FusedMatmulChoice Lowerer::fusedChoiceOf(const TensorOp* linear) const {
  const FusedMatmulChoice choice = options_.fused_matmul_communication;
  return choice == FusedMatmulChoice::kAuto &&
                 options_.fused_pairs.contains(linear)
             ? FusedMatmulChoice::kOn
             : choice;
}

bool Lowerer::pairTakesRing(const TensorOp* linear) const {
  return options_.ring_decomposition ||
         options_.fused_matmul_communication == FusedMatmulChoice::kOn ||
         !options_.pairs_without_rings.contains(linear);
}

std::optional<std::vector<int64_t>> Lowerer::ringTeam(
    const Resharding& r,
    const TensorView* producer,
    const TensorView* consumer) const {
  if (r.kind != Resharding::Kind::kCollective || !producer->hasDeviceMesh() ||
      !consumer->hasDeviceMesh() ||
      !(*producer->deviceMesh() == *consumer->deviceMesh()) ||
      !producer->deviceMesh()->has(options_.device)) {
    return std::nullopt;
  }
  std::vector<int64_t> team =
      producer->deviceMesh()->team(options_.device, r.parallel_type);
  if (team.size() < 2) {
    return std::nullopt;
  }
  return team;
}

Ring Lowerer::ring(const std::vector<int64_t>& team) {
  const int64_t me =
      std::find(team.begin(), team.end(), options_.device) - team.begin();
  return Ring{hic_, *scope_, team, me, options_.backend};
}

const TensorOp* Lowerer::onlyUse(const TensorView* tv) const {
  if (hic_.isOutput(tv) || tv->uses().size() != 1) {
    return nullptr;
  }
  return dynamic_cast<const TensorOp*>(tv->uses().front());
}

bool Lowerer::sameSegment(const TensorOp* a, const TensorOp* b) const {
  auto ia = segment_of_.find(a);
  auto ib = segment_of_.find(b);
  return ia != segment_of_.end() && ib != segment_of_.end() &&
         ia->second == ib->second;
}

Scalar* Lowerer::extentInScope(const TensorView* tv, int64_t axis) const {
  if (loop_ != nullptr && loopAxis(tv, ParallelType::Stream) != nullptr) {
    const StreamChunk chunk = streamChunk(tv, loop_->loop()->index());
    if (chunk.axis == axis) {
      return chunk.length;
    }
  }
  return localExtents(tv).at(axis);
}

bool Lowerer::deferGatherToRing(const TensorOp* op) {
  if (dynamic_cast<const LoadStoreOp*>(op) == nullptr) {
    return false;
  }
  TensorView* producer = op->tensorInputs().front();
  TensorView* gathered = op->out();
  const Resharding r = chooseResharding(op);
  std::optional<std::vector<int64_t>> team = ringTeam(r, producer, gathered);
  const auto* linear = dynamic_cast<const LinearOp*>(onlyUse(gathered));
  if (!team || r.type != CommunicationType::Allgather || linear == nullptr ||
      linear->outFeatureAxes() != 1 || linear->in() != gathered ||
      linear->weight() == gathered || linear->bias() == gathered ||
      !sameSegment(op, linear) ||
      (!hasSwizzledGather(gathered) && !pairTakesRing(linear))) {
    return false;
  }
  // The gathered axis must index the linear's output, not its contracted
  // in_features.
  const std::vector<IterDomain*> ids = gathered->logicalNoReductions();
  const std::vector<IterDomain*> out_ids = linear->out()->logicalNoReductions();
  if (r.axis < 0 || r.axis + 1 >= static_cast<int64_t>(ids.size())) {
    return false;
  }
  for (const AxisMapping& m :
       linear->mapProducerToConsumer(gathered, linear->out())) {
    auto it = std::find(out_ids.begin(), out_ids.end(), m.consumer);
    if (m.producer == ids[r.axis] && m.exact && it != out_ids.end()) {
      gathers_.emplace(
          gathered,
          DeferredGather{
              operand(producer), *team, r.axis, it - out_ids.begin()});
      return true;
    }
  }
  return false;
}

bool Lowerer::lowerGatherRing(const TensorOp* op) {
  const auto* linear = dynamic_cast<const LinearOp*>(op);
  if (linear == nullptr) {
    return false;
  }
  auto it = gathers_.find(linear->in());
  if (it == gathers_.end()) {
    return false;
  }
  const DeferredGather g = it->second;
  gathers_.erase(it);
  Scalar* extent = extentInScope(linear->in(), g.axis);
  const auto d = static_cast<int64_t>(g.team.size());
  // Outside Stream loops only: the kernel computes the whole GEMM while
  // the rows come in, which a loop's chunks would cut into launches
  // waiting on each other's rows; there the ring pipelines the chunks.
  if (loop_ == nullptr &&
      fusesAllgatherLinear(
          fusedChoiceOf(linear),
          whyFusedKernelsUnusable(options_).empty(),
          allgatherLinearPair(linear, d, g.axis, g.out_axis, extent))) {
    scope_->pushBack(hic_.create<AllgatherLinear>(
        g.team, g.in, operand(linear->weight()), operand(linear->out())));
    return true;
  }
  TensorView* bias = linear->bias();
  emitAllgatherLinear(
      ring(g.team),
      g.in,
      operand(linear->in()),
      g.axis,
      operand(linear->out()),
      g.out_axis,
      extent,
      operand(linear->weight()),
      bias == nullptr ? nullptr : operand(bias));
  return true;
}

bool Lowerer::deferPartialSumsToRing(const TensorOp* op) {
  const auto* linear = dynamic_cast<const LinearOp*>(op);
  if (linear == nullptr || linear->bias() != nullptr ||
      linear->outFeatureAxes() != 1 || !pairTakesRing(linear)) {
    return false;
  }
  const TensorOp* sum = onlyUse(linear->out());
  if (sum == nullptr || !isDeviceSum(sum) ||
      reduceKind(sum) != ReduceKind::kSum || !sameSegment(op, sum)) {
    return false;
  }
  const TensorView* in = linear->in();
  const TensorView* out = sum->out();
  const Resharding r = chooseResharding(sum);
  std::optional<std::vector<int64_t>> team = ringTeam(r, linear->out(), out);
  const auto rank = static_cast<int64_t>(in->logicalNoReductions().size());
  if (!team || rank < 2 ||
      rank != static_cast<int64_t>(out->logicalNoReductions().size())) {
    return false;
  }
  // The tokens the ring cuts: the scattered axis, or the outermost one.
  // Input and output share their axes but the last.
  int64_t axis = 0;
  if (r.type == CommunicationType::ReduceScatter) {
    axis = r.axis;
  } else if (r.type != CommunicationType::Allreduce) {
    return false;
  }
  if (axis < 0 || axis + 1 >= rank) {
    return false;
  }
  partials_.emplace(
      linear->out(),
      DeferredPartials{
          linear, operand(linear->in()), operand(linear->weight()), axis});
  return true;
}

bool Lowerer::lowerReductionRing(const TensorOp* op) {
  if (!isDeviceSum(op)) {
    return false;
  }
  auto it = partials_.find(op->tensorInputs().front());
  if (it == partials_.end()) {
    return false;
  }
  const DeferredPartials p = it->second;
  partials_.erase(it);
  TensorView* consumer = op->out();
  const Resharding r = chooseResharding(op);
  const std::vector<int64_t> team =
      *ringTeam(r, op->tensorInputs().front(), consumer);
  TensorView* out = operand(consumer);
  Scalar* extent = extentInScope(consumer, p.axis);
  const bool direct = directReduction(team.size());
  if (r.type == CommunicationType::Allreduce) {
    // On the CUDA backend peers write into the ring's buffer, which must
    // then live in symmetric memory; a program output cannot (each run
    // returns a fresh one): the parts arrive in a buffer of their own.
    const bool apart = options_.backend == CommunicatorBackend::kCuda &&
                       hic_.isOutput(consumer);
    if (options_.exchange_allreduce && team.size() == 2) {
      emitExchangedLinearAllreduce(
          ring(team), p.in, p.weight, out, bufferLike(consumer));
      return true;
    }
    if (direct) {
      const std::vector<TensorView*> receives =
          buffersLike(consumer, team.size() - 1);
      emitDirectLinearAllreduce(
          ring(team),
          p.in,
          p.axis,
          p.weight,
          out,
          p.axis,
          extent,
          receives,
          apart ? receives.front() : out);
      return true;
    }
    emitLinearAllreduce(
        ring(team),
        p.in,
        p.axis,
        p.weight,
        out,
        p.axis,
        extent,
        apart ? operand(bufferLike(consumer)) : out);
    return true;
  }
  // Outside Stream loops only, as for AllgatherLinear (lowerGatherRing).
  if (loop_ == nullptr && fusesLinearReduceScatter(
                              fusedChoiceOf(p.linear),
                              whyFusedKernelsUnusable(options_).empty(),
                              linearReduceScatterPair(
                                  p.linear,
                                  consumer,
                                  static_cast<int64_t>(team.size()),
                                  p.axis,
                                  extentInScope(p.linear->in(), p.axis)))) {
    scope_->pushBack(
        hic_.create<LinearReduceScatter>(team, p.in, p.weight, out));
    return true;
  }
  if (direct) {
    // Every peer's partial sum is sent straight to it: d - 1 moves that
    // depend on no other device's, each beside the next step's GEMM.
    // Buffers of one part's shape, as the ring's.
    const std::vector<TensorView*> sends =
        buffersLike(consumer, team.size() - 1);
    const std::vector<TensorView*> receives =
        buffersLike(consumer, team.size() - 1);
    emitDirectLinearReduceScatter(
        ring(team), p.in, p.axis, p.weight, out, sends, receives, extent);
    return true;
  }
  // The partial sums arrive in a buffer of one part's shape.
  emitLinearReduceScatter(
      ring(team), p.in, p.axis, p.weight, out, bufferLike(consumer), extent);
  return true;
}

bool Lowerer::directReduction(size_t team_size) const {
  if (!options_.direct_reduce_scatter || team_size < 2) {
    return false;
  }
  if (team_size > 2) {
    return true;
  }
  // At d = 2 the ring's last GEMM waits for the one move, which its chunk
  // then cannot hide: the direct form runs them side by side and adds the
  // arrival after. Where a Stream loop has several chunks, each chunk's
  // move runs beside the next chunk's GEMMs anyway, and the ring saves the
  // add. With the chunks' GEMMs in order on one stream, nothing runs
  // beside a ring's move: direct again.
  if (loop_ == nullptr || options_.gemms_in_order) {
    return true;
  }
  const ForLoop* loop = loop_->loop();
  const std::optional<int64_t> start = loop->start()->constValue();
  const std::optional<int64_t> stop = loop->stop()->constValue();
  return start.has_value() && stop.has_value() && *stop - *start == 1;
}

TensorView* Lowerer::bufferLike(const TensorView* tv) {
  auto* buffer = hic_.create<TensorView>(
      tv->logical(), tv->dtype(), tv->contiguity(), MemoryType::Global);
  buffer->setDomains(tv->root(), tv->logical(), tv->loop());
  buffer->setDeviceMesh(*tv->deviceMesh());
  return buffer;
}

std::vector<TensorView*> Lowerer::buffersLike(
    const TensorView* tv, size_t count) {
  std::vector<TensorView*> buffers;
  for (size_t i = 0; i < count; ++i) {
    buffers.push_back(bufferLike(tv));
  }
  return buffers;
}

} // namespace mdfuser::hir::lower_detail
