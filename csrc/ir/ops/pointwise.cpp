// SPDX-License-Identifier: MIT
#include "ir/ops/pointwise.h"

#include <optional>

#include "ir/container.h"
#include "ir/errors.h"
#include "ir/literal.h"
#include "ir/ops/builder.h"

namespace mdfuser {

namespace {

bool broadcastsAt(const IterDomain* id) {
  return id->isBroadcast() ||
         (id->extent()->isConst() && id->extent()->value() == 1);
}

// The output axes of a pointwise operation on `tensors`, torch's
// broadcasting: aligned at the last axis, extent-1 axes stretch.
std::vector<IterDomain*> broadcastShape(
    const std::vector<TensorView*>& tensors, std::string_view op) {
  size_t rank = 0;
  for (const TensorView* tv : tensors) {
    rank = std::max(rank, tv->logicalNoReductions().size());
  }
  IrContainer* container = tensors.front()->container();
  std::vector<IterDomain*> out(rank, nullptr);
  for (size_t pos = 0; pos < rank; ++pos) {
    // Operand axes at this position, counted from the end.
    const size_t from_end = rank - pos;
    IterDomain* chosen = nullptr;
    IterDomain* expanded = nullptr;
    for (const TensorView* tv : tensors) {
      const std::vector<IterDomain*> ids = tv->logicalNoReductions();
      if (ids.size() < from_end) {
        continue;
      }
      IterDomain* id = ids[ids.size() - from_end];
      if (broadcastsAt(id)) {
        if (id->isExpanded() && expanded == nullptr) {
          expanded = id;
        }
        continue;
      }
      if (chosen == nullptr) {
        chosen = id;
        continue;
      }
      ops::requireEqualExtents(
          chosen->extent(),
          id->extent(),
          std::string(op) + ": the extents of broadcast dimension " +
              std::to_string(pos) + " of the operands");
    }
    if (chosen != nullptr) {
      if (expanded != nullptr) {
        ops::requireEqualExtents(
            chosen->extent(),
            expanded->extent(),
            std::string(op) + ": the extents of broadcast dimension " +
                std::to_string(pos) + " of the operands");
      }
      out[pos] = container->create<IterDomain>(chosen->extent());
    } else {
      Scalar* extent =
          expanded != nullptr ? expanded->extent() : constant(container, 1);
      out[pos] = container->create<IterDomain>(extent, IterType::Broadcast);
    }
  }
  return out;
}

// The operands' dtypes in their promotion tiers. where's condition takes
// no part; scalars alone (no tensor operand) are promoted as tensors are
// (nvfuser_direct's scalar operations, such as the reciprocal of a scalar
// input, feed tensor operations as such).
PromotionOperands promotionOperands(
    OpType type, const std::vector<Val*>& operands) {
  PromotionOperands promotion;
  bool any_tensor = false;
  for (size_t i = 0; i < operands.size(); ++i) {
    Val* val = operands[i];
    const bool is_tensor = dynamic_cast<TensorView*>(val) != nullptr;
    any_tensor |= is_tensor;
    if (type == OpType::Where && i == 0) {
      continue;
    }
    const DataType d = operandDtype(val);
    if (!is_tensor) {
      promotion.literals.push_back(d);
    } else if (static_cast<TensorView*>(val)->logicalNoReductions().empty()) {
      promotion.zero_dim_tensors.push_back(d);
    } else {
      promotion.tensors.push_back(d);
    }
  }
  if (!any_tensor) {
    promotion.tensors = std::move(promotion.literals);
    promotion.literals.clear();
  }
  return promotion;
}

// Builds `out = type(operands)` with `dtype`, or, when `dtype` is Null,
// the dtype of `kind` (the operation's PromotionKind when not given).
TensorView* build(
    OpType type,
    std::vector<Val*> operands,
    DataType dtype = DataType::Null,
    std::optional<PromotionKind> kind = std::nullopt) {
  const OpInfo& info = opInfo(type);
  std::vector<TensorView*> tensors;
  for (size_t i = 0; i < operands.size(); ++i) {
    Val* val = operands[i];
    MDF_TYPE_CHECK(
        val != nullptr,
        info.name,
        ": operand ",
        i,
        " must be a tensor or a scalar, got None");
    if (auto* tv = dynamic_cast<TensorView*>(val)) {
      tensors.push_back(tv);
    }
  }
  ops::requireSameFusion(operands, info.name);
  for (size_t i = 0; i < operands.size() && type != OpType::Cast; ++i) {
    MDF_TYPE_CHECK(
        operands[i] == nullptr || operandDtype(operands[i]) != DataType::UInt64,
        info.name,
        " does not take UInt64 operands (torch has no arithmetic or type "
        "promotion for uint64), got operand ",
        i,
        " ",
        operands[i]->toString(),
        "; cast it first");
  }
  // Scalars alone: a 0-dimensional tensor holding the result.
  const bool scalars_only = tensors.empty();
  const PromotionOperands promotion = promotionOperands(type, operands);

  const DataType promoted = resultType(promotion, PromotionKind::kKeepReduced);
  MDF_TYPE_CHECK(
      !(info.operand_types == OperandTypes::kNotBool &&
        promoted == DataType::Bool),
      info.name,
      " does not take Bool operands (as in torch); cast them first");
  if (info.operand_types == OperandTypes::kNoBoolOperand) {
    for (size_t i = 0; i < operands.size(); ++i) {
      MDF_TYPE_CHECK(
          operandDtype(operands[i]) != DataType::Bool,
          info.name,
          " does not take Bool operands (as in torch), got operand ",
          i,
          " ",
          operands[i]->toString(),
          "; cast it first");
    }
  }
  MDF_TYPE_CHECK(
      !(info.operand_types == OperandTypes::kFloatingOnly &&
        !isFloatingType(promoted)),
      info.name,
      " takes floating-point operands only, got ",
      promoted,
      "; cast them first");
  if (dtype == DataType::Null) {
    dtype = resultType(promotion, kind.value_or(info.promotion));
  }
  IrContainer* container = operands.front()->container();
  TensorView* out = ops::newTensor(
      container,
      scalars_only ? std::vector<IterDomain*>{}
                   : broadcastShape(tensors, info.name),
      dtype);
  container->create<PointwiseOp>(type, out, std::move(operands))
      ->registerAsDefinition();
  return out;
}

} // namespace

PointwiseOp::PointwiseOp(
    IrContainer* container,
    OpType type,
    TensorView* out,
    std::vector<Val*> operands)
    : TensorOp(container, type, std::move(operands), {out}) {
  const OpInfo& info = opInfo(type);
  MDF_CHECK(
      info.family == OpFamily::kPointwise, info.name, " is not pointwise");
  MDF_CHECK_EQ(
      static_cast<int>(inputs().size()), info.arity, "operands of ", info.name);
  if (type == OpType::Cast) {
    computation_dtype_ = out->dtype();
  } else {
    computation_dtype_ = resultType(
        promotionOperands(type, inputs()),
        info.promotion == PromotionKind::kAlwaysBool
            ? PromotionKind::kKeepReduced
            : info.promotion);
  }
}

std::vector<AxisMapping> PointwiseOp::mapProducerToConsumer(
    const TensorView* producer, const TensorView* consumer) const {
  MDF_CHECK(consumer == out(), consumer->toString(), " is not an output");
  const std::vector<IterDomain*> p = producer->logicalNoReductions();
  const std::vector<IterDomain*>& c = consumer->maybeRoot();
  MDF_CHECK_LE(p.size(), c.size());
  std::vector<AxisMapping> result;
  const size_t offset = c.size() - p.size();
  for (size_t i = 0; i < p.size(); ++i) {
    if (broadcastsAt(p[i]) && !broadcastsAt(c[offset + i])) {
      continue;
    }
    result.push_back({p[i], c[offset + i]});
  }
  return result;
}

TensorOp* PointwiseOp::recreate(
    IrContainer* container,
    std::vector<Val*> inputs,
    std::vector<Val*> outputs) const {
  MDF_CHECK_EQ(outputs.size(), size_t{1});
  return container->create<PointwiseOp>(
      type(), static_cast<TensorView*>(outputs[0]), std::move(inputs));
}

std::vector<std::string> PointwiseOp::attributes() const {
  if (type() == OpType::Cast) {
    return {"dtype=" + std::string(dtypeName(out()->dtype()))};
  }
  return {};
}

DataType operandDtype(const Val* val) {
  if (const auto* tv = dynamic_cast<const TensorView*>(val)) {
    return tv->dtype();
  }
  if (const auto* literal = dynamic_cast<const Literal*>(val)) {
    return literal->dtype();
  }
  MDF_CHECK(
      dynamic_cast<const Scalar*>(val) != nullptr,
      "not a pointwise operand: ",
      val->toString());
  return DataType::Int;
}

TensorView* unaryOp(OpType type, Val* x) {
  MDF_CHECK_EQ(opInfo(type).arity, 1, opName(type), " is not unary");
  MDF_CHECK(type != OpType::Cast, "use cast()");
  return build(type, {x});
}

TensorView* binaryOp(OpType type, Val* a, Val* b) {
  MDF_CHECK_EQ(opInfo(type).arity, 2, opName(type), " is not binary");
  return build(type, {a, b});
}

TensorView* where(Val* condition, Val* a, Val* b) {
  MDF_TYPE_CHECK(
      condition != nullptr && operandDtype(condition) == DataType::Bool,
      "where: the condition must be Bool, got ",
      condition == nullptr ? std::string("None")
                           : std::string(dtypeName(operandDtype(condition))));
  return build(OpType::Where, {condition, a, b});
}

TensorView* cast(Val* x, DataType dtype) {
  MDF_TYPE_CHECK(
      dtype != DataType::Null, "cast: the target dtype must not be Null");
  return build(OpType::Cast, {x}, dtype);
}

TensorView* clamp(Val* x, Val* min, Val* max) {
  MDF_USER_CHECK(
      min != nullptr || max != nullptr,
      "clamp: at least one of min and max must be given (not None)");
  if (min != nullptr && max != nullptr) {
    return build(OpType::Clamp, {x, min, max});
  }
  // maximum or minimum, with clamp's dtype: Half and BFloat16 stay.
  return build(
      min != nullptr ? OpType::Maximum : OpType::Minimum,
      {x, min != nullptr ? min : max},
      DataType::Null,
      PromotionKind::kKeepReduced);
}

} // namespace mdfuser
