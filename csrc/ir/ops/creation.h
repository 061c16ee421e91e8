// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/ops/tensor_op.h"

namespace mdfuser {

// The seed of a random operation: its values are a function of
// (seed, offset) and the global shape alone, the same on every device.
// Each is an integer Literal: a constant, or a scalar input whose value
// each execute gives.
struct RngSeed {
  Val* seed = nullptr;
  Val* offset = nullptr;
};

// out = a new tensor of global shape: full (one value), iota (start + i *
// step), uniform and normal (random). Its operands are the parameters
// (Literals or extents), never tensors, so its output's sharding comes from
// the user's annotation or from the tensors that use it. full writes any
// part of its output alone; the others compute the whole tensor
// (decomposeShardedCreations gives them a whole output and takes the
// device's part after them). A seed's two values follow the parameters
// among the inputs, so that they are read when the operation runs.
class CreationOp : public TensorOp {
 public:
  CreationOp(
      IrContainer* container,
      OpType type,
      TensorView* out,
      std::vector<Val*> params,
      std::optional<RngSeed> rng = std::nullopt);

  // uniform and normal given rng_seed and rng_offset.
  std::optional<RngSeed> rng() const;
  // The position among the inputs of the seed's first value (the offset
  // follows it); only when rng().
  size_t seedIndex() const {
    return inputs().size() - 2;
  }
  bool isRandom() const {
    return type() == OpType::Uniform || type() == OpType::Normal;
  }
  // Whether an element's value depends on its position in the global
  // tensor (iota, and the random operations, whose draws follow the global
  // layout): such an operation must write its whole output.
  bool dependsOnPosition() const {
    return type() != OpType::Full;
  }

  using TensorOp::mapProducerToConsumer;
  // There are no tensor producers: internal error.
  std::vector<AxisMapping> mapProducerToConsumer(
      const TensorView* producer, const TensorView* consumer) const override;
  TensorOp* recreate(
      IrContainer* container,
      std::vector<Val*> inputs,
      std::vector<Val*> outputs) const override;

 private:
  // `params`, then the seed's two values.
  static std::vector<Val*> withSeed(
      std::vector<Val*> params, const std::optional<RngSeed>& rng);
  std::vector<std::string> attributes() const override;
  size_t numPrintedOperands() const override {
    return seeded_ ? seedIndex() : inputs().size();
  }

  bool seeded_ = false;
};

// Builders. `container` is the fusion; shapes are extents (constants >= 0
// or Scalars of the fusion); parameters are Literals or extents. They
// raise TypeError for a dtype the operation does not take or a tensor
// parameter, ValueError for negative extents and out-of-range constants.

// torch.full: every element `fill_value`, converted to `dtype`.
TensorView* full(
    IrContainer* container,
    const std::vector<Scalar*>& shape,
    Val* fill_value,
    DataType dtype);

// [start, start + step, ..., start + (length - 1) * step] of `dtype` (Int,
// Int32 or floating); `start` defaults to 0 and `step` to 1 (nullptr).
TensorView* iota(
    IrContainer* container,
    Scalar* length,
    Val* start,
    Val* step,
    DataType dtype);

// Uniform in [minval, maxval) and normal with `mean` and `std`, of a
// floating `dtype`. With `rng`, the values are a function of the seed and
// offset alone; without, each execution draws new ones (runtime/kernels.h).
TensorView* uniform(
    IrContainer* container,
    Val* minval,
    Val* maxval,
    const std::vector<Scalar*>& shape,
    DataType dtype,
    std::optional<RngSeed> rng);
TensorView* normal(
    IrContainer* container,
    Val* mean,
    Val* std,
    const std::vector<Scalar*>& shape,
    DataType dtype,
    std::optional<RngSeed> rng);

} // namespace mdfuser
