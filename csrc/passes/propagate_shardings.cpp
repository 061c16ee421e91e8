// SPDX-License-Identifier: MIT
#include "passes/propagate_shardings.h"

#include <algorithm>

#include "ir/errors.h"
#include "ir/ops.h"
#include "multidevice/output_sharding.h"
#include "multidevice/sharding.h"

namespace mdfuser {

namespace {

bool isUnsplitLoopAxis(const TensorView* tv, const IterDomain* id) {
  const std::vector<IterDomain*>& loop = tv->loop();
  return std::find(loop.begin(), loop.end(), id) != loop.end() &&
      id->parallelType() == ParallelType::Serial;
}

// Gives `consumer` a stream split from the first producer whose stream
// axis maps to one of its unsplit axes.
void applyStream(const TensorOp* op, TensorView* consumer) {
  if (loopAxis(consumer, ParallelType::Stream) != nullptr) {
    return;
  }
  for (TensorView* producer : op->tensorInputs()) {
    ParallelAxis stream =
        findParallelAxis(producer, ParallelType::Stream, producer->logical());
    if (!stream || !streamCanFollow(stream, {})) {
      continue;
    }
    IterDomain* target = mappedAxis(op, producer, consumer, stream.source);
    // A reduction over the chunked axis would sum across loop iterations:
    // such a consumer stays whole and runs after the loop.
    if (target == nullptr || target->isReduction() ||
        !isUnsplitLoopAxis(consumer, target)) {
      continue;
    }
    replayAxis(producer, stream.source, consumer, target, {ParallelType::Stream});
    return;
  }
}

} // namespace

void propagateShardings(Fusion* fusion) {
  for (TensorOp* op : fusion->exprs()) {
    for (TensorView* consumer : op->outs()) {
      const bool annotated = consumer->hasDeviceMesh();
      if (!annotated) {
        for (TensorView* producer : op->shardingPriority()) {
          if (producer->hasDeviceMesh()) {
            consumer->setDeviceMesh(*producer->deviceMesh());
            break;
          }
        }
      }
      if (!annotated && consumer->hasDeviceMesh()) {
        applyClaims(
            op, outputClaims(op, *consumer->deviceMesh()), consumer, consumer);
      }
      applyStream(op, consumer);
    }
  }
}

} // namespace mdfuser
