// SPDX-License-Identifier: MIT
#pragma once

#include <vector>

#include "ir/ops/tensor_op.h"

namespace mdfuser {

// The grouped (ragged) matmul of mixture-of-experts layers, nvFuser's
// grouped_mm and torch._grouped_mm: `offsets` (Int32, [G]) holds the
// cumulative end of each group along the ragged axis (group e covers
// [offsets[e-1], offsets[e]), the first starting at 0; positions past the
// last end belong to no group and give zeros).
//
//   kRaggedRows   a [M, K] @ b [G, K, N] -> [M, N]     rows of a by group,
//                 each times its own matrix b[e] (the experts' forward)
//   kRaggedCols   a [G, M, K] @ b [K, N] -> [M, N]     columns of b by
//                 group, each times its own a[e]
//   kRaggedK      a [M, K] @ b [K, N] -> [G, M, N]     one product per group
//                 of the contracted axis (the experts' weight gradient)
//
// How it shards: the ragged axis and the offsets map to nothing (gathered
// first: the offsets index the whole axis). K of the first two forms maps
// to a reduction axis rK, as linear's, so a sharded K leaves partial sums.
// Their group axis maps to a second reduction axis rG: the result is the
// sum over groups of each group's product, zero outside its rows, so an
// expert-sharded operand (its group axis on a device axis) computes its
// experts' rows and leaves partial sums too. M and N map one to one; in
// kRaggedK so does G from nothing (the result's G axis is new).
class GroupedMmOp : public TensorOp {
 public:
  enum class Form { kRaggedRows, kRaggedCols, kRaggedK };

  GroupedMmOp(
      IrContainer* container,
      TensorView* out,
      TensorView* a,
      TensorView* b,
      TensorView* offsets);

  TensorView* a() const;
  TensorView* b() const;
  TensorView* offsets() const;
  Form form() const;
  // The operand whose outermost axis is the group axis (b in kRaggedRows,
  // a in kRaggedCols); nullptr in kRaggedK.
  TensorView* grouped() const;

  using TensorOp::mapProducerToConsumer;
  std::vector<AxisMapping> mapProducerToConsumer(
      const TensorView* producer, const TensorView* consumer) const override;
  // The grouped operand (the experts' weights), then the other: activations
  // move, weights stay.
  std::vector<TensorView*> shardingPriority() const override;
  TensorOp* recreate(
      IrContainer* container,
      std::vector<Val*> inputs,
      std::vector<Val*> outputs) const override;
};

// Checks its operands (user errors: TypeError for offsets that are not
// Int32 or operands of different or non-floating dtypes; ValueError for
// ranks other than the three forms, offsets not 1-dimensional, a K or a
// group count that disagree) and creates the output, of a's dtype.
TensorView* groupedMm(TensorView* a, TensorView* b, TensorView* offsets);

} // namespace mdfuser
