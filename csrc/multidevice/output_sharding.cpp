// SPDX-License-Identifier: MIT
#include "multidevice/output_sharding.h"

#include <algorithm>
#include <map>

#include "ir/container.h"
#include "ir/errors.h"

namespace mdfuser {

namespace {

bool contains(const std::vector<IterDomain*>& ids, const IterDomain* id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

} // namespace

ParallelAxis producerAxis(const TensorView* producer, ParallelType pt) {
  ParallelAxis pa = findParallelAxis(producer, pt, producer->logical());
  if (pa && pa.source->isReduction()) {
    return {};
  }
  return pa;
}

std::vector<Claim> outputClaims(const TensorOp* op, const DeviceMesh& mesh) {
  std::vector<Claim> claims;
  const TensorView* out = op->out();
  for (ParallelType pt : kDeviceParallelTypes) {
    // Shardings the output keeps come before partial results: a producer
    // sharded along an axis the operation reduces claims the type only
    // when no producer is sharded along one it keeps (so that a weight
    // gradient gathers its activations rather than allreducing a
    // weight-sized result).
    for (const bool partial : {false, true}) {
      for (const TensorView* producer : op->shardingPriority()) {
        if (producer->deviceMesh() != mesh) {
          continue;
        }
        ParallelAxis pa = producerAxis(producer, pt);
        if (!pa) {
          continue;
        }
        IterDomain* mapped = mappedAxis(op, producer, out, pa.source);
        if (mapped == nullptr || mapped->isReduction() != partial) {
          continue;
        }
        // An axis the producer's split cannot cut evenly (a reshape's part
        // smaller than the devices) stays whole: the producer is gathered
        // before the operation instead.
        if (!splitsEvenly(pa, mapped->extent())) {
          continue;
        }
        // Two device types cannot land on one axis from different
        // producers.
        const bool taken =
            std::any_of(claims.begin(), claims.end(), [&](const Claim& c) {
              return c.producer != producer &&
                     claimedAxis(op, c, out) == mapped;
            });
        if (taken) {
          continue;
        }
        claims.push_back({pt, producer, pa, partial});
        break;
      }
      if (!claims.empty() && claims.back().parallel_type == pt) {
        break;
      }
    }
  }
  return claims;
}

IterDomain* claimedAxis(
    const TensorOp* op, const Claim& claim, const TensorView* consumer) {
  return mappedAxis(op, claim.producer, consumer, claim.axis.source);
}

bool matchesClaims(
    const TensorOp* op,
    const std::vector<Claim>& claims,
    const TensorView* consumer) {
  for (ParallelType pt : kDeviceParallelTypes) {
    ParallelAxis c = findParallelAxis(consumer, pt, consumer->maybeRoot());
    auto claim = std::find_if(claims.begin(), claims.end(), [&](auto& cl) {
      return cl.parallel_type == pt;
    });
    IterDomain* target =
        claim == claims.end() ? nullptr : claimedAxis(op, *claim, consumer);
    if (target == nullptr) {
      if (c) {
        return false;
      }
      continue;
    }
    if (!c || c.source != target || !sameLayout(c, claim->axis)) {
      return false;
    }
  }
  return true;
}

bool conformsToClaims(
    const TensorOp* op,
    const std::vector<Claim>& claims,
    const TensorView* producer,
    const TensorView* consumer,
    const DeviceMesh* mesh) {
  if (mesh == nullptr ? producer->deviceMesh() != consumer->deviceMesh()
                      : producer->deviceMesh() != *mesh) {
    return false;
  }
  for (ParallelType pt : kDeviceParallelTypes) {
    ParallelAxis p = producerAxis(producer, pt);
    auto claim = std::find_if(claims.begin(), claims.end(), [&](auto& cl) {
      return cl.parallel_type == pt;
    });
    IterDomain* target =
        claim == claims.end() ? nullptr : claimedAxis(op, *claim, consumer);
    // Does the producer index the claimed axis?
    IterDomain* indexing = nullptr;
    if (target != nullptr) {
      for (const AxisMapping& m :
           op->mapProducerToConsumer(producer, consumer)) {
        if (m.consumer == target) {
          indexing = m.producer;
        }
      }
    }
    if (indexing == nullptr) {
      if (p) {
        return false;
      }
      continue;
    }
    if (!p || p.source != indexing || !sameLayout(p, claim->axis)) {
      return false;
    }
  }
  return true;
}

bool streamCanFollow(
    const ParallelAxis& stream, const std::set<ParallelType>& taken_devices) {
  for (const IterDomain* above : stream.above) {
    if (above->isDeviceParallel() &&
        taken_devices.count(above->parallelType()) == 0) {
      return false;
    }
  }
  return true;
}

void dropReductions(TensorView* tv) {
  std::vector<IterDomain*> logical;
  for (IterDomain* id : tv->logical()) {
    if (!id->isReduction()) {
      logical.push_back(id);
    }
  }
  std::vector<IterDomain*> loop;
  for (IterDomain* id : tv->loop()) {
    if (!id->isReduction()) {
      loop.push_back(id);
    }
  }
  tv->setDomains({}, std::move(logical), std::move(loop));
}

void replayAxis(
    const TensorView* from,
    const IterDomain* from_axis,
    TensorView* to,
    IterDomain* to_axis,
    const std::set<ParallelType>& taken) {
  std::vector<IterDomain*> loop = to->loop();
  auto pos = std::find(loop.begin(), loop.end(), to_axis);
  MDF_CHECK(pos != loop.end(), to_axis->toString(), " is not a loop axis");

  // The chain of splits under from_axis: each splits the inner part of the
  // previous one, and its outer part is a loop axis.
  std::vector<Split*> chain;
  const IterDomain* id = from_axis;
  while (!contains(from->loop(), id)) {
    Split* next = nullptr;
    for (Expr* use : id->uses()) {
      if (auto* s = dynamic_cast<Split*>(use);
          s != nullptr && contains(from->loop(), s->outer())) {
        next = s;
      }
    }
    if (next == nullptr) {
      break;
    }
    chain.push_back(next);
    id = next->inner();
  }
  // Replay down to the last taken parallel axis.
  size_t length = 0;
  for (size_t i = 0; i < chain.size(); ++i) {
    if (taken.count(chain[i]->outer()->parallelType()) != 0) {
      length = i + 1;
    }
  }
  if (length == 0 && contains(from->loop(), from_axis) &&
      taken.count(from_axis->parallelType()) != 0) {
    // The axis itself is parallel.
    to_axis->parallelize(from_axis->parallelType());
    return;
  }
  IterDomain* current = to_axis;
  std::vector<IterDomain*> replayed;
  for (size_t i = 0; i < length; ++i) {
    Split* s = chain[i];
    auto [outer, inner] = split(current, s->factor(), s->innerSplit());
    const ParallelType pt = s->outer()->parallelType();
    outer->parallelize(taken.count(pt) != 0 ? pt : ParallelType::Serial);
    replayed.push_back(outer);
    current = inner;
  }
  if (length == 0) {
    return;
  }
  replayed.push_back(current);
  pos = loop.erase(pos);
  loop.insert(pos, replayed.begin(), replayed.end());
  to->setLoop(std::move(loop));
}

void applyClaims(
    const TensorOp* op,
    const std::vector<Claim>& claims,
    const TensorView* consumer,
    TensorView* target) {
  const std::vector<IterDomain*>& from_ids = consumer->maybeRoot();
  const std::vector<IterDomain*>& to_ids = target->logical();
  MDF_CHECK_EQ(from_ids.size(), to_ids.size());
  auto toTarget = [&](const IterDomain* id) -> IterDomain* {
    auto it = std::find(from_ids.begin(), from_ids.end(), id);
    return it == from_ids.end() ? nullptr : to_ids[it - from_ids.begin()];
  };
  // Claims from one producer axis are replayed together.
  std::map<
      std::pair<const TensorView*, const IterDomain*>,
      std::set<ParallelType>>
      groups;
  for (const Claim& claim : claims) {
    if (claimedAxis(op, claim, consumer) != nullptr &&
        loopAxis(target, claim.parallel_type) == nullptr) {
      groups[{claim.producer, claim.axis.source}].insert(claim.parallel_type);
    }
  }
  for (auto& [key, taken] : groups) {
    auto [producer, source] = key;
    IterDomain* target_axis = nullptr;
    for (const Claim& claim : claims) {
      if (claim.producer == producer && claim.axis.source == source) {
        target_axis = toTarget(claimedAxis(op, claim, consumer));
      }
    }
    const std::vector<IterDomain*>& loop = target->loop();
    if (target_axis == nullptr ||
        std::find(loop.begin(), loop.end(), target_axis) == loop.end() ||
        target_axis->parallelType() != ParallelType::Serial) {
      continue;
    }
    ParallelAxis stream =
        findParallelAxis(producer, ParallelType::Stream, producer->logical());
    if (stream && stream.source == source &&
        loopAxis(target, ParallelType::Stream) == nullptr &&
        !target_axis->isReduction() && streamCanFollow(stream, taken)) {
      taken.insert(ParallelType::Stream);
    }
    replayAxis(producer, source, target, target_axis, taken);
  }
}

} // namespace mdfuser
