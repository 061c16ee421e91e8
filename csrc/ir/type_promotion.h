// SPDX-License-Identifier: MIT
#pragma once

#include <vector>

#include "ir/dtype.h"

namespace mdfuser {

// How an operation turns its operands' promoted dtype into its result's,
// as torch's elementwise operations do.
enum class PromotionKind {
  // The promoted dtype (add, mul, maximum, ...).
  kDefault,
  // Integers and bools become Float (exp, tanh, div, ...).
  kIntToFloat,
  // Bool (eq, lt, ...).
  kAlwaysBool,
};

// The dtypes taking part in a promotion, in torch's three tiers: tensors
// with dimensions, zero-dimensional tensors, and Python numbers (literals).
// A lower tier changes the result only when its category (bool < integer <
// floating) is higher.
struct PromotionOperands {
  std::vector<DataType> tensors;
  std::vector<DataType> zero_dim_tensors;
  std::vector<DataType> literals;
};

// torch.promote_types for two dtypes.
DataType promoteTypes(DataType a, DataType b);

// torch.result_type for the operands, then the kind's rule.
DataType resultType(const PromotionOperands& operands, PromotionKind kind);

} // namespace mdfuser
