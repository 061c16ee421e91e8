// SPDX-License-Identifier: MIT
#include "runtime/tensor_types.h"

#include "ir/errors.h"

namespace mdfuser {

c10::ScalarType toScalarType(DataType dtype) {
  switch (dtype) {
    case DataType::Float:
      return c10::kFloat;
    case DataType::Double:
      return c10::kDouble;
    case DataType::Half:
      return c10::kHalf;
    case DataType::BFloat16:
      return c10::kBFloat16;
    case DataType::Int:
      return c10::kLong;
    case DataType::Int32:
      return c10::kInt;
    case DataType::Bool:
      return c10::kBool;
    case DataType::UInt64:
      return c10::kUInt64;
    case DataType::Null:
      break;
  }
  MDF_UNREACHABLE("unknown DataType ", static_cast<int>(dtype));
}

} // namespace mdfuser
