// SPDX-License-Identifier: MIT
#pragma once

#include <vector>

#include "ir/ops/tensor_op.h"

namespace mdfuser {

// out = in @ weight^T (+ bias), as torch.nn.functional.linear.
// in: [..., K]; weight: [N, K]; bias: [N]; out: [..., N, rK]. A sharded K
// (in_features) leaves partial sums; a sharded N or batch axis carries over.
class LinearOp : public TensorOp {
 public:
  LinearOp(
      IrContainer* container,
      TensorView* out,
      TensorView* in,
      TensorView* weight,
      TensorView* bias);

  TensorView* in() const;
  TensorView* weight() const;
  // nullptr when there is no bias.
  TensorView* bias() const;
  // The weight's out_features axes: 1 for [N, K], 2 for [A, B, K].
  size_t outFeatureAxes() const;

  using TensorOp::mapProducerToConsumer;
  std::vector<AxisMapping> mapProducerToConsumer(
      const TensorView* producer, const TensorView* consumer) const override;
  // Weight, bias, then input: activations move, weights stay.
  std::vector<TensorView*> shardingPriority() const override;
  TensorOp* recreate(
      IrContainer* container,
      std::vector<Val*> inputs,
      std::vector<Val*> outputs) const override;
};

// out = a @ b, as torch.matmul for a: [..., M, K] and b: [..., K, N] (both
// at least 2-dimensional, batch axes broadcast); out: [..., M, N, rK].
class MatmulOp : public TensorOp {
 public:
  MatmulOp(
      IrContainer* container, TensorView* out, TensorView* a, TensorView* b);

  TensorView* a() const;
  TensorView* b() const;

  using TensorOp::mapProducerToConsumer;
  std::vector<AxisMapping> mapProducerToConsumer(
      const TensorView* producer, const TensorView* consumer) const override;
  // b, then a.
  std::vector<TensorView*> shardingPriority() const override;
  TensorOp* recreate(
      IrContainer* container,
      std::vector<Val*> inputs,
      std::vector<Val*> outputs) const override;
};

// Builders. They check their operands (user errors) and create the output
// with global shapes.
TensorView* linear(
    TensorView* in, TensorView* weight, TensorView* bias = nullptr);
TensorView* matmul(TensorView* a, TensorView* b);

} // namespace mdfuser
