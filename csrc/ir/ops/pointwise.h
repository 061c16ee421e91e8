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

 private:
  std::vector<std::string> attributes() const override;
};

// Builders. Operands are tensors, Literals or extents (Scalars); at least
// one must be a tensor (TypeError otherwise). They check shapes (ValueError)
// and dtypes (TypeError) and give the output torch's result dtype.
TensorView* unaryOp(OpType type, Val* x);
TensorView* binaryOp(OpType type, Val* a, Val* b);
// `condition` is Bool; the result promotes `a` and `b`.
TensorView* where(Val* condition, Val* a, Val* b);
TensorView* cast(Val* x, DataType dtype);
// torch.clamp: min(max(x, min), max), promoted over all three. Either bound
// may be nullptr (then it is maximum or minimum); ValueError when both are.
TensorView* clamp(Val* x, Val* min, Val* max);

// The dtype of a pointwise operand: a tensor's, a literal's, Int for an
// extent.
DataType operandDtype(const Val* val);

} // namespace mdfuser
