// SPDX-License-Identifier: MIT
#pragma once

#include "ir/fusion.h"

namespace mdfuser {

// Propagates meshes, device shardings and stream splits from producers to
// consumers, in topological order, so that only fusion inputs need
// annotations.
//
// A consumer without a mesh takes the mesh of its first producer (in the
// operation's shardingPriority()) that has one, and the device shardings
// its producers claim (see multidevice/output_sharding.h): a claimed axis
// is cut like the claiming producer's, which may be a reduction axis (the
// output then sums over devices). A consumer whose mesh the user set keeps
// its device sharding, replicated or not; decomposeReshardings reconciles
// it with its producers. Stream splits reach every consumer that has none,
// from the first producer whose stream axis maps to an unsplit iteration
// axis and can be carried there; a reduction over the chunked axis stops
// them (its chunks would have to be summed across loop iterations).
//
// A creation's output (full, iota, uniform, normal: no producers) that
// the user did not place takes the mesh of the tensors using it, replicated.
//
// A tensor still without a mesh then (a fusion input the user left without
// one, or what only such inputs and creations produce) takes the mesh of
// the first of its uses that has one, replicated: validateSchedule has made
// sure the fusion's tensors are on one mesh when an input has none.
//
// Then, in reverse, a tensor the user did not annotate and that is not an
// output takes the sharding every one of its uses gives its output along
// the axis it maps to, when it has no sharding of its own on that device
// type: partial sums that every consumer wants split along the tokens are
// then reduce-scattered rather than allreduced and sliced.
//
// Assumes validateSchedule passed. Guarantees nothing about consistency.
void propagateShardings(Fusion* fusion);

} // namespace mdfuser
