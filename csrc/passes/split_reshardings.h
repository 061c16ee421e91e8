// SPDX-License-Identifier: MIT
#pragma once

#include "ir/fusion.h"

namespace mdfuser {

// Splits every set or sum over devices that changes the sharding of more
// than one device parallel type into a chain of such operations, one
// parallel type per step, so that each step is one collective (or a local
// slice). On a 2x2 mesh, gathering a tensor sharded on both mesh axes
//
//   c = set(p)   // p: [mesh_y on axis 0, mesh_x on axis 1]; c: replicated
//
// becomes
//
//   m = set(p)   // m: [mesh_y on axis 0]            Allgather on mesh_x
//   c = set(m)   //                                  Allgather on mesh_y
//
// The steps resolve partial sums first (only the sum's producer holds
// them, and a sum that is still sharded on the other types moves less),
// then take local slices (they shrink the data), then all-to-alls, then
// allgathers (they grow it); ties go in the order x, y, z.
//
// Assumes decomposeReshardings ran (data moves only in sets and sums over
// devices). Leaves alone what it cannot split: a move between meshes, a sum
// over several device types, a stream split on either side, or parallel
// types of one tensor axis that change in different steps; lowering then
// reports the move it cannot make.
void splitReshardings(Fusion* fusion);

} // namespace mdfuser
