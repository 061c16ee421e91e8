// SPDX-License-Identifier: MIT
#include "ir/ops/matmul.h"

#include "ir/container.h"
#include "ir/errors.h"
#include "ir/ops/builder.h"

namespace mdfuser {

namespace {

std::vector<Val*> operands(std::initializer_list<TensorView*> tvs) {
  std::vector<Val*> result;
  for (TensorView* tv : tvs) {
    if (tv != nullptr) {
      result.push_back(tv);
    }
  }
  return result;
}

void checkSameDtype(const TensorView* a, const TensorView* b, const char* op) {
  MDF_TYPE_CHECK(
      a->dtype() == b->dtype(),
      op,
      ": operands must have the same dtype, got ",
      a->dtype(),
      " for ",
      a->toString(),
      " and ",
      b->dtype(),
      " for ",
      b->toString());
}

// As torch's: floating-point and integer tensors (integers on the CPU
// only, which the runtime checks: cuBLAS has no integer GEMM), not Bool.
void checkMatmulDtype(const TensorView* tv, const char* op) {
  MDF_TYPE_CHECK(
      isFloatingType(tv->dtype()) || isIntegralType(tv->dtype()),
      op,
      " takes floating-point or integer tensors, got ",
      tv->dtype(),
      " for ",
      tv->toString());
}

// Maps the batch axes of an operand (all but its last `matrix_axes`) to
// the output's batch axes, aligned at the end; broadcast ones map to
// nothing.
void mapBatch(
    const std::vector<IterDomain*>& p,
    size_t matrix_axes,
    const std::vector<IterDomain*>& out,
    size_t out_batch,
    std::vector<AxisMapping>& result) {
  const size_t batch = p.size() - matrix_axes;
  for (size_t i = 0; i < batch; ++i) {
    const size_t pos = out_batch - batch + i;
    if (!p[i]->isBroadcast() &&
        !(p[i]->extent()->isConst() && p[i]->extent()->value() == 1 &&
          !(out[pos]->extent()->isConst() &&
            out[pos]->extent()->value() == 1))) {
      result.push_back({p[i], out[pos]});
    }
  }
}

} // namespace

// ---------------------------------------------------------------- LinearOp

LinearOp::LinearOp(
    IrContainer* container,
    TensorView* out,
    TensorView* in,
    TensorView* weight,
    TensorView* bias)
    : TensorOp(container, OpType::Linear, operands({in, weight, bias}), {out}) {
}

TensorView* LinearOp::in() const {
  return static_cast<TensorView*>(input(0));
}
TensorView* LinearOp::weight() const {
  return static_cast<TensorView*>(input(1));
}
TensorView* LinearOp::bias() const {
  return inputs().size() > 2 ? static_cast<TensorView*>(input(2)) : nullptr;
}

size_t LinearOp::outFeatureAxes() const {
  return weight()->logicalNoReductions().size() - 1;
}

std::vector<AxisMapping> LinearOp::mapProducerToConsumer(
    const TensorView* producer, const TensorView* consumer) const {
  MDF_CHECK(consumer == out(), consumer->toString(), " is not an output");
  // out root: [batch..., N, rK] for a weight [N, K]; [A, batch..., B, rK]
  // for a weight [A, B, K] (out_features split in two, A outermost).
  const std::vector<IterDomain*>& c = consumer->maybeRoot();
  const size_t n = c.size();
  const size_t lead = outFeatureAxes() - 1;
  // The output positions of the weight's out_features axes.
  std::vector<size_t> features;
  if (lead == 1) {
    features.push_back(0);
  }
  features.push_back(n - 2);
  const std::vector<IterDomain*> p = producer->logicalNoReductions();
  std::vector<AxisMapping> result;
  if (producer == in()) {
    // The batch axes sit between the leading A (if any) and B.
    const std::vector<IterDomain*> batch_and_b(c.begin() + lead, c.end() - 1);
    mapBatch(p, 1, batch_and_b, batch_and_b.size() - 1, result);
    result.push_back({p.back(), c[n - 1]});
  } else if (producer == weight()) {
    for (size_t i = 0; i < features.size(); ++i) {
      result.push_back({p[i], c[features[i]]});
    }
    result.push_back({p[features.size()], c[n - 1]});
  } else {
    MDF_CHECK(producer == bias(), producer->toString(), " is not an operand");
    for (size_t i = 0; i < features.size(); ++i) {
      result.push_back({p[i], c[features[i]]});
    }
  }
  return result;
}

std::vector<TensorView*> LinearOp::shardingPriority() const {
  std::vector<TensorView*> result = {weight()};
  if (bias() != nullptr) {
    result.push_back(bias());
  }
  result.push_back(in());
  return result;
}

TensorOp* LinearOp::recreate(
    IrContainer* container,
    std::vector<Val*> inputs,
    std::vector<Val*> outputs) const {
  MDF_CHECK(outputs.size() == 1 && (inputs.size() == 2 || inputs.size() == 3));
  return container->create<LinearOp>(
      static_cast<TensorView*>(outputs[0]),
      static_cast<TensorView*>(inputs[0]),
      static_cast<TensorView*>(inputs[1]),
      inputs.size() > 2 ? static_cast<TensorView*>(inputs[2]) : nullptr);
}

TensorView* linear(TensorView* in, TensorView* weight, TensorView* bias) {
  ops::requireTensor(in, "linear", "input");
  ops::requireTensor(weight, "linear", "weight");
  ops::requireSameFusion({in, weight, bias}, "linear");
  const std::vector<IterDomain*> in_ids = in->logicalNoReductions();
  const std::vector<IterDomain*> w_ids = weight->logicalNoReductions();
  MDF_USER_CHECK(
      !in_ids.empty(),
      "linear: input must have at least 1 dimension, got a 0-dimensional ",
      in->toString());
  // [out_features, in_features], or out_features split in two, [A, B,
  // in_features] (nvfuser_direct's form of a weight whose out_features are
  // split across devices): the output has an axis per out_features axis,
  // A outermost as in nvfuser_direct ([A, batch..., B]).
  MDF_USER_CHECK(
      w_ids.size() == 2 || w_ids.size() == 3,
      "linear: weight must be 2-dimensional [out_features, in_features] or "
      "3-dimensional [A, B, in_features] (out_features split in two), got ",
      w_ids.size(),
      " dimensions in ",
      weight->toString());
  const size_t features = w_ids.size() - 1;
  checkSameDtype(in, weight, "linear");
  checkMatmulDtype(in, "linear");
  ops::requireEqualExtents(
      in_ids.back()->extent(),
      w_ids.back()->extent(),
      "linear: in_features of the input (last axis) and of the weight (its "
      "last axis)");
  if (bias != nullptr) {
    const std::vector<IterDomain*> b_ids = bias->logicalNoReductions();
    MDF_USER_CHECK(
        b_ids.size() == features,
        "linear: bias must have the weight's out_features axes (",
        features,
        "), got ",
        b_ids.size(),
        " dimensions in ",
        bias->toString());
    checkSameDtype(in, bias, "linear");
    for (size_t i = 0; i < features; ++i) {
      ops::requireEqualExtents(
          w_ids[i]->extent(),
          b_ids[i]->extent(),
          "linear: out_features axis " + std::to_string(i) +
              " of the weight and the bias");
    }
  }

  std::vector<IterDomain*> out_ids;
  if (features == 2) {
    out_ids.push_back(ops::freshAxis(w_ids[0], IterType::Iteration));
  }
  for (size_t i = 0; i + 1 < in_ids.size(); ++i) {
    out_ids.push_back(ops::freshAxis(in_ids[i], in_ids[i]->iterType()));
  }
  out_ids.push_back(ops::freshAxis(w_ids[features - 1], IterType::Iteration));
  out_ids.push_back(ops::freshAxis(in_ids.back(), IterType::Reduction));
  TensorView* out = ops::newTensor(in->container(), out_ids, in->dtype());
  in->container()
      ->create<LinearOp>(out, in, weight, bias)
      ->registerAsDefinition();
  return out;
}

// ---------------------------------------------------------------- MatmulOp

MatmulOp::MatmulOp(
    IrContainer* container, TensorView* out, TensorView* a, TensorView* b)
    : TensorOp(container, OpType::Matmul, {a, b}, {out}) {}

TensorView* MatmulOp::a() const {
  return static_cast<TensorView*>(input(0));
}
TensorView* MatmulOp::b() const {
  return static_cast<TensorView*>(input(1));
}

std::vector<AxisMapping> MatmulOp::mapProducerToConsumer(
    const TensorView* producer, const TensorView* consumer) const {
  MDF_CHECK(consumer == out(), consumer->toString(), " is not an output");
  // out root: [batch..., M, N, rK]
  const std::vector<IterDomain*>& c = consumer->maybeRoot();
  const size_t n = c.size();
  const std::vector<IterDomain*> p = producer->logicalNoReductions();
  const size_t k = p.size();
  std::vector<AxisMapping> result;
  if (producer == a()) {
    mapBatch(p, 2, c, n - 3, result);
    result.push_back({p[k - 2], c[n - 3]});
    result.push_back({p[k - 1], c[n - 1]});
  } else {
    MDF_CHECK(producer == b(), producer->toString(), " is not an operand");
    mapBatch(p, 2, c, n - 3, result);
    result.push_back({p[k - 2], c[n - 1]});
    result.push_back({p[k - 1], c[n - 2]});
  }
  return result;
}

std::vector<TensorView*> MatmulOp::shardingPriority() const {
  return {b(), a()};
}

TensorOp* MatmulOp::recreate(
    IrContainer* container,
    std::vector<Val*> inputs,
    std::vector<Val*> outputs) const {
  MDF_CHECK(inputs.size() == 2 && outputs.size() == 1);
  return container->create<MatmulOp>(
      static_cast<TensorView*>(outputs[0]),
      static_cast<TensorView*>(inputs[0]),
      static_cast<TensorView*>(inputs[1]));
}

TensorView* matmul(TensorView* a, TensorView* b) {
  ops::requireTensor(a, "matmul", "first operand");
  ops::requireTensor(b, "matmul", "second operand");
  ops::requireSameFusion({a, b}, "matmul");
  const std::vector<IterDomain*> a_ids = a->logicalNoReductions();
  const std::vector<IterDomain*> b_ids = b->logicalNoReductions();
  MDF_USER_CHECK(
      a_ids.size() >= 2,
      "matmul: the first operand must have at least 2 dimensions [..., M, K], "
      "got ",
      a_ids.size(),
      " in ",
      a->toString());
  MDF_USER_CHECK(
      b_ids.size() >= 2,
      "matmul: the second operand must have at least 2 dimensions [..., K, "
      "N], got ",
      b_ids.size(),
      " in ",
      b->toString());
  checkSameDtype(a, b, "matmul");
  checkMatmulDtype(a, "matmul");
  ops::requireEqualExtents(
      a_ids.back()->extent(),
      b_ids[b_ids.size() - 2]->extent(),
      "matmul: K of the first operand (last axis) and of the second (axis "
      "-2)");

  // Batch axes broadcast as in torch, aligned at the end.
  const size_t a_batch = a_ids.size() - 2;
  const size_t b_batch = b_ids.size() - 2;
  const size_t batch = std::max(a_batch, b_batch);
  IrContainer* container = a->container();
  std::vector<IterDomain*> out_ids;
  auto unit = [](const IterDomain* id) {
    return id->isBroadcast() ||
           (id->extent()->isConst() && id->extent()->value() == 1);
  };
  for (size_t i = 0; i < batch; ++i) {
    IterDomain* x = i + a_batch >= batch ? a_ids[i + a_batch - batch] : nullptr;
    IterDomain* y = i + b_batch >= batch ? b_ids[i + b_batch - batch] : nullptr;
    if (x != nullptr && y != nullptr && !unit(x) && !unit(y)) {
      ops::requireEqualExtents(
          x->extent(),
          y->extent(),
          "matmul: batch dimension " + std::to_string(i) + " of the operands");
    }
    IterDomain* like = x == nullptr || (unit(x) && y != nullptr) ? y : x;
    out_ids.push_back(ops::freshAxis(like, like->iterType()));
  }
  out_ids.push_back(
      ops::freshAxis(a_ids[a_ids.size() - 2], IterType::Iteration));
  out_ids.push_back(ops::freshAxis(b_ids.back(), IterType::Iteration));
  out_ids.push_back(ops::freshAxis(a_ids.back(), IterType::Reduction));
  TensorView* out = ops::newTensor(container, out_ids, a->dtype());
  container->create<MatmulOp>(out, a, b)->registerAsDefinition();
  return out;
}

} // namespace mdfuser
