// SPDX-License-Identifier: MIT
#include "passes/decompose_sharded_creations.h"

#include "ir/container.h"
#include "ir/ops.h"
#include "multidevice/sharding.h"

namespace mdfuser {

namespace {

bool isSplit(const TensorView* tv) {
  return isSharded(tv) || loopAxis(tv, ParallelType::Stream) != nullptr;
}

} // namespace

void decomposeShardedCreations(Fusion* fusion) {
  for (TensorOp* op : fusion->exprs()) {
    auto* creation = dynamic_cast<CreationOp*>(op);
    if (creation == nullptr || !creation->dependsOnPosition() ||
        !isSplit(creation->out())) {
      continue;
    }
    TensorView* out = creation->out();
    std::vector<IterDomain*> ids;
    for (IterDomain* id : out->logical()) {
      ids.push_back(fusion->create<IterDomain>(id->extent(), id->iterType()));
    }
    auto* whole = fusion->create<TensorView>(std::move(ids), out->dtype());
    if (out->hasDeviceMesh()) {
      whole->setDeviceMesh(*out->deviceMesh());
    }
    creation->unregisterAsDefinition();
    creation->withTensors({whole}, {})->registerAsDefinition();
    fusion->create<LoadStoreOp>(out, whole)->registerAsDefinition();
  }
}

} // namespace mdfuser
