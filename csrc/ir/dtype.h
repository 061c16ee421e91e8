// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <ostream>
#include <string_view>

namespace mdfuser {

// Element types a tensor can hold. Index scalars (extents, loop indices) are
// always Int.
enum class DataType { Float, Double, Half, BFloat16, Int, Int32, Bool };

// The Python-visible name, e.g. "BFloat16".
std::string_view dtypeName(DataType dtype);

// The short form used in printed tensor names, e.g. "__bfloat" in
// T0_g___bfloat.
std::string_view typeString(DataType dtype);

int64_t sizeInBytes(DataType dtype);

std::ostream& operator<<(std::ostream& os, DataType dtype);

} // namespace mdfuser
