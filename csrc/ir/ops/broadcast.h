// SPDX-License-Identifier: MIT
#pragma once

#include <vector>

#include "ir/ops/tensor_op.h"

namespace mdfuser {

// out = `in` with broadcast axes inserted (and broadcast axes of `in`
// possibly expanded). Axis i of `in` maps to the i-th output axis that is
// not new, unless either is a broadcast axis; new axes map to nothing and
// are never sharded.
class BroadcastOp : public TensorOp {
 public:
  BroadcastOp(
      IrContainer* container,
      TensorView* out,
      TensorView* in,
      std::vector<bool> is_new);

  TensorView* in() const;
  // Per output axis: whether the operation inserted it.
  const std::vector<bool>& isNew() const {
    return is_new_;
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

  std::vector<bool> is_new_;
};

// Inserts a broadcast axis of extent 1 wherever `is_broadcast_dim` is true;
// the other entries are the axes of `in`, in order.
TensorView* broadcast(
    TensorView* in, const std::vector<bool>& is_broadcast_dim);

// nvFuser's broadcast_in_dim: the output has `shape`, axis i of `in` goes to
// position broadcast_dims[i] (strictly increasing), the other positions are
// broadcast axes expanded to their extent in `shape`. An axis of `in` must
// have its extent in `shape`, or be a broadcast axis, which is expanded.
TensorView* broadcastInDim(
    TensorView* in,
    const std::vector<Scalar*>& shape,
    const std::vector<int64_t>& broadcast_dims);

// torch's expand on the same number of axes: each axis of extent 1 (or
// broadcast) becomes a broadcast axis expanded to shape[i]; an entry of -1,
// or the axis's own extent, keeps the axis. ValueError for another extent
// of an axis that is not 1, or a shape of another length. The result is a
// BroadcastOp that inserts no axis.
TensorView* expand(TensorView* in, const std::vector<Scalar*>& shape);

} // namespace mdfuser
