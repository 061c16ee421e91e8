// SPDX-License-Identifier: MIT
#include "passes/latency_bound_pairs.h"

#include <algorithm>
#include <sstream>

#include "ir/ops/matmul.h"
#include "multidevice/sharding.h"

namespace mdfuser {

namespace {

// The collective beside `linear` that a ring would take, or nullptr: the
// allgather making its input, or the allreduce or reduce-scatter that is
// its output's only use.
const TensorOp* collectiveBeside(const LinearOp* linear) {
  const auto* producer =
      dynamic_cast<const TensorOp*>(linear->in()->definition());
  if (producer != nullptr && isResharding(producer)) {
    const auto collective = collectiveOf(producer);
    if (collective.has_value() &&
        collective->first == CommunicationType::Allgather) {
      return producer;
    }
  }
  const std::vector<Expr*>& uses = linear->out()->uses();
  if (uses.size() != 1) {
    return nullptr;
  }
  const auto* consumer = dynamic_cast<const TensorOp*>(uses.front());
  if (consumer == nullptr || !isResharding(consumer)) {
    return nullptr;
  }
  const auto collective = collectiveOf(consumer);
  if (collective.has_value() &&
      (collective->first == CommunicationType::Allreduce ||
       collective->first == CommunicationType::ReduceScatter)) {
    return consumer;
  }
  return nullptr;
}

} // namespace

std::string LatencyBoundPair::toString() const {
  std::ostringstream os;
  os << "linear T" << linear->out()->name() << " beside "
     << communicationTypeName(collectiveOf(collective)->first) << ": overlap "
     << overlap_seconds * 1e6 << " us, ring steps " << steps_seconds * 1e6
     << " us";
  return os.str();
}

std::vector<LatencyBoundPair> latencyBoundPairs(
    const Fusion& compiled,
    const ScalarEvaluator& extents,
    const MachineModel& model) {
  std::vector<LatencyBoundPair> pairs;
  for (const TensorOp* op : compiled.exprs()) {
    const auto* linear = dynamic_cast<const LinearOp*>(op);
    if (linear == nullptr || inStreamLoop(linear)) {
      continue;
    }
    const TensorOp* collective = collectiveBeside(linear);
    if (collective == nullptr || inStreamLoop(collective)) {
      continue;
    }
    const std::vector<Scalar*> out_extents = localExtents(linear->out());
    const double outputs = extentProduct(out_extents, extents);
    const std::vector<Scalar*> in_extents = localExtents(linear->in());
    const int64_t depth = extents.evaluate(in_extents.back());
    const double k = static_cast<double>(depth);
    const double gemm = gemmSeconds(model, 2.0 * outputs * k, outputs);
    const CollectiveCost cost = collectiveCost(collective);
    const double transfer =
        cost.share * reshardedBytes(collective, extents) / model.link_bytes;
    LatencyBoundPair pair;
    pair.linear = linear;
    pair.collective = collective;
    pair.overlap_seconds = std::min(gemm, transfer);
    pair.steps_seconds =
        kRingStepMoves * static_cast<double>(cost.steps) * model.move_seconds;
    pair.columns = extents.evaluate(out_extents.back());
    pair.rows =
        pair.columns > 0 ? static_cast<int64_t>(outputs) / pair.columns : 0;
    pair.depth = depth;
    if (pair.overlap_seconds < pair.steps_seconds) {
      pairs.push_back(pair);
    }
  }
  return pairs;
}

} // namespace mdfuser
