// SPDX-License-Identifier: MIT
#pragma once

#include <ostream>

#include "ir/fusion.h"

namespace mdfuser {

struct FusionPassOptions {
  // When set, the fusion is printed here after every pass.
  std::ostream* dump_after_each_pass = nullptr;
};

// Turns a user's scheduled fusion into one ready for host IR lowering:
//   validateSchedule      the user's annotations make sense
//   propagateShardings    meshes, device and stream splits reach every tensor
//   decomposeShardedCreations
//                         iota, uniform and normal compute the whole tensor;
//                         a set takes each device's part
//   decomposeReshardings  compute is local: producers resharded before,
//                         outputs moved after, device-split reductions
//                         become local op + sum
//   reorderParallelAxes   stream and device axes outermost (lowering needs it)
//   requireEvenSplits     symbolic extents that must divide across devices
//                         are checked when inputs arrive
//   validateReshardings   what moves data is a single collective, and
//                         stream loops chunk their tensors alike
// The order matters: decomposition needs the propagated shardings, and
// reordering must see the tensors decomposition creates.
void runFusionPasses(Fusion* fusion, const FusionPassOptions& options = {});

} // namespace mdfuser
