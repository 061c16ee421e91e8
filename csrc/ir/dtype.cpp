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
  }
  MDF_UNREACHABLE("unknown DataType ", static_cast<int>(dtype));
}

int64_t sizeInBytes(DataType dtype) {
  switch (dtype) {
    case DataType::Double:
    case DataType::Int:
      return 8;
    case DataType::Float:
    case DataType::Int32:
      return 4;
    case DataType::Half:
    case DataType::BFloat16:
      return 2;
    case DataType::Bool:
      return 1;
  }
  MDF_UNREACHABLE("unknown DataType ", static_cast<int>(dtype));
}

std::ostream& operator<<(std::ostream& os, DataType dtype) {
  return os << dtypeName(dtype);
}

} // namespace mdfuser
