// SPDX-License-Identifier: MIT
#include "ir/ops/squeeze.h"

#include "ir/container.h"
#include "ir/errors.h"
#include "ir/ops/builder.h"

namespace mdfuser {

SqueezeOp::SqueezeOp(
    IrContainer* container,
    TensorView* out,
    TensorView* in,
    std::vector<bool> is_removed)
    : TensorOp(container, OpType::Squeeze, {in}, {out}),
      is_removed_(std::move(is_removed)) {
  MDF_CHECK_EQ(is_removed_.size(), in->logicalNoReductions().size());
}

TensorView* SqueezeOp::in() const {
  return static_cast<TensorView*>(input(0));
}

std::vector<AxisMapping> SqueezeOp::mapProducerToConsumer(
    const TensorView* producer, const TensorView* consumer) const {
  MDF_CHECK(producer == in() && consumer == out());
  const std::vector<IterDomain*> p = producer->logicalNoReductions();
  const std::vector<IterDomain*>& c = consumer->maybeRoot();
  std::vector<AxisMapping> result;
  size_t next = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (!is_removed_[i]) {
      result.push_back({p[i], c[next++]});
    }
  }
  return result;
}

TensorOp* SqueezeOp::recreate(
    IrContainer* container,
    std::vector<Val*> inputs,
    std::vector<Val*> outputs) const {
  MDF_CHECK(inputs.size() == 1 && outputs.size() == 1);
  return container->create<SqueezeOp>(
      static_cast<TensorView*>(outputs[0]),
      static_cast<TensorView*>(inputs[0]),
      is_removed_);
}

std::vector<std::string> SqueezeOp::attributes() const {
  std::vector<int64_t> dims;
  for (size_t i = 0; i < is_removed_.size(); ++i) {
    if (is_removed_[i]) {
      dims.push_back(static_cast<int64_t>(i));
    }
  }
  return {"dims=" + ops::listString(dims)};
}

TensorView* squeeze(
    TensorView* in, const std::vector<int64_t>& dims, bool squeeze_expanded) {
  ops::requireTensor(in, "squeeze", "input");
  ops::requireSameFusion({in}, "squeeze");
  const std::vector<IterDomain*> ids = in->logicalNoReductions();
  const auto rank = static_cast<int64_t>(ids.size());
  std::vector<bool> removed(rank, false);
  for (int64_t d : dims) {
    const int64_t n = ops::normalizeDim(d, rank, "squeeze");
    MDF_USER_CHECK(
        !removed[n],
        "squeeze: dimension ",
        n,
        " is given twice in dims=",
        ops::listString(dims));
    IterDomain* id = ids[n];
    const bool unit =
        (id->isBroadcast() && (!id->isExpanded() || squeeze_expanded)) ||
        (id->extent()->isConst() && id->extent()->value() == 1);
    MDF_USER_CHECK(
        unit,
        "squeeze: dimension ",
        n,
        " of ",
        in->toString(),
        " has extent ",
        id->extent()->toString(),
        id->isExpanded()
            ? " (an expanded broadcast; pass squeeze_expanded=True)"
            : "",
        "; only dimensions of extent 1 can be squeezed");
    removed[n] = true;
  }
  std::vector<IterDomain*> out_ids;
  for (int64_t i = 0; i < rank; ++i) {
    if (!removed[i]) {
      out_ids.push_back(ops::freshAxis(ids[i], ids[i]->iterType()));
    }
  }
  TensorView* out = ops::newTensor(in->container(), out_ids, in->dtype());
  in->container()
      ->create<SqueezeOp>(out, in, std::move(removed))
      ->registerAsDefinition();
  return out;
}

} // namespace mdfuser
