// SPDX-License-Identifier: MIT
#pragma once

#include <vector>

#include "ir/ops/tensor_op.h"

namespace mdfuser {

// out = sum, max or min of `in` over the axes that are reductions in out's
// logical domain. in's non-reduction logical axes map one to one to out's
// logical axes, the reduced ones to out's reduction axes: a reduction over
// an axis sharded across devices leaves partial results, which the fusion
// passes turn into a local reduction and a collective.
class ReductionOp : public TensorOp {
 public:
  // The reduced axes are read off out's root (or logical) domain when the
  // operation is built and kept: lowering may later make it write another
  // buffer.
  ReductionOp(
      IrContainer* container,
      OpType type,
      TensorView* out,
      TensorView* in,
      bool empty_is_identity = false);
  // With the reduced axes given (positions among in's non-reduction logical
  // axes).
  ReductionOp(
      IrContainer* container,
      OpType type,
      TensorView* out,
      TensorView* in,
      std::vector<int64_t> reduced,
      bool empty_is_identity = false);

  TensorView* in() const;
  // A max or min over an empty axis gives the reduction's identity (-inf
  // for max) instead of being refused as torch refuses it: the shift of a
  // softmax, whose values nothing reads when the axis is empty.
  bool emptyIsIdentity() const {
    return empty_is_identity_;
  }
  // Positions, among the input's non-reduction logical axes, of the axes the
  // operation reduces.
  const std::vector<int64_t>& reducedDims() const {
    return reduced_;
  }

  using TensorOp::mapProducerToConsumer;
  std::vector<AxisMapping> mapProducerToConsumer(
      const TensorView* producer, const TensorView* consumer) const override;
  TensorOp* recreate(
      IrContainer* container,
      std::vector<Val*> inputs,
      std::vector<Val*> outputs) const override;

 private:
  std::vector<int64_t> reduced_;
  bool empty_is_identity_ = false;
};

// sum/max/min of `in` over `dims` (negative counts from the end; empty
// means every axis). keepdim keeps the reduced axes as broadcast axes of
// extent 1. For sum, `dtype` Null gives torch's dtype (the input's for
// floating types, Int for integers and Bool). `empty_is_identity`: see
// ReductionOp::emptyIsIdentity.
TensorView* reduce(
    OpType type,
    TensorView* in,
    const std::vector<int64_t>& dims,
    bool keepdim = false,
    DataType dtype = DataType::Null,
    bool empty_is_identity = false);

// The reduced positions `dims` of a tensor of `rank` axes, normalized and
// checked (ValueError for an axis out of range or given twice).
std::vector<int64_t> reductionDims(
    const std::vector<int64_t>& dims, int64_t rank, std::string_view op);

} // namespace mdfuser
