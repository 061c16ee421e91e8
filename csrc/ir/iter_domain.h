// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ir/base_nodes.h"
#include "ir/parallel_type.h"
#include "ir/scalar.h"

namespace mdfuser {

enum class IterType { Iteration, Reduction };

// One axis of a tensor's iteration space: an extent, whether it is reduced,
// and how it is parallelized. Printed like "iS3{i0}": i(teration) or
// r(eduction), the parallel type, the name, the extent, and "rf" when an
// rFactor produced it.
class IterDomain : public Val {
 public:
  IterDomain(
      IrContainer* container,
      Scalar* extent,
      IterType iter_type = IterType::Iteration,
      ParallelType parallel_type = ParallelType::Serial,
      bool is_rfactor_product = false);

  Scalar* extent() const {
    return extent_;
  }
  IterType iterType() const {
    return iter_type_;
  }
  bool isReduction() const {
    return iter_type_ == IterType::Reduction;
  }
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

// Creates the two outputs and the Split expression. Outputs keep the input's
// iteration type; the new IterDomains are serial.
std::pair<IterDomain*, IterDomain*> split(
    IterDomain* in, Scalar* factor, bool inner_split);

} // namespace mdfuser

namespace mdfuser {

// The Splits that derive `to` from `from`, in creation order. IterDomains of
// `to` that do not descend from `from` contribute nothing.
std::vector<Split*> splitsBetween(
    const std::vector<IterDomain*>& from, const std::vector<IterDomain*>& to);

} // namespace mdfuser
