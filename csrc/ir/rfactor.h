// SPDX-License-Identifier: MIT
#pragma once

#include <vector>

#include "ir/tensor_view.h"

namespace mdfuser {

// Splits the reduction that defines `out` in two (an rFactor):
//
//   out = op(...)     // reduces over loop axes A and B
// becomes
//   partial = op(...) // reduces over A only; B are iteration axes ("rf")
//   out = sum(partial) // reduces over B (max/min for a max/min reduction)
//
// `partial_reduces` lists A: reduction loop axes of `out`. The reduction
// axes of out's logical domain may be split (not merged) on the way to the
// loop domain; partial's root mirrors out's logical domain and its logical
// domain replaces each reduced axis by the loop axes derived from it. out
// keeps its identity, its other axes and their schedule. Returns partial,
// which has out's mesh and the parallel types of out's loop axes.
//
// User error when the request cannot be honoured (an axis that is not a
// reduction loop axis of out, a merged reduction axis).
TensorView* rFactor(
    TensorView* out, const std::vector<IterDomain*>& partial_reduces);

} // namespace mdfuser
