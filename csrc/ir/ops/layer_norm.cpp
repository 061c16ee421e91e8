// SPDX-License-Identifier: MIT
#include "ir/ops/layer_norm.h"

#include <sstream>

#include "ir/container.h"
#include "ir/errors.h"

namespace mdfuser {

namespace {

std::vector<Val*> operands(
    TensorView* in, TensorView* weight, TensorView* bias) {
  std::vector<Val*> result{in};
  for (TensorView* tv : {weight, bias}) {
    if (tv != nullptr) {
      result.push_back(tv);
    }
  }
  return result;
}

} // namespace

LayerNormOp::LayerNormOp(
    IrContainer* container,
    TensorView* out,
    TensorView* in,
    TensorView* weight,
    TensorView* bias,
    int64_t normalized_ndim,
    double eps)
    : TensorOp(container, OpType::LayerNorm, operands(in, weight, bias), {out}),
      weight_(weight),
      bias_(bias),
      normalized_ndim_(normalized_ndim),
      eps_(eps) {
  const auto rank = static_cast<int64_t>(in->logicalNoReductions().size());
  MDF_CHECK(
      normalized_ndim >= 1 && normalized_ndim <= rank,
      "layer_norm over ",
      normalized_ndim,
      " axes of a tensor of ",
      rank);
}

TensorView* LayerNormOp::in() const {
  return static_cast<TensorView*>(input(0));
}

std::vector<AxisMapping> LayerNormOp::mapProducerToConsumer(
    const TensorView* producer, const TensorView* consumer) const {
  MDF_CHECK(consumer == out());
  const std::vector<IterDomain*> p = producer->logicalNoReductions();
  const std::vector<IterDomain*>& c = consumer->maybeRoot();
  std::vector<AxisMapping> result;
  // in: axis by axis; weight and bias: the trailing axes.
  const size_t offset = c.size() - p.size();
  for (size_t i = 0; i < p.size(); ++i) {
    result.push_back({p[i], c[offset + i]});
  }
  return result;
}

TensorOp* LayerNormOp::recreate(
    IrContainer* container,
    std::vector<Val*> inputs,
    std::vector<Val*> outputs) const {
  MDF_CHECK(outputs.size() == 1 && inputs.size() == this->inputs().size());
  size_t next = 1;
  auto take = [&](const TensorView* present) -> TensorView* {
    return present == nullptr ? nullptr
                              : static_cast<TensorView*>(inputs.at(next++));
  };
  TensorView* weight = take(weight_);
  TensorView* bias = take(bias_);
  return container->create<LayerNormOp>(
      static_cast<TensorView*>(outputs[0]),
      static_cast<TensorView*>(inputs[0]),
      weight,
      bias,
      normalized_ndim_,
      eps_);
}

std::vector<std::string> LayerNormOp::attributes() const {
  std::ostringstream eps;
  eps << eps_;
  return {
      "normalized_ndim=" + std::to_string(normalized_ndim_),
      "eps=" + eps.str()};
}

} // namespace mdfuser
