// SPDX-License-Identifier: MIT
#include "ir/ops/slice.h"

#include "ir/container.h"
#include "ir/errors.h"
#include "ir/fusion.h"
#include "ir/ops/builder.h"

namespace mdfuser {

namespace {

std::vector<Val*> withStarts(
    TensorView* in, const std::vector<Scalar*>& starts) {
  std::vector<Val*> inputs = {in};
  inputs.insert(inputs.end(), starts.begin(), starts.end());
  return inputs;
}

} // namespace

SliceOp::SliceOp(
    IrContainer* container,
    TensorView* out,
    TensorView* in,
    std::vector<Scalar*> starts)
    : TensorOp(container, OpType::Slice, withStarts(in, starts), {out}),
      starts_(std::move(starts)) {
  MDF_CHECK_EQ(starts_.size(), in->logicalNoReductions().size());
}

TensorView* SliceOp::in() const {
  return static_cast<TensorView*>(input(0));
}

bool SliceOp::isWhole(size_t axis) const {
  Scalar* in_extent = in()->logicalNoReductions().at(axis)->extent();
  Scalar* out_extent = out()->logical().at(axis)->extent();
  const Scalar* start = starts_.at(axis);
  const bool from_zero = start->isConst() && start->value() == 0;
  const bool same_extent = in_extent == out_extent ||
                           (in_extent->isConst() && out_extent->isConst() &&
                            in_extent->value() == out_extent->value());
  return from_zero && same_extent;
}

std::vector<AxisMapping> SliceOp::mapProducerToConsumer(
    const TensorView* producer, const TensorView* consumer) const {
  MDF_CHECK(producer == in() && consumer == out());
  const std::vector<IterDomain*> p = producer->logicalNoReductions();
  const std::vector<IterDomain*>& c = consumer->maybeRoot();
  std::vector<AxisMapping> result;
  for (size_t i = 0; i < p.size(); ++i) {
    if (isWhole(i)) {
      result.push_back({p[i], c[i]});
    }
  }
  return result;
}

TensorOp* SliceOp::recreate(
    IrContainer* container,
    std::vector<Val*> inputs,
    std::vector<Val*> outputs) const {
  MDF_CHECK(outputs.size() == 1 && !inputs.empty());
  std::vector<Scalar*> starts;
  for (size_t i = 1; i < inputs.size(); ++i) {
    starts.push_back(static_cast<Scalar*>(inputs[i]));
  }
  return container->create<SliceOp>(
      static_cast<TensorView*>(outputs[0]),
      static_cast<TensorView*>(inputs[0]),
      std::move(starts));
}

std::vector<std::string> SliceOp::attributes() const {
  return {};
}

TensorView* slice(
    TensorView* in,
    const std::vector<Scalar*>& starts,
    const std::vector<Scalar*>& ends,
    const std::vector<int64_t>& strides) {
  ops::requireTensor(in, "slice", "input");
  std::vector<Val*> operands{in};
  operands.insert(operands.end(), starts.begin(), starts.end());
  operands.insert(operands.end(), ends.begin(), ends.end());
  ops::requireSameFusion(operands, "slice");
  const std::vector<IterDomain*> ids = in->logicalNoReductions();
  MDF_USER_CHECK(
      starts.size() == ids.size() && ends.size() == ids.size(),
      "slice: start_indices and end_indices need one entry per dimension of ",
      in->toString(),
      " (",
      ids.size(),
      "), got ",
      starts.size(),
      " and ",
      ends.size());
  for (int64_t stride : strides) {
    MDF_USER_CHECK(
        stride == 1, "slice: only strides of 1 are supported, got ", stride);
  }
  IrContainer* container = in->container();
  std::vector<IterDomain*> out_ids;
  for (size_t i = 0; i < ids.size(); ++i) {
    Scalar* start = starts[i];
    Scalar* end = ends[i];
    Scalar* extent = ids[i]->extent();
    MDF_USER_CHECK(
        !start->isConst() || start->value() >= 0,
        "slice: start ",
        start->toString(),
        " of dimension ",
        i,
        " is negative");
    if (start->isConst() && end->isConst()) {
      MDF_USER_CHECK(
          end->value() >= start->value(),
          "slice: end ",
          end->value(),
          " of dimension ",
          i,
          " is before its start ",
          start->value());
    }
    if (end->isConst() && extent->isConst()) {
      MDF_USER_CHECK(
          end->value() <= extent->value(),
          "slice: end ",
          end->value(),
          " of dimension ",
          i,
          " is past its extent ",
          extent->value());
    } else if (end != extent) {
      // Known when the inputs arrive.
      fusionOf(in)->addBoundConstraint(
          end,
          extent,
          detail::concat("slice: the end of dimension ", i),
          "its extent");
    }
    if (!start->isConst() || !end->isConst()) {
      fusionOf(in)->addBoundConstraint(
          start,
          end,
          detail::concat("slice: the start of dimension ", i),
          "its end");
    }
    MDF_USER_CHECK(
        !ids[i]->isExpanded(),
        "slice: dimension ",
        i,
        " is an expanded broadcast");
    Scalar* length = end == extent && start->isConst() && start->value() == 0
                         ? extent
                         : sub(end, start);
    out_ids.push_back(container->create<IterDomain>(length));
  }
  TensorView* out = ops::newTensor(container, out_ids, in->dtype());
  container->create<SliceOp>(out, in, starts)->registerAsDefinition();
  return out;
}

// ------------------------------------------------------------------- CatOp

CatOp::CatOp(
    IrContainer* container, TensorView* out, std::vector<Val*> ins, int64_t dim)
    : TensorOp(container, OpType::Cat, std::move(ins), {out}), dim_(dim) {}

std::vector<AxisMapping> CatOp::mapProducerToConsumer(
    const TensorView* producer, const TensorView* consumer) const {
  MDF_CHECK(consumer == out());
  const std::vector<IterDomain*> p = producer->logicalNoReductions();
  const std::vector<IterDomain*>& c = consumer->maybeRoot();
  std::vector<AxisMapping> result;
  for (size_t i = 0; i < p.size(); ++i) {
    if (static_cast<int64_t>(i) != dim_) {
      result.push_back({p[i], c[i]});
    }
  }
  return result;
}

TensorOp* CatOp::recreate(
    IrContainer* container,
    std::vector<Val*> inputs,
    std::vector<Val*> outputs) const {
  MDF_CHECK_EQ(outputs.size(), size_t{1});
  return container->create<CatOp>(
      static_cast<TensorView*>(outputs[0]), std::move(inputs), dim_);
}

std::vector<std::string> CatOp::attributes() const {
  return {"dim=" + std::to_string(dim_)};
}

TensorView* cat(const std::vector<TensorView*>& ins, int64_t dim) {
  MDF_USER_CHECK(!ins.empty(), "cat: needs at least one tensor");
  std::vector<Val*> operands;
  for (size_t i = 0; i < ins.size(); ++i) {
    operands.push_back(
        ops::requireTensor(ins[i], "cat", "tensor " + std::to_string(i)));
  }
  ops::requireSameFusion(operands, "cat");
  const std::vector<IterDomain*> first = ins[0]->logicalNoReductions();
  const auto rank = static_cast<int64_t>(first.size());
  MDF_USER_CHECK(rank > 0, "cat: cannot concatenate 0-dimensional tensors");
  const int64_t d = ops::normalizeDim(dim, rank, "cat");
  Scalar* total = constant(ins[0]->container(), 0);
  for (size_t i = 0; i < ins.size(); ++i) {
    const std::vector<IterDomain*> ids = ins[i]->logicalNoReductions();
    MDF_USER_CHECK(
        static_cast<int64_t>(ids.size()) == rank,
        "cat: tensor ",
        i,
        " has ",
        ids.size(),
        " dimensions but tensor 0 has ",
        rank);
    MDF_TYPE_CHECK(
        ins[i]->dtype() == ins[0]->dtype(),
        "cat: tensor ",
        i,
        " has dtype ",
        ins[i]->dtype(),
        " but tensor 0 has ",
        ins[0]->dtype());
    for (int64_t a = 0; a < rank; ++a) {
      if (a != d) {
        ops::requireEqualExtents(
            first[a]->extent(),
            ids[a]->extent(),
            "cat: dimension " + std::to_string(a) + " of tensor 0 and tensor " +
                std::to_string(i));
      }
    }
    total = add(total, ids[d]->extent());
  }
  std::vector<IterDomain*> out_ids;
  IrContainer* container = ins[0]->container();
  for (int64_t a = 0; a < rank; ++a) {
    out_ids.push_back(
        container->create<IterDomain>(a == d ? total : first[a]->extent()));
  }
  TensorView* out = ops::newTensor(container, out_ids, ins[0]->dtype());
  container->create<CatOp>(out, std::move(operands), d)->registerAsDefinition();
  return out;
}

} // namespace mdfuser
