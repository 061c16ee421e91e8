// SPDX-License-Identifier: MIT
#pragma once

#include <vector>

#include "ir/ops/tensor_op.h"

namespace mdfuser {

// out = in[start_0:end_0, start_1:end_1, ...]. Axes taken whole map exactly;
// an axis that is cut maps to nothing, so a sharded one is gathered first.
class SliceOp : public TensorOp {
 public:
  SliceOp(
      IrContainer* container,
      TensorView* out,
      TensorView* in,
      std::vector<Scalar*> starts);

  TensorView* in() const;
  // Per input axis, the first element taken (a global index); the number
  // taken is the output's extent.
  const std::vector<Scalar*>& starts() const {
    return starts_;
  }
  // Per input axis: whether the axis is taken whole.
  bool isWhole(size_t axis) const;

  using TensorOp::mapProducerToConsumer;
  std::vector<AxisMapping> mapProducerToConsumer(
      const TensorView* producer, const TensorView* consumer) const override;
  TensorOp* recreate(
      IrContainer* container,
      std::vector<Val*> inputs,
      std::vector<Val*> outputs) const override;

 private:
  std::vector<std::string> attributes() const override;

  std::vector<Scalar*> starts_;
};

// One entry per input dimension. Strides must be 1; 0 <= start <= end <=
// extent where it can be checked statically (ValueError otherwise).
TensorView* slice(
    TensorView* in,
    const std::vector<Scalar*>& starts,
    const std::vector<Scalar*>& ends,
    const std::vector<int64_t>& strides = {});

// out = the tensors concatenated along `dim`. The other axes map exactly;
// `dim` maps to nothing, so a sharded one is gathered first.
class CatOp : public TensorOp {
 public:
  CatOp(
      IrContainer* container,
      TensorView* out,
      std::vector<Val*> ins,
      int64_t dim);

  int64_t dim() const {
    return dim_;
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

  int64_t dim_;
};

// ValueError unless the tensors have one rank, one dtype and equal extents
// outside `dim`.
TensorView* cat(const std::vector<TensorView*>& ins, int64_t dim);

} // namespace mdfuser
