// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <vector>

#include "ir/base_nodes.h"
#include "ir/ops/op_type.h"
#include "ir/tensor_view.h"

namespace mdfuser {

// A producer axis and the consumer axis it corresponds to.
struct AxisMapping {
  // A non-reduction logical axis of the producer.
  IterDomain* producer;
  // An axis of the consumer's root domain (its logical domain when it has
  // no root).
  IterDomain* consumer;
  // True when both axes index the same positions. False when they only
  // share their outermost division: reshape maps an axis it splits to the
  // outermost output axis of the split, and an axis it merges into to the
  // outermost merged axis; a sharding or stream split carries over such a
  // pair when the outer axis divides evenly.
  bool exact = true;
};

// An operation producing tensors from tensors (and, for pointwise
// operations, literals and extents). Subclasses are the compute operations
// of a fusion; host IR reuses them as statements.
class TensorOp : public Expr {
 public:
  OpType type() const {
    return type_;
  }
  std::string_view opName() const override {
    return mdfuser::opName(type_);
  }
  // The first output.
  TensorView* out() const {
    return static_cast<TensorView*>(output(0));
  }
  std::vector<TensorView*> outs() const;
  // The operands that are tensors, in operand order.
  std::vector<TensorView*> tensorInputs() const;

  // The pairs of axes of `producer` (one of the tensor inputs) and
  // `consumer` (one of the outputs) that index the same positions of the
  // iteration space. A producer axis the consumer does not index (the key
  // length of attention, a sliced axis) maps to nothing; a contracted axis
  // maps to a reduction axis of the consumer. Sharding propagation and
  // resharding detection follow this map.
  virtual std::vector<AxisMapping> mapProducerToConsumer(
      const TensorView* producer, const TensorView* consumer) const = 0;
  // The same map for the first output. Subclasses overriding the map above
  // keep this one visible with `using TensorOp::mapProducerToConsumer;`.
  std::vector<AxisMapping> mapProducerToConsumer(
      const TensorView* producer) const {
    return mapProducerToConsumer(producer, out());
  }

  // Whether `consumer` (one of the outputs) is computed from the operands'
  // data. False for a value drawn independently of them (the philox state
  // of attention): it neither reshards nor needs its producers gathered.
  virtual bool takesOperandData(const TensorView* /*consumer*/) const {
    return true;
  }

  // The tensor inputs in the order in which they decide the sharding of the
  // outputs when they disagree on a device parallel type; the ones after
  // the first that claims it are resharded to match. Contractions put their
  // weights first, so that activations move and weights stay.
  virtual std::vector<TensorView*> shardingPriority() const {
    return tensorInputs();
  }

  // The same operation with the same attributes on other values, created
  // in `container` and not registered as their definition.
  virtual TensorOp* recreate(
      IrContainer* container,
      std::vector<Val*> inputs,
      std::vector<Val*> outputs) const = 0;
  // The same operation with its tensor operands and its outputs replaced, in
  // order, and its other operands kept; not registered.
  TensorOp* withTensors(
      const std::vector<TensorView*>& outputs,
      const std::vector<TensorView*>& tensor_inputs) const;

  // "T2_g_float[...]\n   = linear(T0_g_float[...],\n            T1...)",
  // one line per output, then the operands and the attributes.
  std::string toString() const override;
  Statement* cloneInto(IrCloner& cloner) const override;

 protected:
  TensorOp(
      IrContainer* container,
      OpType type,
      std::vector<Val*> inputs,
      std::vector<Val*> outputs);

  // Attributes printed after the operands, e.g. "dims=[1]".
  virtual std::vector<std::string> attributes() const {
    return {};
  }
  // How many of the inputs print as operands; the others are printed by
  // attributes().
  virtual size_t numPrintedOperands() const {
    return inputs().size();
  }

  // The map of an operation that keeps every axis where it is: the i-th
  // non-reduction logical axis of `producer` to the i-th root axis of
  // `consumer` (set, and reductions, whose reduced axes stay in place as
  // reduction axes).
  static std::vector<AxisMapping> mapAxisByAxis(
      const TensorView* producer, const TensorView* consumer);

 private:
  OpType type_;
};

} // namespace mdfuser
