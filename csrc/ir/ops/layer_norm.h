// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <vector>

#include "ir/ops/tensor_op.h"

namespace mdfuser {

// out = layer_norm(in) over its last `normalized_ndim` axes, times `weight`
// and plus `bias` when given (torch.nn.functional.layer_norm), computed in
// Float and returned in in's dtype. Not a user operation: users write
// layer_norm from primitives (mdfuser.nn.layer_norm), which shard like any
// other composition, and the host pass FuseLayerNorms replaces a
// composition whose normalized axes every device holds whole by this
// operation, one fused kernel.
class LayerNormOp : public TensorOp {
 public:
  LayerNormOp(
      IrContainer* container,
      TensorView* out,
      TensorView* in,
      TensorView* weight,
      TensorView* bias,
      int64_t normalized_ndim,
      double eps);

  TensorView* in() const;
  // Null when absent.
  TensorView* weight() const {
    return weight_;
  }
  TensorView* bias() const {
    return bias_;
  }
  int64_t normalizedNdim() const {
    return normalized_ndim_;
  }
  double eps() const {
    return eps_;
  }

  using TensorOp::mapProducerToConsumer;
  // Every axis of `in` maps to the output axis at its position; weight and
  // bias map to the trailing axes.
  std::vector<AxisMapping> mapProducerToConsumer(
      const TensorView* producer, const TensorView* consumer) const override;
  TensorOp* recreate(
      IrContainer* container,
      std::vector<Val*> inputs,
      std::vector<Val*> outputs) const override;

 private:
  std::vector<std::string> attributes() const override;

  TensorView* weight_;
  TensorView* bias_;
  int64_t normalized_ndim_;
  double eps_;
};

} // namespace mdfuser
