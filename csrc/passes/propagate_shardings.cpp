// SPDX-License-Identifier: MIT
#include "passes/propagate_shardings.h"

#include <algorithm>
#include <unordered_map>

#include "ir/errors.h"
#include "ir/ops.h"
#include "multidevice/sharding.h"

namespace mdfuser {

namespace {

// Applies `axis` (a parallel axis of some producer) to `target`, a loop axis
// of `consumer` that has not been split.
void replay(
    TensorView* consumer,
    IterDomain* target,
    const ParallelAxis& axis,
    ParallelType pt) {
  std::vector<IterDomain*> loop = consumer->loop();
  auto pos = std::find(loop.begin(), loop.end(), target);
  MDF_CHECK(pos != loop.end());
  if (axis.split == nullptr) {
    target->parallelize(pt);
    return;
  }
  auto [outer, inner] =
      split(target, axis.split->factor(), axis.split->innerSplit());
  (axis.loop == axis.split->outer() ? outer : inner)->parallelize(pt);
  pos = loop.erase(pos);
  loop.insert(pos, {outer, inner});
  consumer->setLoop(std::move(loop));
}

// Replays `producer`'s parallel axes on `consumer`. Device parallel types
// are replayed only when `consumer` is not annotated: a mesh set by the user
// fixes its sharding, replication included.
void propagate(
    const TensorOp* op, TensorView* producer, bool consumer_annotated) {
  TensorView* consumer = op->out();
  if (!consumer->hasDeviceMesh() && producer->hasDeviceMesh()) {
    consumer->setDeviceMesh(*producer->deviceMesh());
  }
  std::unordered_map<IterDomain*, IterDomain*> p2c;
  for (auto [p, c] : op->mapProducerToConsumer(producer)) {
    p2c[p] = c;
  }
  for (IterDomain* p_loop : producer->loop()) {
    const ParallelType pt = p_loop->parallelType();
    if (pt == ParallelType::Serial || loopAxis(consumer, pt) != nullptr ||
        (isDeviceParallel(pt) && consumer_annotated)) {
      continue;
    }
    ParallelAxis axis = findParallelAxis(producer, pt, producer->logical());
    auto mapped = p2c.find(axis.source);
    if (mapped == p2c.end()) {
      continue;
    }
    IterDomain* target = mapped->second;
    const std::vector<IterDomain*>& loop = consumer->loop();
    if (std::find(loop.begin(), loop.end(), target) == loop.end()) {
      continue;
    }
    MDF_USER_CHECK(
        !(pt == ParallelType::Stream && target->isReduction()),
        "the stream axis ",
        p_loop->toString(),
        " of ",
        producer->toString(),
        " maps to the reduction axis ",
        target->toString(),
        " of ",
        consumer->toString(),
        "; a reduction cannot be split across streams");
    replay(consumer, target, axis, pt);
  }
}

} // namespace

void propagateShardings(Fusion* fusion) {
  for (TensorOp* op : fusion->exprs()) {
    const bool annotated = op->out()->hasDeviceMesh();
    for (TensorView* producer : op->tensorInputs()) {
      propagate(op, producer, annotated);
    }
  }
}

} // namespace mdfuser
