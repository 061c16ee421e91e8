// SPDX-License-Identifier: MIT
#include "passes/propagate_shardings.h"

#include <algorithm>
#include <set>
#include <unordered_set>

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
    replayAxis(
        producer, stream.source, consumer, target, {ParallelType::Stream});
    return;
  }
}

// Replaces the loop axes of `tv` derived from its logical axis `axis` by
// `axis` itself, undoing their splits.
void unsplit(TensorView* tv, IterDomain* axis) {
  std::vector<IterDomain*> loop;
  bool placed = false;
  for (IterDomain* id : tv->loop()) {
    const std::vector<Expr*> path = transformsBetween({axis}, {id});
    if (id != axis && path.empty()) {
      loop.push_back(id);
    } else if (!placed) {
      loop.push_back(axis);
      placed = true;
    }
  }
  axis->parallelize(ParallelType::Serial);
  tv->setLoop(std::move(loop));
}

// The axis of `tv` every use shards on `pt`, with the consumer and its
// parallel axis to copy the layout from; nothing when the uses disagree,
// one does not shard on `pt`, or one does not index the axis exactly.
struct Wanted {
  IterDomain* axis = nullptr;
  const TensorView* consumer = nullptr;
  ParallelAxis layout;
};
Wanted wantedByUses(
    const Fusion& fusion, const TensorView* tv, ParallelType pt) {
  Wanted wanted;
  if (tv->uses().empty()) {
    return {};
  }
  for (Expr* use : tv->uses()) {
    auto* op = dynamic_cast<TensorOp*>(use);
    if (op == nullptr || op->outputs().size() != 1) {
      return {};
    }
    const TensorView* consumer = op->out();
    if (consumer->deviceMesh() != tv->deviceMesh()) {
      return {};
    }
    ParallelAxis c = findParallelAxis(consumer, pt, consumer->maybeRoot());
    if (!c || c.source->isReduction()) {
      return {};
    }
    IterDomain* axis = nullptr;
    for (const AxisMapping& m : op->mapProducerToConsumer(tv, consumer)) {
      if (m.consumer == c.source && m.exact) {
        axis = m.producer;
      }
    }
    if (axis == nullptr ||
        (wanted.axis != nullptr &&
         (wanted.axis != axis || !sameLayout(wanted.layout, c)))) {
      return {};
    }
    wanted = {axis, consumer, c};
  }
  (void)fusion;
  return wanted;
}

// Gives a tensor the sharding all its uses want when it has none of its
// own on that device type (it is replicated, or holds partial results).
// A row-parallel linear whose result every use takes sharded along the
// tokens then reduce-scatters instead of allreducing.
void propagateFromUses(
    Fusion* fusion, const std::unordered_set<const TensorView*>& annotated) {
  const std::vector<TensorOp*> exprs = fusion->exprs();
  for (auto it = exprs.rbegin(); it != exprs.rend(); ++it) {
    for (TensorView* tv : (*it)->outs()) {
      if (annotated.count(tv) != 0 || fusion->isOutput(tv) ||
          !tv->hasDeviceMesh()) {
        continue;
      }
      for (ParallelType pt : kDeviceParallelTypes) {
        ParallelAxis own = findParallelAxis(tv, pt, tv->logical());
        if (own && !own.source->isReduction()) {
          continue;
        }
        const Wanted wanted = wantedByUses(*fusion, tv, pt);
        if (wanted.axis == nullptr) {
          continue;
        }
        if (own) {
          // Partial results: summed and scattered at once instead.
          unsplit(tv, own.source);
        }
        std::set<ParallelType> taken = {pt};
        ParallelAxis stream =
            findParallelAxis(tv, ParallelType::Stream, tv->logical());
        if (stream && stream.source == wanted.axis) {
          unsplit(tv, wanted.axis);
          taken.insert(ParallelType::Stream);
        }
        replayAxis(
            wanted.consumer, wanted.layout.source, tv, wanted.axis, taken);
      }
    }
  }
}

// A tensor without a mesh after the forward pass is a fusion input the user
// left without one, or descends from such inputs and creations only (full,
// iota, ...: operations without tensor operands). It takes the mesh of the
// first of its uses whose output has one, in reverse order so that a chain
// of such tensors takes the mesh where it is used, inputs last; it stays
// replicated there until propagateFromUses shards it.
void placeWhereUsed(Fusion* fusion) {
  auto place = [](TensorView* tv) {
    if (tv->hasDeviceMesh()) {
      return;
    }
    for (Expr* use : tv->uses()) {
      auto* op = dynamic_cast<TensorOp*>(use);
      if (op != nullptr && op->out()->hasDeviceMesh()) {
        tv->setDeviceMesh(*op->out()->deviceMesh());
        return;
      }
    }
  };
  const std::vector<TensorOp*> exprs = fusion->exprs();
  for (auto it = exprs.rbegin(); it != exprs.rend(); ++it) {
    for (TensorView* tv : (*it)->outs()) {
      place(tv);
    }
  }
  for (TensorView* tv : fusion->inputs()) {
    place(tv);
  }
}

} // namespace

void propagateShardings(Fusion* fusion) {
  std::unordered_set<const TensorView*> user_placed;
  for (TensorView* tv : fusion->allTensors()) {
    if (tv->hasDeviceMesh()) {
      user_placed.insert(tv);
    }
  }
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
  placeWhereUsed(fusion);
  propagateFromUses(fusion, user_placed);
}

} // namespace mdfuser
