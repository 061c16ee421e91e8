// SPDX-License-Identifier: MIT
#include "passes/pipeline.h"

#include "multidevice/validate_schedule.h"
#include "passes/decompose_reshardings.h"
#include "passes/decompose_sharded_creations.h"
#include "passes/propagate_shardings.h"
#include "passes/reorder_parallel_axes.h"
#include "passes/split_reshardings.h"
#include "passes/swizzled_gathers.h"

namespace mdfuser {

void runFusionPasses(Fusion* fusion, const FusionPassOptions& options) {
  auto dump = [&](const char* pass) {
    if (options.dump_after_each_pass != nullptr) {
      *options.dump_after_each_pass << "After " << pass << ":\n"
                                    << fusion->toString();
    }
  };
  validateSchedule(*fusion);
  // Before propagation: a swizzled stream split is a ring's steps, which
  // the operations after the gather do not take.
  prepareSwizzledGathers(fusion);
  dump("prepareSwizzledGathers");
  propagateShardings(fusion);
  dump("propagateShardings");
  decomposeShardedCreations(fusion);
  dump("decomposeShardedCreations");
  decomposeReshardings(fusion);
  dump("decomposeReshardings");
  // After decomposition: only then is every move a set or a sum.
  splitReshardings(fusion);
  dump("splitReshardings");
  reorderParallelAxes(fusion);
  dump("reorderParallelAxes");
  requireEvenSplits(fusion);
  validateReshardings(*fusion);
}

} // namespace mdfuser
