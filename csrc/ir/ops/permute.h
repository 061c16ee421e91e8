// SPDX-License-Identifier: MIT
#pragma once

#include <vector>

#include "ir/ops/tensor_op.h"

namespace mdfuser {

// out = in.permute(dims): output axis j is input axis dims[j], and a
// sharding moves with its axis.
class PermuteOp : public TensorOp {
 public:
  PermuteOp(
      IrContainer* container,
      TensorView* out,
      TensorView* in,
      std::vector<int64_t> dims);

  TensorView* in() const;
  const std::vector<int64_t>& dims() const {
    return dims_;
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

  std::vector<int64_t> dims_;
};

// ValueError unless `dims` is a permutation of the input's dimensions
// (negative entries count from the end).
TensorView* permute(TensorView* in, const std::vector<int64_t>& dims);

} // namespace mdfuser
