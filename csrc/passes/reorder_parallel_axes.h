// SPDX-License-Identifier: MIT
#pragma once

#include "ir/fusion.h"

namespace mdfuser {

// Moves the stream axis, then the device axes (z, y, x), to the front of
// every tensor's loop domain, keeping the relative order of the rest. Host
// IR lowering loops over the outermost axes, and communications need the
// device axis outermost so that each device's data is contiguous.
void reorderParallelAxes(Fusion* fusion);

} // namespace mdfuser
