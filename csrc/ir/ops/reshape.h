// SPDX-License-Identifier: MIT
#pragma once

#include <vector>

#include "ir/ops/tensor_op.h"

namespace mdfuser {

// out = in.reshape(shape). The axes fall into groups of consecutive input
// and output axes with equal products. A group of one input and one output
// axis maps them exactly; a group that splits one input axis maps it to the
// outermost output axis, and a group that merges input axes maps the
// outermost one to the output axis, both inexactly (AxisMapping): a
// sharding of the outermost part carries over when it divides that axis.
// Other groups map nothing, so a sharded axis there is gathered first.
class ReshapeOp : public TensorOp {
 public:
  // A run of input axes [in_begin, in_end) reshaped into output axes
  // [out_begin, out_end).
  struct Group {
    int64_t in_begin;
    int64_t in_end;
    int64_t out_begin;
    int64_t out_end;
  };

  ReshapeOp(
      IrContainer* container,
      TensorView* out,
      TensorView* in,
      std::vector<Group> groups);

  TensorView* in() const;
  const std::vector<Group>& groups() const {
    return groups_;
  }

  using TensorOp::mapProducerToConsumer;
  std::vector<AxisMapping> mapProducerToConsumer(
      const TensorView* producer, const TensorView* consumer) const override;
  TensorOp* recreate(
      IrContainer* container,
      std::vector<Val*> inputs,
      std::vector<Val*> outputs) const override;

 private:
  std::vector<Group> groups_;
};

// `shape` holds the global output extents; at most one entry may be the
// constant -1, inferred. Symbolic input extents must reappear unchanged (the
// same extent, or -1, at their position in the grouping); the others must
// be static. ValueError when the element counts differ or the grouping
// cannot be worked out.
TensorView* reshape(TensorView* in, const std::vector<Scalar*>& shape);

} // namespace mdfuser
