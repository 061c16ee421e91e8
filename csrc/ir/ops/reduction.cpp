// SPDX-License-Identifier: MIT
#include "ir/ops/reduction.h"

#include <algorithm>

#include "ir/container.h"
#include "ir/errors.h"
#include "ir/ops/broadcast.h"
#include "ir/ops/builder.h"

namespace mdfuser {

namespace {

std::vector<int64_t> reductionAxesOf(const TensorView* out) {
  std::vector<int64_t> dims;
  const std::vector<IterDomain*>& root = out->maybeRoot();
  for (size_t i = 0; i < root.size(); ++i) {
    if (root[i]->isReduction()) {
      dims.push_back(static_cast<int64_t>(i));
    }
  }
  return dims;
}

} // namespace

ReductionOp::ReductionOp(
    IrContainer* container,
    OpType type,
    TensorView* out,
    TensorView* in,
    bool empty_is_identity)
    : ReductionOp(
          container, type, out, in, reductionAxesOf(out), empty_is_identity) {}

ReductionOp::ReductionOp(
    IrContainer* container,
    OpType type,
    TensorView* out,
    TensorView* in,
    std::vector<int64_t> reduced,
    bool empty_is_identity)
    : TensorOp(container, type, {in}, {out}),
      reduced_(std::move(reduced)),
      empty_is_identity_(empty_is_identity) {
  MDF_CHECK(
      opInfo(type).family == OpFamily::kReduction,
      mdfuser::opName(type),
      " is not a reduction");
}

TensorView* ReductionOp::in() const {
  return static_cast<TensorView*>(input(0));
}

std::vector<AxisMapping> ReductionOp::mapProducerToConsumer(
    const TensorView* producer, const TensorView* consumer) const {
  MDF_CHECK(producer == in(), producer->toString(), " is not an operand");
  MDF_CHECK(consumer == out(), consumer->toString(), " is not an output");
  return mapAxisByAxis(producer, consumer);
}

TensorOp* ReductionOp::recreate(
    IrContainer* container,
    std::vector<Val*> inputs,
    std::vector<Val*> outputs) const {
  MDF_CHECK(inputs.size() == 1 && outputs.size() == 1);
  return container->create<ReductionOp>(
      type(),
      static_cast<TensorView*>(outputs[0]),
      static_cast<TensorView*>(inputs[0]),
      reduced_,
      empty_is_identity_);
}

std::vector<int64_t> reductionDims(
    const std::vector<int64_t>& dims, int64_t rank, std::string_view op) {
  std::vector<int64_t> result;
  if (dims.empty()) {
    for (int64_t i = 0; i < rank; ++i) {
      result.push_back(i);
    }
    return result;
  }
  for (int64_t dim : dims) {
    const int64_t d = ops::normalizeDim(dim, rank, op);
    MDF_USER_CHECK(
        std::find(result.begin(), result.end(), d) == result.end(),
        op,
        ": dimension ",
        d,
        " is given twice in dims=",
        ops::listString(dims));
    result.push_back(d);
  }
  std::sort(result.begin(), result.end());
  return result;
}

TensorView* reduce(
    OpType type,
    TensorView* in,
    const std::vector<int64_t>& dims,
    bool keepdim,
    DataType dtype,
    bool empty_is_identity) {
  const std::string_view name = opName(type);
  ops::requireTensor(in, name, "input");
  ops::requireSameFusion({in}, name);
  const std::vector<IterDomain*> ids = in->logicalNoReductions();
  const int64_t rank = static_cast<int64_t>(ids.size());
  MDF_USER_CHECK(
      rank > 0, name, ": cannot reduce the 0-dimensional ", in->toString());
  const std::vector<int64_t> reduced = reductionDims(dims, rank, name);
  MDF_TYPE_CHECK(
      in->dtype() != DataType::UInt64 && dtype != DataType::UInt64,
      name,
      " does not take UInt64 (torch does not reduce uint64); cast ",
      in->toString(),
      " first");

  if (dtype == DataType::Null) {
    dtype = type == OpType::Sum && !isFloatingType(in->dtype()) ? DataType::Int
                                                                : in->dtype();
  }
  MDF_TYPE_CHECK(
      type == OpType::Sum || dtype == in->dtype(),
      name,
      " keeps the input's dtype; only sum takes a dtype");

  std::vector<IterDomain*> out_ids;
  for (int64_t i = 0; i < rank; ++i) {
    const bool is_reduced =
        std::find(reduced.begin(), reduced.end(), i) != reduced.end();
    out_ids.push_back(ops::freshAxis(
        ids[i], is_reduced ? IterType::Reduction : ids[i]->iterType()));
  }
  TensorView* out = ops::newTensor(in->container(), out_ids, dtype);
  in->container()
      ->create<ReductionOp>(type, out, in, empty_is_identity)
      ->registerAsDefinition();
  if (!keepdim) {
    return out;
  }
  std::vector<bool> is_broadcast(rank, false);
  for (int64_t d : reduced) {
    is_broadcast[d] = true;
  }
  return broadcast(out, is_broadcast);
}

} // namespace mdfuser
