// SPDX-License-Identifier: MIT
#pragma once

// Helpers shared by the builders of the operation families. Not for use
// outside csrc/ir/ops.

#include <string>
#include <vector>

#include "ir/tensor_view.h"

namespace mdfuser::ops {

// TypeError unless `val` is a tensor.
TensorView* requireTensor(Val* val, std::string_view op, std::string_view role);

// ValueError unless every operand lives in the fusion of the first one.
void requireSameFusion(const std::vector<Val*>& operands, std::string_view op);

// Records that two extents must agree. Constant mismatches fail now
// (ValueError); symbolic ones are checked when inputs arrive.
void requireEqualExtents(Scalar* a, Scalar* b, const std::string& what);

// A new axis with `like`'s extent.
IterDomain* freshAxis(IterDomain* like, IterType type);

// A new tensor with these logical axes.
TensorView* newTensor(
    IrContainer* container, std::vector<IterDomain*> logical, DataType dtype);

// `axis` in [-n, n) normalized to [0, n); ValueError naming `op`
// otherwise.
int64_t normalizeDim(int64_t axis, int64_t n, std::string_view op);

// "[0, 2]".
std::string listString(const std::vector<int64_t>& values);

} // namespace mdfuser::ops
