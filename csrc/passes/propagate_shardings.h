// SPDX-License-Identifier: MIT
#pragma once

#include "ir/fusion.h"

namespace mdfuser {

// Propagates meshes, device shardings and stream splits from producers to
// consumers, in topological order, so that only fusion inputs need
// annotations.
//
// For each operation and each parallel type a producer uses but the
// consumer does not, the producer's split of the parallel axis is replayed
// on the consumer axis it maps to (LinearOp maps in_features to the
// reduction axis, batch axes to batch axes, ...). A consumer that lacks a
// mesh takes its first producer's mesh and device shardings; one whose mesh
// the user set keeps its device sharding, replicated or not, and a
// communication will reconcile it with its producers. Stream splits reach
// every consumer.
//
// Assumes validateSchedule passed. Guarantees nothing about consistency: a
// consumer that already uses a parallel type keeps it, and an axis that was
// already split is left alone; decomposeReshardings and
// validateReshardings deal with what remains inconsistent.
void propagateShardings(Fusion* fusion);

} // namespace mdfuser
