// SPDX-License-Identifier: MIT
#pragma once

#include <vector>

#include "ir/ops/tensor_op.h"

namespace mdfuser {

// out = `in` without some of its axes of extent 1; the other axes map one
// to one.
class SqueezeOp : public TensorOp {
 public:
  SqueezeOp(
      IrContainer* container,
      TensorView* out,
      TensorView* in,
      std::vector<bool> is_removed);

  TensorView* in() const;
  // Per input axis: whether the operation removes it.
  const std::vector<bool>& isRemoved() const {
    return is_removed_;
  }

  using TensorOp::mapProducerToConsumer;
  std::vector<AxisMapping> mapProducerToConsumer(
      const TensorView* producer, const TensorView* consumer) const override;
  TensorOp* recreate(
      IrContainer* container,
      std::vector<Val*> inputs,
      std::vector<Val*> outputs) const override;

 private:
  std::vector<std::string> attributes() const override;

  std::vector<bool> is_removed_;
};

// Removes `dims`, each an axis of extent 1 (a broadcast axis, or one of
// constant extent 1). An expanded broadcast axis is removed only with
// squeeze_expanded. ValueError otherwise.
TensorView* squeeze(
    TensorView* in,
    const std::vector<int64_t>& dims,
    bool squeeze_expanded = false);

} // namespace mdfuser
