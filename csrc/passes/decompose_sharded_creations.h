// SPDX-License-Identifier: MIT
#pragma once

#include "ir/fusion.h"

namespace mdfuser {

// Rewrites each creation whose values depend on the position (iota, and
// uniform and normal, whose draws follow the global tensor) and whose output
// is split across devices or streams into the creation of the whole tensor,
// replicated on the output's mesh, and a set into the output. The set then
// takes this device's part and stream chunk like any move from a
// replicated tensor to a sharded one (a local slice, no communication), so
// every device's part is cut from the same global tensor. The whole tensor
// lives only until that copy. full is left alone: any part of it is the
// same value everywhere, so it fills just the local buffer.
//
// Assumes propagateShardings ran (the shardings are final); runs before
// decomposeReshardings, which reconciles the set like any other.
void decomposeShardedCreations(Fusion* fusion);

} // namespace mdfuser
