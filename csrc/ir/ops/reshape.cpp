// SPDX-License-Identifier: MIT
#include "ir/ops/reshape.h"

#include "ir/container.h"
#include "ir/errors.h"
#include "ir/ops/builder.h"

namespace mdfuser {

ReshapeOp::ReshapeOp(
    IrContainer* container,
    TensorView* out,
    TensorView* in,
    std::vector<Group> groups)
    : TensorOp(container, OpType::Reshape, {in}, {out}),
      groups_(std::move(groups)) {}

TensorView* ReshapeOp::in() const {
  return static_cast<TensorView*>(input(0));
}

std::vector<AxisMapping> ReshapeOp::mapProducerToConsumer(
    const TensorView* producer, const TensorView* consumer) const {
  MDF_CHECK(producer == in() && consumer == out());
  const std::vector<IterDomain*> p = producer->logicalNoReductions();
  const std::vector<IterDomain*>& c = consumer->maybeRoot();
  std::vector<AxisMapping> result;
  for (const Group& g : groups_) {
    const int64_t n_in = g.in_end - g.in_begin;
    const int64_t n_out = g.out_end - g.out_begin;
    if (n_in == 1 && n_out == 1) {
      result.push_back({p[g.in_begin], c[g.out_begin]});
    } else if ((n_in == 1 && n_out > 1) || (n_in > 1 && n_out == 1)) {
      result.push_back({p[g.in_begin], c[g.out_begin], /*exact=*/false});
    }
  }
  return result;
}

TensorOp* ReshapeOp::recreate(
    IrContainer* container,
    std::vector<Val*> inputs,
    std::vector<Val*> outputs) const {
  MDF_CHECK(inputs.size() == 1 && outputs.size() == 1);
  return container->create<ReshapeOp>(
      static_cast<TensorView*>(outputs[0]),
      static_cast<TensorView*>(inputs[0]),
      groups_);
}

namespace {

bool isConstant(const Scalar* s, int64_t value) {
  return s->isConst() && s->value() == value;
}

std::string shapeString(const std::vector<Scalar*>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    s += (i > 0 ? ", " : "") + shape[i]->toString();
  }
  return s + "]";
}

// Works out the groups of a reshape of `in` (extents) into `out`, filling
// in a -1 of `out`. Static groups pair runs with equal products; a
// symbolic extent pairs with itself or with the -1.
std::vector<ReshapeOp::Group> group(
    const std::vector<Scalar*>& in,
    std::vector<Scalar*>& out,
    const std::string& what) {
  int64_t inferred = -1;
  for (size_t j = 0; j < out.size(); ++j) {
    if (isConstant(out[j], -1)) {
      MDF_USER_CHECK(inferred < 0, what, ": at most one -1 is allowed");
      inferred = static_cast<int64_t>(j);
    } else {
      MDF_USER_CHECK(
          !out[j]->isConst() || out[j]->value() >= 0,
          what,
          ": extent ",
          out[j]->toString(),
          " is negative");
    }
  }
  // A -1 next to static extents only: infer it from the element count
  // when every input extent is static.
  bool all_static = true;
  int64_t in_count = 1;
  for (Scalar* e : in) {
    all_static = all_static && e->isConst();
    in_count *= e->isConst() ? e->value() : 1;
  }
  if (inferred >= 0 && all_static) {
    int64_t rest = 1;
    for (size_t j = 0; j < out.size(); ++j) {
      if (static_cast<int64_t>(j) != inferred) {
        MDF_USER_CHECK(
            out[j]->isConst(),
            what,
            ": cannot infer -1 next to symbolic ",
            out[j]->toString());
        rest *= out[j]->value();
      }
    }
    MDF_USER_CHECK(
        rest != 0 && in_count % rest == 0,
        what,
        ": cannot infer -1: ",
        in_count,
        " elements do not divide into ",
        rest);
    out[inferred] = constant(out[inferred]->container(), in_count / rest);
    inferred = -1;
  }

  std::vector<ReshapeOp::Group> groups;
  size_t i = 0;
  size_t j = 0;
  while (i < in.size() || j < out.size()) {
    // Axes of extent 1 form groups of their own.
    if (i < in.size() && isConstant(in[i], 1)) {
      groups.push_back({int64_t(i), int64_t(i + 1), int64_t(j), int64_t(j)});
      ++i;
      continue;
    }
    if (j < out.size() && isConstant(out[j], 1)) {
      groups.push_back({int64_t(i), int64_t(i), int64_t(j), int64_t(j + 1)});
      ++j;
      continue;
    }
    MDF_USER_CHECK(
        i < in.size() && j < out.size(), what, ": the element counts differ");
    if (!in[i]->isConst() || !out[j]->isConst()) {
      const bool same =
          in[i] == out[j] || (static_cast<int64_t>(j) == inferred);
      MDF_USER_CHECK(
          same,
          what,
          ": cannot tell how the symbolic extent ",
          (!in[i]->isConst() ? in[i] : out[j])->toString(),
          " is reshaped; keep it as its own dimension (or -1) or give "
          "static extents");
      if (static_cast<int64_t>(j) == inferred) {
        out[j] = in[i];
      }
      groups.push_back(
          {int64_t(i), int64_t(i + 1), int64_t(j), int64_t(j + 1)});
      ++i;
      ++j;
      continue;
    }
    const size_t i0 = i;
    const size_t j0 = j;
    int64_t p_in = in[i++]->value();
    int64_t p_out = out[j++]->value();
    while (p_in != p_out) {
      if (p_in < p_out) {
        MDF_USER_CHECK(
            i < in.size() && in[i]->isConst(),
            what,
            ": the element counts differ");
        p_in *= in[i++]->value();
      } else {
        MDF_USER_CHECK(
            j < out.size() && out[j]->isConst(),
            what,
            ": the element counts differ");
        p_out *= out[j++]->value();
      }
    }
    groups.push_back({int64_t(i0), int64_t(i), int64_t(j0), int64_t(j)});
  }
  MDF_USER_CHECK(
      inferred < 0 || !isConstant(out[inferred], -1),
      what,
      ": cannot infer -1");
  return groups;
}

} // namespace

TensorView* reshape(TensorView* in, const std::vector<Scalar*>& shape) {
  ops::requireTensor(in, "reshape", "input");
  ops::requireSameFusion({in}, "reshape");
  const std::vector<IterDomain*> ids = in->logicalNoReductions();
  std::vector<Scalar*> in_extents;
  for (IterDomain* id : ids) {
    in_extents.push_back(id->extent());
  }
  std::vector<Scalar*> out_extents = shape;
  const std::string what =
      "reshape of " + in->toString() + " to " + shapeString(shape);
  for (IterDomain* id : ids) {
    MDF_USER_CHECK(
        !id->isExpanded(),
        what,
        ": dimension ",
        id->toString(),
        " is an expanded broadcast; reshape cannot merge or split it");
  }
  std::vector<ReshapeOp::Group> groups = group(in_extents, out_extents, what);
  IrContainer* container = in->container();
  std::vector<IterDomain*> out_ids;
  for (Scalar* extent : out_extents) {
    out_ids.push_back(container->create<IterDomain>(extent));
  }
  TensorView* out = ops::newTensor(container, out_ids, in->dtype());
  container->create<ReshapeOp>(out, in, std::move(groups))
      ->registerAsDefinition();
  return out;
}

} // namespace mdfuser
