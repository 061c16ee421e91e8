// SPDX-License-Identifier: MIT
#include "passes/cost_model.h"

#include <algorithm>
#include <sstream>

#include "multidevice/sharding.h"

namespace mdfuser {

std::string MachineModel::toString() const {
  std::ostringstream os;
  os << "gemm " << gemm_flops << " flop/s (half at " << gemm_half_outputs
     << " outputs), memory " << memory_bytes << " B/s, link " << link_bytes
     << " B/s, " << statement_seconds * 1e6 << " us per statement, "
     << move_seconds * 1e6 << " us per collective step";
  return os.str();
}

double extentProduct(
    const std::vector<Scalar*>& extents, const ScalarEvaluator& ev) {
  double result = 1.0;
  for (const Scalar* e : extents) {
    result *= static_cast<double>(ev.evaluate(e));
  }
  return result;
}

double gemmSeconds(const MachineModel& model, double flops, double outputs) {
  if (flops <= 0) {
    return 0;
  }
  const double efficiency = outputs / (outputs + model.gemm_half_outputs);
  return flops / (model.gemm_flops * std::max(efficiency, 1e-6));
}

std::optional<std::pair<CommunicationType, int64_t>> collectiveOf(
    const TensorOp* op) {
  const TensorView* out = op->out();
  const auto* in = op->inputs().empty()
                       ? nullptr
                       : dynamic_cast<const TensorView*>(op->inputs().front());
  if (in == nullptr || !in->hasDeviceMesh() || !out->hasDeviceMesh()) {
    return std::nullopt;
  }
  const Resharding r = chooseResharding(op);
  if (r.kind != Resharding::Kind::kCollective) {
    return std::nullopt;
  }
  return std::make_pair(r.type, out->deviceMesh()->size(r.parallel_type));
}

CollectiveCost collectiveCost(const TensorOp* op) {
  const auto collective = collectiveOf(op);
  if (!collective.has_value()) {
    return {};
  }
  const auto [type, d] = *collective;
  const double others = static_cast<double>(d - 1) / static_cast<double>(d);
  switch (type) {
    case CommunicationType::Allreduce:
      return {2 * others, 2 * (d - 1)};
    case CommunicationType::Allgather:
    case CommunicationType::ReduceScatter:
    case CommunicationType::AllToAll:
      return {others, d - 1};
    default:
      return {};
  }
}

double reshardedBytes(
    const TensorOp* op, const ScalarEvaluator& ev, double share) {
  double moved = 0;
  auto add = [&](const TensorView* tv) {
    moved = std::max(
        moved,
        extentProduct(localExtents(tv), ev) * share *
            static_cast<double>(sizeInBytes(tv->dtype())));
  };
  add(op->out());
  for (const Val* in : op->inputs()) {
    if (const auto* tv = dynamic_cast<const TensorView*>(in)) {
      add(tv);
    }
  }
  return moved;
}

} // namespace mdfuser
