// SPDX-License-Identifier: MIT
#pragma once

#include <vector>

#include "ir/dtype.h"

namespace mdfuser {

// How an operation turns its operands' promoted dtype into its result's,
// as nvFuser's operations do (its TypePromotionConfig and computeTypes):
// arithmetic on Half and BFloat16 computes in Float and returns Float.
enum class PromotionKind {
  // The promoted dtype, Half and BFloat16 widened to Float (add, mul,
  // maximum, neg, ...).
  kDefault,
  // As kDefault, and integers and bools become Float too (exp, tanh, div,
  // ...).
  kIntToFloat,
  // The promoted dtype as it is: Half and BFloat16 stay (abs, relu, silu,
  // where, clamp).
  kKeepReduced,
  // Bool (eq, lt, ...).
  kAlwaysBool,
};

// The dtypes taking part in a promotion, in torch's three tiers: tensors
// with dimensions, zero-dimensional tensors, and scalars (Python numbers,
// define_scalar values). A lower tier changes the result only when its
// category (bool < integer < floating) is higher. Scalars keep their dtype
// (a Python float is a Double scalar, so an Int tensor times 0.5 is
// Double), but for Half and BFloat16 scalars, which count as Float.
struct PromotionOperands {
  std::vector<DataType> tensors;
  std::vector<DataType> zero_dim_tensors;
  std::vector<DataType> literals;
};

// torch.promote_types for two dtypes.
DataType promoteTypes(DataType a, DataType b);

// The operands' common dtype (torch.result_type's tiers, with scalars as
// above), then the kind's rule.
DataType resultType(const PromotionOperands& operands, PromotionKind kind);

// Whether `kind` turns Half and BFloat16 into Float.
bool widensReducedPrecision(PromotionKind kind);

} // namespace mdfuser
