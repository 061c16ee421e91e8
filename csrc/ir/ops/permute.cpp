// SPDX-License-Identifier: MIT
#include "ir/ops/permute.h"

#include <algorithm>

#include "ir/container.h"
#include "ir/errors.h"
#include "ir/ops/builder.h"

namespace mdfuser {

PermuteOp::PermuteOp(
    IrContainer* container,
    TensorView* out,
    TensorView* in,
    std::vector<int64_t> dims)
    : TensorOp(container, OpType::Permute, {in}, {out}),
      dims_(std::move(dims)) {}

TensorView* PermuteOp::in() const {
  return static_cast<TensorView*>(input(0));
}

std::vector<AxisMapping> PermuteOp::mapProducerToConsumer(
    const TensorView* producer, const TensorView* consumer) const {
  MDF_CHECK(producer == in() && consumer == out());
  const std::vector<IterDomain*> p = producer->logicalNoReductions();
  const std::vector<IterDomain*>& c = consumer->maybeRoot();
  std::vector<AxisMapping> result;
  for (size_t j = 0; j < dims_.size(); ++j) {
    result.push_back({p[dims_[j]], c[j]});
  }
  return result;
}

TensorOp* PermuteOp::recreate(
    IrContainer* container,
    std::vector<Val*> inputs,
    std::vector<Val*> outputs) const {
  MDF_CHECK(inputs.size() == 1 && outputs.size() == 1);
  return container->create<PermuteOp>(
      static_cast<TensorView*>(outputs[0]),
      static_cast<TensorView*>(inputs[0]),
      dims_);
}

std::vector<std::string> PermuteOp::attributes() const {
  return {"dims=" + ops::listString(dims_)};
}

TensorView* permute(TensorView* in, const std::vector<int64_t>& dims) {
  ops::requireTensor(in, "permute", "input");
  ops::requireSameFusion({in}, "permute");
  const std::vector<IterDomain*> ids = in->logicalNoReductions();
  const auto rank = static_cast<int64_t>(ids.size());
  MDF_USER_CHECK(
      static_cast<int64_t>(dims.size()) == rank,
      "permute: dims=",
      ops::listString(dims),
      " has ",
      dims.size(),
      " entries but the input has ",
      rank,
      " dimensions");
  std::vector<int64_t> normalized;
  std::vector<IterDomain*> out_ids;
  for (int64_t d : dims) {
    const int64_t n = ops::normalizeDim(d, rank, "permute");
    MDF_USER_CHECK(
        std::find(normalized.begin(), normalized.end(), n) == normalized.end(),
        "permute: dims=",
        ops::listString(dims),
        " names dimension ",
        n,
        " twice; expected a permutation");
    normalized.push_back(n);
    out_ids.push_back(ops::freshAxis(ids[n], ids[n]->iterType()));
  }
  TensorView* out = ops::newTensor(in->container(), out_ids, in->dtype());
  in->container()
      ->create<PermuteOp>(out, in, std::move(normalized))
      ->registerAsDefinition();
  return out;
}

} // namespace mdfuser
