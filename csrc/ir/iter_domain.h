// SPDX-License-Identifier: MIT
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/base_nodes.h"
#include "ir/parallel_type.h"
#include "ir/scalar.h"

namespace mdfuser {

// Iteration: an ordinary axis. Reduction: an axis the producing operation
// sums (or otherwise reduces) over. Broadcast: an axis of one element that
// pointwise operations stretch to the other operands' extent; its extent is
// 1, or the extent it is expanded to (broadcast_in_dim to a larger shape),
// but it always holds one element in memory.
enum class IterType { Iteration, Reduction, Broadcast };

// One axis of a tensor's iteration space: an extent, its iteration type and
// how it is parallelized. Printed like "iS3{i0}": i(teration), r(eduction)
// or b(roadcast), the parallel type, the name, the extent ("1 ex i0" for an
// expanded broadcast), and "rf" when an rFactor produced it.
class IterDomain : public Val {
 public:
  IterDomain(
      IrContainer* container,
      Scalar* extent,
      IterType iter_type = IterType::Iteration,
      ParallelType parallel_type = ParallelType::Serial,
      bool is_rfactor_product = false);

  // The logical extent: for a broadcast axis, 1 or the expanded extent.
  Scalar* extent() const {
    return extent_;
  }
  IterType iterType() const {
    return iter_type_;
  }
  bool isReduction() const {
    return iter_type_ == IterType::Reduction;
  }
  bool isBroadcast() const {
    return iter_type_ == IterType::Broadcast;
  }
  // A broadcast axis whose logical extent is not 1.
  bool isExpanded() const;
  ParallelType parallelType() const {
    return parallel_type_;
  }
  bool isDeviceParallel() const {
    return mdfuser::isDeviceParallel(parallel_type_);
  }
  bool isStream() const {
    return parallel_type_ == ParallelType::Stream;
  }
  bool isRFactorProduct() const {
    return is_rfactor_product_;
  }

  // Unchecked: TensorView::parallelize checks the request against the rest
  // of the tensor.
  void parallelize(ParallelType parallel_type) {
    parallel_type_ = parallel_type;
  }

  // The device parallel type of a swizzle1d (TensorView::swizzle1d): the
  // axis's index i stands for part (i + this device's index along that
  // mesh axis) mod extent, so that each device starts on a part of its own.
  // nullopt when the axis is not swizzled.
  std::optional<ParallelType> swizzle() const {
    return swizzle_;
  }
  void setSwizzle(std::optional<ParallelType> parallel_type) {
    swizzle_ = parallel_type;
  }

  // A new IterDomain with the same extent and attributes.
  IterDomain* cloneWithoutTransforms() const;

  std::string_view counterKey() const override {
    return "IterDomain";
  }
  std::string toString() const override;
  Statement* cloneInto(IrCloner& cloner) const override;

 private:
  Scalar* extent_;
  IterType iter_type_;
  ParallelType parallel_type_;
  bool is_rfactor_product_;
  std::optional<ParallelType> swizzle_;
};

// Splits `in` into (outer, inner). An outer split by f makes outer's extent f
// and inner's ceilDiv(in, f); an inner split by f makes inner's extent f and
// outer's ceilDiv(in, f).
class Split : public Expr {
 public:
  Split(
      IrContainer* container,
      IterDomain* outer,
      IterDomain* inner,
      IterDomain* in,
      Scalar* factor,
      bool inner_split);

  IterDomain* in() const;
  IterDomain* outer() const;
  IterDomain* inner() const;
  Scalar* factor() const {
    return factor_;
  }
  bool innerSplit() const {
    return inner_split_;
  }

  std::string_view opName() const override {
    return "Split";
  }
  std::string toString() const override;
  Statement* cloneInto(IrCloner& cloner) const override;

 private:
  Scalar* factor_;
  bool inner_split_;
};

// Merges (outer, inner) into one axis of extent outer * inner.
class Merge : public Expr {
 public:
  Merge(
      IrContainer* container,
      IterDomain* out,
      IterDomain* outer,
      IterDomain* inner);

  IterDomain* outer() const;
  IterDomain* inner() const;
  IterDomain* out() const;

  std::string_view opName() const override {
    return "Merge";
  }
  std::string toString() const override;
  Statement* cloneInto(IrCloner& cloner) const override;
};

// Creates the two outputs and the Split expression. Outputs keep the input's
// iteration type; the new IterDomains are serial.
std::pair<IterDomain*, IterDomain*> split(
    IterDomain* in, Scalar* factor, bool inner_split);

// Creates the output and the Merge expression. The output is a reduction
// when either input is one, and serial.
IterDomain* merge(IterDomain* outer, IterDomain* inner);

// The Splits and Merges that derive `to` from `from`, in creation order.
// IterDomains of `to` that do not descend from `from` contribute nothing.
std::vector<Expr*> transformsBetween(
    const std::vector<IterDomain*>& from, const std::vector<IterDomain*>& to);

} // namespace mdfuser
