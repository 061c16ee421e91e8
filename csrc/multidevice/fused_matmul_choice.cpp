// SPDX-License-Identifier: MIT
#include "multidevice/fused_matmul_choice.h"

#include <algorithm>

#include "ir/errors.h"
#include "multidevice/communication_type.h"
#include "multidevice/sharding.h"

namespace mdfuser {

namespace {

bool kernelDtype(DataType dtype) {
  return dtype == DataType::BFloat16 || dtype == DataType::Half;
}

// The obstacles both kernels share, in the order they are named; `axes` is
// the kernel's own obstacle of axes, empty when there is none, named after
// the ranks.
std::string linearObstacle(
    const FusedLinearPair& pair, const std::string& axes) {
  if (pair.team_size < 2) {
    return detail::concat(
        "its team has ", pair.team_size, " device; it needs two or more");
  }
  if (pair.bias) {
    return "the linear has a bias";
  }
  if (pair.in_rank != 2 || pair.weight_rank != 2 || pair.out_rank != 2) {
    return detail::concat(
        "the kernel takes a 2-D input, weight and output, got ",
        pair.in_rank,
        "-D, ",
        pair.weight_rank,
        "-D and ",
        pair.out_rank,
        "-D");
  }
  if (!axes.empty()) {
    return axes;
  }
  if (!kernelDtype(pair.in_dtype) || pair.weight_dtype != pair.in_dtype ||
      pair.out_dtype != pair.in_dtype) {
    return detail::concat(
        "the kernel takes BFloat16 or Half throughout, got ",
        pair.in_dtype,
        " input, ",
        pair.weight_dtype,
        " weight and ",
        pair.out_dtype,
        " output");
  }
  if (pair.rows.has_value() && *pair.rows % pair.team_size != 0) {
    return detail::concat(
        "its ",
        *pair.rows,
        " rows do not divide evenly among ",
        pair.team_size,
        " devices");
  }
  return "";
}

bool fuses(FusedMatmulChoice choice, bool usable, const std::string& obstacle) {
  // kAuto fuses nothing by itself: the pairs the runtime chose come here
  // as kOn (Lowerer::fusedChoiceOf).
  return choice == FusedMatmulChoice::kOn && usable && obstacle.empty();
}

// Fills `pair` from `linear` and the pair's output `out` (the linear's, or
// the collective's after it).
void describeLinear(
    FusedLinearPair& pair,
    const LinearOp* linear,
    const TensorView* out,
    int64_t team_size,
    const Scalar* rows) {
  auto rank = [](const TensorView* tv) {
    return static_cast<int64_t>(tv->logicalNoReductions().size());
  };
  pair.team_size = team_size;
  pair.in_rank = rank(linear->in());
  pair.weight_rank = rank(linear->weight());
  pair.out_rank = rank(out);
  pair.bias = linear->bias() != nullptr;
  pair.in_dtype = linear->in()->dtype();
  pair.weight_dtype = linear->weight()->dtype();
  pair.out_dtype = out->dtype();
  if (rows != nullptr && rows->isConst()) {
    pair.rows = rows->value();
  }
}

} // namespace

std::string fusedAllgatherLinearObstacle(const AllgatherLinearPair& pair) {
  return linearObstacle(
      pair,
      pair.axis == 0 && pair.out_axis == 0
          ? ""
          : detail::concat(
                "the kernel gathers rows (axis 0), got axis ",
                pair.axis,
                " of the input and ",
                pair.out_axis,
                " of the output"));
}

std::string fusedLinearReduceScatterObstacle(
    const LinearReduceScatterPair& pair) {
  return linearObstacle(
      pair,
      pair.axis == 0 ? ""
                     : detail::concat(
                           "the kernel scatters rows (axis 0), got axis ",
                           pair.axis,
                           " of the output"));
}

bool fusesAllgatherLinear(
    FusedMatmulChoice choice, bool usable, const AllgatherLinearPair& pair) {
  return fuses(choice, usable, fusedAllgatherLinearObstacle(pair));
}

bool fusesLinearReduceScatter(
    FusedMatmulChoice choice,
    bool usable,
    const LinearReduceScatterPair& pair) {
  return fuses(choice, usable, fusedLinearReduceScatterObstacle(pair));
}

void checkFusedMatmulRequest(
    FusedMatmulChoice choice, std::string_view why_unusable) {
  MDF_USER_CHECK(
      choice != FusedMatmulChoice::kOn || why_unusable.empty(),
      "_enable_options=[\"fused_matmul_communication\"] asks for the fused "
      "allgather + linear and linear + reduce-scatter kernels, which this "
      "run cannot have: ",
      why_unusable);
}

AllgatherLinearPair allgatherLinearPair(
    const LinearOp* linear,
    int64_t team_size,
    int64_t axis,
    int64_t out_axis,
    const Scalar* rows) {
  AllgatherLinearPair pair;
  describeLinear(pair, linear, linear->out(), team_size, rows);
  pair.axis = axis;
  pair.out_axis = out_axis;
  return pair;
}

std::optional<AllgatherLinearPair> allgatherLinearPairOf(
    const TensorOp* gather) {
  if (dynamic_cast<const LoadStoreOp*>(gather) == nullptr ||
      gather->tensorInputs().size() != 1 || !isResharding(gather)) {
    return std::nullopt;
  }
  const TensorView* producer = gather->tensorInputs().front();
  const TensorView* gathered = gather->out();
  if (!producer->hasDeviceMesh() || !gathered->hasDeviceMesh() ||
      gathered->uses().size() != 1) {
    return std::nullopt;
  }
  const auto* linear = dynamic_cast<const LinearOp*>(gathered->uses().front());
  const Resharding r = chooseResharding(gather);
  if (linear == nullptr || linear->in() != gathered ||
      linear->weight() == gathered || linear->bias() == gathered ||
      linear->outFeatureAxes() != 1 ||
      r.kind != Resharding::Kind::kCollective ||
      r.type != CommunicationType::Allgather) {
    return std::nullopt;
  }
  const std::vector<IterDomain*> ids = gathered->logicalNoReductions();
  const std::vector<IterDomain*> out_ids = linear->out()->logicalNoReductions();
  if (r.axis < 0 || r.axis + 1 >= static_cast<int64_t>(ids.size())) {
    return std::nullopt;
  }
  for (const AxisMapping& m :
       linear->mapProducerToConsumer(gathered, linear->out())) {
    auto it = std::find(out_ids.begin(), out_ids.end(), m.consumer);
    if (m.producer == ids[r.axis] && m.exact && it != out_ids.end()) {
      return allgatherLinearPair(
          linear,
          gathered->deviceMesh()->size(r.parallel_type),
          r.axis,
          it - out_ids.begin(),
          ids[r.axis]->extent());
    }
  }
  return std::nullopt;
}

LinearReduceScatterPair linearReduceScatterPair(
    const LinearOp* linear,
    const TensorView* out,
    int64_t team_size,
    int64_t axis,
    const Scalar* rows) {
  LinearReduceScatterPair pair;
  describeLinear(pair, linear, out, team_size, rows);
  pair.axis = axis;
  return pair;
}

std::optional<LinearReduceScatterPair> linearReduceScatterPairOf(
    const TensorOp* sum) {
  if (sum->type() != OpType::Sum || !isDeviceSum(sum)) {
    return std::nullopt;
  }
  const TensorView* partials = sum->tensorInputs().front();
  const auto* linear = dynamic_cast<const LinearOp*>(partials->definition());
  if (linear == nullptr || linear->outFeatureAxes() != 1 ||
      partials->uses().size() != 1 || !partials->hasDeviceMesh() ||
      !sum->out()->hasDeviceMesh()) {
    return std::nullopt;
  }
  const Resharding r = chooseResharding(sum);
  if (r.kind != Resharding::Kind::kCollective ||
      r.type != CommunicationType::ReduceScatter || r.axis < 0) {
    return std::nullopt;
  }
  const std::vector<IterDomain*> in_ids = linear->in()->logicalNoReductions();
  if (r.axis + 1 >= static_cast<int64_t>(in_ids.size())) {
    return std::nullopt;
  }
  return linearReduceScatterPair(
      linear,
      sum->out(),
      sum->out()->deviceMesh()->size(r.parallel_type),
      r.axis,
      in_ids[r.axis]->extent());
}

} // namespace mdfuser
