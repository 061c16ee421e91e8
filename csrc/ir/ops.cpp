// SPDX-License-Identifier: MIT
#include "ir/ops.h"

#include "ir/container.h"
#include "ir/errors.h"
#include "ir/fusion.h"

namespace mdfuser {

std::vector<TensorView*> TensorOp::tensorInputs() const {
  std::vector<TensorView*> result;
  for (Val* in : inputs()) {
    result.push_back(static_cast<TensorView*>(in));
  }
  return result;
}

std::string TensorOp::toString() const {
  // The output on its own line, then "= op(" with one argument per line,
  // arguments aligned.
  const std::string head = "   = " + std::string(opName()) + "(";
  std::string s = out()->toString() + "\n" + head;
  const std::string pad(head.size(), ' ');
  const std::vector<Val*>& args = inputs();
  for (size_t i = 0; i < args.size(); ++i) {
    if (i > 0) {
      s += ",\n" + pad;
    }
    s += args[i]->toString();
  }
  return s + ")";
}

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

void checkTensorOperand(
    const TensorView* tv, const char* op, const char* role) {
  MDF_TYPE_CHECK(tv != nullptr, op, ": ", role, " must be a tensor, got None");
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

// Records that two extents must agree. Constant mismatches fail now.
void requireEqualExtents(
    IterDomain* a, IterDomain* b, const std::string& what) {
  Scalar* x = a->extent();
  Scalar* y = b->extent();
  if (x->isConst() && y->isConst()) {
    MDF_USER_CHECK(
        x->value() == y->value(),
        what,
        " must match, got ",
        x->value(),
        " and ",
        y->value());
    return;
  }
  if (x != y) {
    fusionOf(a)->addExtentConstraint(x, y, what);
  }
}

IterDomain* freshIterDomain(IterDomain* like, IterType type) {
  return like->container()->create<IterDomain>(like->extent(), type);
}

TensorView* newOutput(TensorView* like, std::vector<IterDomain*> logical) {
  return like->container()->create<TensorView>(
      std::move(logical), like->dtype());
}

std::vector<std::pair<IterDomain*, IterDomain*>> zipMap(
    const std::vector<IterDomain*>& producer,
    const std::vector<IterDomain*>& consumer) {
  std::vector<std::pair<IterDomain*, IterDomain*>> result;
  for (size_t i = 0; i < producer.size() && i < consumer.size(); ++i) {
    result.emplace_back(producer[i], consumer[i]);
  }
  return result;
}

} // namespace

// ---------------------------------------------------------------- LinearOp

LinearOp::LinearOp(
    IrContainer* container,
    TensorView* out,
    TensorView* in,
    TensorView* weight,
    TensorView* bias)
    : TensorOp(container, operands({in, weight, bias}), {out}) {}

TensorView* LinearOp::in() const {
  return static_cast<TensorView*>(input(0));
}
TensorView* LinearOp::weight() const {
  return static_cast<TensorView*>(input(1));
}
TensorView* LinearOp::bias() const {
  return inputs().size() > 2 ? static_cast<TensorView*>(input(2)) : nullptr;
}

std::vector<std::pair<IterDomain*, IterDomain*>>
LinearOp::mapProducerToConsumer(const TensorView* producer) const {
  // out root: [batch..., N, rK]
  const std::vector<IterDomain*>& out_ids = out()->maybeRoot();
  const size_t n = out_ids.size();
  const std::vector<IterDomain*> p = producer->logicalNoReductions();
  std::vector<std::pair<IterDomain*, IterDomain*>> result;
  if (producer == in()) {
    for (size_t i = 0; i + 1 < p.size(); ++i) {
      result.emplace_back(p[i], out_ids[i]);
    }
    result.emplace_back(p.back(), out_ids[n - 1]);
  } else if (producer == weight()) {
    result.emplace_back(p[0], out_ids[n - 2]);
    result.emplace_back(p[1], out_ids[n - 1]);
  } else {
    MDF_CHECK(producer == bias(), producer->toString(), " is not an operand");
    result.emplace_back(p[0], out_ids[n - 2]);
  }
  return result;
}

TensorOp* LinearOp::withOperands(
    TensorView* out, const std::vector<TensorView*>& inputs) const {
  MDF_CHECK_EQ(inputs.size(), this->inputs().size());
  return container()->create<LinearOp>(
      out, inputs[0], inputs[1], inputs.size() > 2 ? inputs[2] : nullptr);
}

Statement* LinearOp::cloneInto(IrCloner& cloner) const {
  return cloner.target()->create<LinearOp>(
      cloner.clone(out()),
      cloner.clone(in()),
      cloner.clone(weight()),
      cloner.clone(bias()));
}

TensorView* linear(TensorView* in, TensorView* weight, TensorView* bias) {
  checkTensorOperand(in, "linear", "input");
  checkTensorOperand(weight, "linear", "weight");
  const std::vector<IterDomain*> in_ids = in->logicalNoReductions();
  const std::vector<IterDomain*> w_ids = weight->logicalNoReductions();
  MDF_USER_CHECK(
      !in_ids.empty(),
      "linear: input must have at least 1 dimension, got a 0-dimensional ",
      in->toString());
  MDF_USER_CHECK(
      w_ids.size() == 2,
      "linear: weight must be 2-dimensional [out_features, in_features], "
      "got ",
      w_ids.size(),
      " dimensions in ",
      weight->toString());
  checkSameDtype(in, weight, "linear");
  requireEqualExtents(
      in_ids.back(),
      w_ids[1],
      "linear: in_features of the input (last axis) and of the weight (axis "
      "1)");
  if (bias != nullptr) {
    const std::vector<IterDomain*> b_ids = bias->logicalNoReductions();
    MDF_USER_CHECK(
        b_ids.size() == 1,
        "linear: bias must be 1-dimensional [out_features], got ",
        b_ids.size(),
        " dimensions in ",
        bias->toString());
    checkSameDtype(in, bias, "linear");
    requireEqualExtents(
        w_ids[0], b_ids[0], "linear: out_features of the weight and the bias");
  }

  std::vector<IterDomain*> out_ids;
  for (size_t i = 0; i + 1 < in_ids.size(); ++i) {
    out_ids.push_back(freshIterDomain(in_ids[i], IterType::Iteration));
  }
  out_ids.push_back(freshIterDomain(w_ids[0], IterType::Iteration));
  out_ids.push_back(freshIterDomain(in_ids.back(), IterType::Reduction));
  TensorView* out = newOutput(in, std::move(out_ids));
  in->container()
      ->create<LinearOp>(out, in, weight, bias)
      ->registerAsDefinition();
  return out;
}

// ---------------------------------------------------------------- MatmulOp

MatmulOp::MatmulOp(
    IrContainer* container, TensorView* out, TensorView* a, TensorView* b)
    : TensorOp(container, {a, b}, {out}) {}

TensorView* MatmulOp::a() const {
  return static_cast<TensorView*>(input(0));
}
TensorView* MatmulOp::b() const {
  return static_cast<TensorView*>(input(1));
}

std::vector<std::pair<IterDomain*, IterDomain*>>
MatmulOp::mapProducerToConsumer(const TensorView* producer) const {
  // out root: [batch..., M, N, rK]
  const std::vector<IterDomain*>& out_ids = out()->maybeRoot();
  const size_t n = out_ids.size();
  const std::vector<IterDomain*> p = producer->logicalNoReductions();
  std::vector<std::pair<IterDomain*, IterDomain*>> result;
  if (producer == a()) {
    for (size_t i = 0; i + 1 < p.size(); ++i) {
      result.emplace_back(p[i], out_ids[i]);
    }
    result.emplace_back(p.back(), out_ids[n - 1]);
  } else {
    MDF_CHECK(producer == b(), producer->toString(), " is not an operand");
    result.emplace_back(p[0], out_ids[n - 1]);
    result.emplace_back(p[1], out_ids[n - 2]);
  }
  return result;
}

TensorOp* MatmulOp::withOperands(
    TensorView* out, const std::vector<TensorView*>& inputs) const {
  MDF_CHECK_EQ(inputs.size(), size_t{2});
  return container()->create<MatmulOp>(out, inputs[0], inputs[1]);
}

Statement* MatmulOp::cloneInto(IrCloner& cloner) const {
  return cloner.target()->create<MatmulOp>(
      cloner.clone(out()), cloner.clone(a()), cloner.clone(b()));
}

TensorView* matmul(TensorView* a, TensorView* b) {
  checkTensorOperand(a, "matmul", "first operand");
  checkTensorOperand(b, "matmul", "second operand");
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
      b_ids.size() == 2,
      "matmul: the second operand must be 2-dimensional [K, N], got ",
      b_ids.size(),
      " dimensions in ",
      b->toString());
  checkSameDtype(a, b, "matmul");
  requireEqualExtents(
      a_ids.back(),
      b_ids[0],
      "matmul: K of the first operand (last axis) and of the second (axis 0)");

  std::vector<IterDomain*> out_ids;
  for (size_t i = 0; i + 1 < a_ids.size(); ++i) {
    out_ids.push_back(freshIterDomain(a_ids[i], IterType::Iteration));
  }
  out_ids.push_back(freshIterDomain(b_ids[1], IterType::Iteration));
  out_ids.push_back(freshIterDomain(a_ids.back(), IterType::Reduction));
  TensorView* out = newOutput(a, std::move(out_ids));
  a->container()->create<MatmulOp>(out, a, b)->registerAsDefinition();
  return out;
}

// ------------------------------------------------------------- LoadStoreOp

LoadStoreOp::LoadStoreOp(
    IrContainer* container, TensorView* out, TensorView* in)
    : TensorOp(container, {in}, {out}) {}

TensorView* LoadStoreOp::in() const {
  return static_cast<TensorView*>(input(0));
}

std::vector<std::pair<IterDomain*, IterDomain*>>
LoadStoreOp::mapProducerToConsumer(const TensorView* producer) const {
  MDF_CHECK(producer == in(), producer->toString(), " is not an operand");
  return zipMap(producer->logicalNoReductions(), out()->maybeRoot());
}

TensorOp* LoadStoreOp::withOperands(
    TensorView* out, const std::vector<TensorView*>& inputs) const {
  MDF_CHECK_EQ(inputs.size(), size_t{1});
  return container()->create<LoadStoreOp>(out, inputs[0]);
}

Statement* LoadStoreOp::cloneInto(IrCloner& cloner) const {
  return cloner.target()->create<LoadStoreOp>(
      cloner.clone(out()), cloner.clone(in()));
}

TensorView* set(TensorView* in) {
  checkTensorOperand(in, "set", "input");
  std::vector<IterDomain*> out_ids;
  for (IterDomain* id : in->logicalNoReductions()) {
    out_ids.push_back(freshIterDomain(id, IterType::Iteration));
  }
  TensorView* out = newOutput(in, std::move(out_ids));
  in->container()->create<LoadStoreOp>(out, in)->registerAsDefinition();
  return out;
}

// ------------------------------------------------------------- ReductionOp

ReductionOp::ReductionOp(
    IrContainer* container, TensorView* out, TensorView* in)
    : TensorOp(container, {in}, {out}) {}

TensorView* ReductionOp::in() const {
  return static_cast<TensorView*>(input(0));
}

std::vector<std::pair<IterDomain*, IterDomain*>>
ReductionOp::mapProducerToConsumer(const TensorView* producer) const {
  MDF_CHECK(producer == in(), producer->toString(), " is not an operand");
  return zipMap(producer->logicalNoReductions(), out()->maybeRoot());
}

TensorOp* ReductionOp::withOperands(
    TensorView* out, const std::vector<TensorView*>& inputs) const {
  MDF_CHECK_EQ(inputs.size(), size_t{1});
  return container()->create<ReductionOp>(out, inputs[0]);
}

Statement* ReductionOp::cloneInto(IrCloner& cloner) const {
  return cloner.target()->create<ReductionOp>(
      cloner.clone(out()), cloner.clone(in()));
}

} // namespace mdfuser
