// SPDX-License-Identifier: MIT
#include "ir/dtype.h"

#include "ir/errors.h"

namespace mdfuser {

std::string_view dtypeName(DataType dtype) {
  switch (dtype) {
    case DataType::Float:
      return "Float";
    case DataType::Double:
      return "Double";
    case DataType::Half:
      return "Half";
    case DataType::BFloat16:
      return "BFloat16";
    case DataType::Int:
      return "Int";
    case DataType::Int32:
      return "Int32";
    case DataType::Bool:
      return "Bool";
    case DataType::UInt64:
      return "UInt64";
    case DataType::Null:
      return "Null";
  }
  MDF_UNREACHABLE("unknown DataType ", static_cast<int>(dtype));
}

std::string_view typeString(DataType dtype) {
  switch (dtype) {
    case DataType::Float:
      return "float";
    case DataType::Double:
      return "double";
    case DataType::Half:
      return "__half";
    case DataType::BFloat16:
      return "__bfloat";
    case DataType::Int:
      return "int64_t";
    case DataType::Int32:
      return "int";
    case DataType::Bool:
      return "bool";
    case DataType::UInt64:
      return "uint64_t";
    case DataType::Null:
      return "null";
  }
  MDF_UNREACHABLE("unknown DataType ", static_cast<int>(dtype));
}

int64_t sizeInBytes(DataType dtype) {
  switch (dtype) {
    case DataType::Double:
    case DataType::Int:
    case DataType::UInt64:
      return 8;
    case DataType::Float:
    case DataType::Int32:
      return 4;
    case DataType::Half:
    case DataType::BFloat16:
      return 2;
    case DataType::Bool:
      return 1;
    case DataType::Null:
      break;
  }
  MDF_UNREACHABLE("unknown DataType ", static_cast<int>(dtype));
}

bool isFloatingType(DataType dtype) {
  return dtype == DataType::Float || dtype == DataType::Double ||
         dtype == DataType::Half || dtype == DataType::BFloat16;
}

bool isIntegralType(DataType dtype) {
  return dtype == DataType::Int || dtype == DataType::Int32;
}

bool isReducedPrecision(DataType dtype) {
  return dtype == DataType::Half || dtype == DataType::BFloat16;
}

std::ostream& operator<<(std::ostream& os, DataType dtype) {
  return os << dtypeName(dtype);
}

} // namespace mdfuser
