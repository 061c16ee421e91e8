// SPDX-License-Identifier: MIT
#pragma once

#include <vector>

#include "ir/ops/tensor_op.h"

namespace mdfuser {

// out = f(operands) element by element: the pointwise family (unary,
// binary, where, cast). Operands are tensors, literals or extents; they
// broadcast as in torch, aligned at their last axis, where an axis of
// extent 1 (or a broadcast axis) stretches to the other operands' extent.
// Each output axis maps to the operand axes at its position that do not
// broadcast, so shardings pass through unchanged and broadcast axes take
// the other operands' sharding.
class PointwiseOp : public TensorOp {
 public:
  PointwiseOp(
      IrContainer* container,
      OpType type,
      TensorView* out,
      std::vector<Val*> operands);

  using TensorOp::mapProducerToConsumer;
  std::vector<AxisMapping> mapProducerToConsumer(
      const TensorView* producer, const TensorView* consumer) const override;
  TensorOp* recreate(
      IrContainer* container,
      std::vector<Val*> inputs,
      std::vector<Val*> outputs) const override;

  // The dtype the operation computes in: its operands promoted by its
  // PromotionKind (for comparisons, their common dtype; for a cast, the
  // target). The output has this dtype unless FoldCasts gave it the
  // narrower dtype of a cast that read it: it then computes in this dtype
  // and rounds once into its output's.
  DataType computationDtype() const {
    return computation_dtype_;
  }

 private:
  std::vector<std::string> attributes() const override;

  DataType computation_dtype_;
};

// Builders. Operands are tensors, Literals or extents (Scalars). They check
// shapes (ValueError) and dtypes (TypeError) and give the output the
// dtype of the operation's PromotionKind (type_promotion.h): arithmetic on
// Half and BFloat16 returns Float, as in nvFuser.
TensorView* unaryOp(OpType type, Val* x);
TensorView* binaryOp(OpType type, Val* a, Val* b);
// `condition` is Bool; the result promotes `a` and `b`.
TensorView* where(Val* condition, Val* a, Val* b);
TensorView* cast(Val* x, DataType dtype);
// torch.clamp: min(max(x, min), max), promoted over all three (Half and
// BFloat16 stay). Either bound may be nullptr (then it is maximum or
// minimum, of that dtype); ValueError when both are.
TensorView* clamp(Val* x, Val* min, Val* max);

// The dtype of a pointwise operand: a tensor's, a literal's, Int for an
// extent.
DataType operandDtype(const Val* val);

} // namespace mdfuser
