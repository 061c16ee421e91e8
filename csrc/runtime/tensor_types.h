// SPDX-License-Identifier: MIT
#pragma once

#include <c10/core/ScalarType.h>

#include "ir/dtype.h"

namespace mdfuser {

c10::ScalarType toScalarType(DataType dtype);

} // namespace mdfuser
