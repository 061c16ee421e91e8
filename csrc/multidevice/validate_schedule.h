// SPDX-License-Identifier: MIT
#pragma once

#include "ir/fusion.h"

namespace mdfuser {

// Checks the schedule a user attached to a fusion before any pass reads it:
// every sharded tensor has a mesh, every input has one when any tensor
// does, each device-parallel axis is the outer part of a chain of splits
// with as many parts as its mesh axis has devices, and static extents
// divide evenly across devices. Raises user errors naming the tensor, the
// axis and the expected value.
void validateSchedule(const Fusion& fusion);

// Records, as extent constraints of `fusion`, the divisions its device
// splits need to be even that cannot be checked statically; they are
// checked when inputs arrive.
void requireEvenSplits(Fusion* fusion);

// Checks a fusion after the fusion passes: every operation that moves data
// between devices is a single-input set or sum that one collective (or a
// local slice) implements, that a collective's device split is below no
// serial split (non-outermost sharding), and that the operations of a
// stream loop agree on how its chunks cut their tensors. Raises a user error
// naming the operation otherwise.
void validateReshardings(const Fusion& fusion);

} // namespace mdfuser
