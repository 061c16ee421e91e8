// SPDX-License-Identifier: MIT
#include "ir/type_promotion.h"

#include "ir/errors.h"

namespace mdfuser {

namespace {

// 0: bool, 1: integer, 2: floating.
int category(DataType dtype) {
  if (dtype == DataType::Bool) {
    return 0;
  }
  return isFloatingType(dtype) ? 2 : 1;
}

// Rank of a dtype within its category, for promotion.
int width(DataType dtype) {
  switch (dtype) {
    case DataType::Bool:
      return 0;
    case DataType::Int32:
      return 1;
    case DataType::Int:
      return 2;
    case DataType::Half:
    case DataType::BFloat16:
      return 1;
    case DataType::Float:
      return 2;
    case DataType::Double:
      return 3;
    case DataType::UInt64:
    case DataType::Null:
      break;
  }
  MDF_UNREACHABLE("no promotion for ", dtype);
}

// The tier's promoted dtype, or Null when the tier is empty.
DataType promoteAll(const std::vector<DataType>& dtypes) {
  DataType result = DataType::Null;
  for (DataType dtype : dtypes) {
    result = result == DataType::Null ? dtype : promoteTypes(result, dtype);
  }
  return result;
}

// A lower tier's dtype joins only when its category is higher; c10's
// combine_categories.
DataType combine(DataType higher, DataType lower) {
  if (higher == DataType::Null) {
    return lower;
  }
  if (lower == DataType::Null || category(lower) <= category(higher)) {
    return higher;
  }
  return promoteTypes(higher, lower);
}

} // namespace

DataType promoteTypes(DataType a, DataType b) {
  MDF_CHECK(a != DataType::Null && b != DataType::Null);
  if (a == b) {
    return a;
  }
  if (category(a) != category(b)) {
    return category(a) > category(b) ? a : b;
  }
  // Half and BFloat16 have no common 16-bit type.
  if ((a == DataType::Half && b == DataType::BFloat16) ||
      (a == DataType::BFloat16 && b == DataType::Half)) {
    return DataType::Float;
  }
  return width(a) >= width(b) ? a : b;
}

DataType resultType(const PromotionOperands& operands, PromotionKind kind) {
  // A scalar keeps its dtype, but for the 16-bit floats, which count as
  // Float (nvFuser's wrapped-scalar rule).
  std::vector<DataType> literals;
  for (DataType dtype : operands.literals) {
    literals.push_back(isReducedPrecision(dtype) ? DataType::Float : dtype);
  }
  DataType result = combine(
      promoteAll(operands.tensors),
      combine(promoteAll(operands.zero_dim_tensors), promoteAll(literals)));
  MDF_CHECK(result != DataType::Null, "a promotion needs an operand");
  switch (kind) {
    case PromotionKind::kKeepReduced:
      return result;
    case PromotionKind::kDefault:
      return isReducedPrecision(result) ? DataType::Float : result;
    case PromotionKind::kIntToFloat:
      return isFloatingType(result) && !isReducedPrecision(result)
                 ? result
                 : DataType::Float;
    case PromotionKind::kAlwaysBool:
      return DataType::Bool;
  }
  MDF_UNREACHABLE();
}

bool widensReducedPrecision(PromotionKind kind) {
  return kind == PromotionKind::kDefault || kind == PromotionKind::kIntToFloat;
}

} // namespace mdfuser
