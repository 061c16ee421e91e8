// SPDX-License-Identifier: MIT
#pragma once

#include "ir/fusion.h"

namespace mdfuser {

// Splits operations that reduce over a device-sharded axis into a local
// operation and a cross-device sum (rFactor).
//
// When `out = op(...)` has a reduction axis whose device-parallel part
// (say rK split into rdeviceIdx.x{d} and rS{K/d}) spans devices, it
// becomes
//   partial = op(...)   // rK split into ideviceIdx.x{d}rf and rS{K/d}rf:
//                       // each device reduces its own slice
//   out = sum(partial)  // over rdeviceIdx.x{d}: a collective
// `out` keeps its identity and its other axes; `partial` is new.
//
// Assumes propagateShardings ran. Guarantees that no operation except a
// single-input sum reduces over a device-parallel axis.
void decomposeReshardings(Fusion* fusion);

} // namespace mdfuser
