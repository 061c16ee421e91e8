// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ir/base_nodes.h"
#include "ir/tensor_view.h"

namespace mdfuser {

// An operation producing one tensor from tensors. Subclasses are the compute
// operations of a fusion; host IR reuses them as statements.
class TensorOp : public Expr {
 public:
  TensorView* out() const {
    return static_cast<TensorView*>(output(0));
  }
  std::vector<TensorView*> tensorInputs() const;

  // Pairs (producer logical axis, consumer root axis) that index the same
  // positions of the iteration space. Reduction axes of the producer map to
  // nothing. Sharding propagation and resharding detection follow this map.
  virtual std::vector<std::pair<IterDomain*, IterDomain*>>
  mapProducerToConsumer(const TensorView* producer) const = 0;

  // The same operation on other tensors, created in the same container and
  // not registered as a definition (for host IR).
  virtual TensorOp* withOperands(
      TensorView* out, const std::vector<TensorView*>& inputs) const = 0;

  // "T2_g_float[...]\n   = linear(T0_g_float[...],\n            T1...)"
  std::string toString() const override;

 protected:
  using Expr::Expr;
};

// out = in @ weight^T (+ bias), as torch.nn.functional.linear.
// in: [..., K]; weight: [N, K]; bias: [N]; out: [..., N, rK].
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

  std::string_view opName() const override {
    return "linear";
  }
  std::vector<std::pair<IterDomain*, IterDomain*>> mapProducerToConsumer(
      const TensorView* producer) const override;
  TensorOp* withOperands(
      TensorView* out, const std::vector<TensorView*>& inputs) const override;
  Statement* cloneInto(IrCloner& cloner) const override;
};

// out = a @ b, as torch.matmul for a: [..., M, K] and b: [K, N];
// out: [..., M, N, rK].
class MatmulOp : public TensorOp {
 public:
  MatmulOp(
      IrContainer* container, TensorView* out, TensorView* a, TensorView* b);

  TensorView* a() const;
  TensorView* b() const;

  std::string_view opName() const override {
    return "matmul";
  }
  std::vector<std::pair<IterDomain*, IterDomain*>> mapProducerToConsumer(
      const TensorView* producer) const override;
  TensorOp* withOperands(
      TensorView* out, const std::vector<TensorView*>& inputs) const override;
  Statement* cloneInto(IrCloner& cloner) const override;
};

// out = in, possibly with a different sharding; becomes a copy, or a
// communication when the sharding changes.
class LoadStoreOp : public TensorOp {
 public:
  LoadStoreOp(IrContainer* container, TensorView* out, TensorView* in);

  TensorView* in() const;

  std::string_view opName() const override {
    return "set";
  }
  std::vector<std::pair<IterDomain*, IterDomain*>> mapProducerToConsumer(
      const TensorView* producer) const override;
  TensorOp* withOperands(
      TensorView* out, const std::vector<TensorView*>& inputs) const override;
  Statement* cloneInto(IrCloner& cloner) const override;
};

// out = sum of in over the axes that are reductions in out's logical domain.
// in's non-reduction logical axes map one to one to out's logical axes.
class ReductionOp : public TensorOp {
 public:
  ReductionOp(IrContainer* container, TensorView* out, TensorView* in);

  TensorView* in() const;

  std::string_view opName() const override {
    return "sum";
  }
  std::vector<std::pair<IterDomain*, IterDomain*>> mapProducerToConsumer(
      const TensorView* producer) const override;
  TensorOp* withOperands(
      TensorView* out, const std::vector<TensorView*>& inputs) const override;
  Statement* cloneInto(IrCloner& cloner) const override;
};

// Builders of fusion operations. They check their operands (user errors) and
// create the output with global shapes.
TensorView* linear(
    TensorView* in, TensorView* weight, TensorView* bias = nullptr);
TensorView* matmul(TensorView* a, TensorView* b);
TensorView* set(TensorView* in);

} // namespace mdfuser
