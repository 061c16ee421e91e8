// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <ostream>
#include <string_view>

namespace mdfuser {

// Element types a tensor or a scalar can hold. Index scalars (extents, loop
// indices) are always Int. Null means "not given" where an operation takes
// an optional dtype (sum's `dtype`); no value has it.
enum class DataType {
  Float,
  Double,
  Half,
  BFloat16,
  Int,
  Int32,
  Bool,
  // Storage only, as in torch: tensors of it can be defined, filled (full),
  // cast and moved; arithmetic and reductions refuse it (TypeError).
  UInt64,
  Null,
};

// The Python-visible name, e.g. "BFloat16".
std::string_view dtypeName(DataType dtype);

// The short form used in printed tensor names, e.g. "__bfloat" in
// T0_g___bfloat.
std::string_view typeString(DataType dtype);

int64_t sizeInBytes(DataType dtype);

bool isFloatingType(DataType dtype);
bool isIntegralType(DataType dtype); // Int and Int32, not Bool or UInt64
// Half and BFloat16: types whose arithmetic torch carries out in Float.
bool isReducedPrecision(DataType dtype);

std::ostream& operator<<(std::ostream& os, DataType dtype);

} // namespace mdfuser
