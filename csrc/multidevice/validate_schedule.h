// SPDX-License-Identifier: MIT
#pragma once

#include "ir/fusion.h"

namespace mdfuser {

// Checks the schedule a user attached to a fusion before any pass reads it:
// every sharded tensor has a mesh, all meshes agree, each device-parallel
// axis has as many parts as its mesh axis has devices, and static extents
// divide evenly across devices. Raises user errors naming the tensor, the
// axis and the expected value.
void validateSchedule(const Fusion& fusion);

// Checks a fusion after the fusion passes: every operation that moves data
// between devices is a single-input set or sum that one collective
// implements. Raises a user error naming the operation otherwise.
void validateReshardings(const Fusion& fusion);

} // namespace mdfuser
