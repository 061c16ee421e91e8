// SPDX-License-Identifier: MIT
#include "multidevice/sharding.h"

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>

#include "ir/container.h"
#include "ir/errors.h"
#include "ir/ops/op_type.h"

namespace mdfuser {

namespace {

bool contains(const std::vector<IterDomain*>& ids, const IterDomain* id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

bool sameExtent(const Scalar* a, const Scalar* b) {
  return a == b || (a->isConst() && b->isConst() && a->value() == b->value());
}

// The device parallel axes of `tv` whose source is `axis`, in the order
// x, y, z.
std::vector<ParallelAxis> deviceAxesOn(
    const TensorView* tv, const IterDomain* axis) {
  std::vector<ParallelAxis> result;
  for (ParallelType pt : kDeviceParallelTypes) {
    ParallelAxis pa = findParallelAxis(tv, pt, tv->logical());
    if (pa && pa.source == axis) {
      result.push_back(pa);
    }
  }
  return result;
}

// The innermost of `axes` (all on one source): the one the others are
// above.
const ParallelAxis* innermost(const std::vector<ParallelAxis>& axes) {
  const ParallelAxis* result = nullptr;
  for (const ParallelAxis& pa : axes) {
    if (result == nullptr || pa.above.size() > result->above.size()) {
      result = &pa;
    }
  }
  return result;
}

} // namespace

Scalar* ParallelAxis::partExtent() const {
  if (split == nullptr) {
    return constant(loop->container(), 1);
  }
  return split->outer() == loop ? split->inner()->extent()
                                : split->outer()->extent();
}

IterDomain* loopAxis(const TensorView* tv, ParallelType pt) {
  for (IterDomain* id : tv->loop()) {
    if (id->parallelType() == pt) {
      return id;
    }
  }
  return nullptr;
}

bool inStreamLoop(const TensorOp* op) {
  if (loopAxis(op->out(), ParallelType::Stream) != nullptr) {
    return true;
  }
  return std::any_of(
      op->inputs().begin(), op->inputs().end(), [](const Val* in) {
        const auto* tv = dynamic_cast<const TensorView*>(in);
        return tv != nullptr && loopAxis(tv, ParallelType::Stream) != nullptr;
      });
}

ParallelAxis findParallelAxis(
    const TensorView* tv,
    ParallelType pt,
    const std::vector<IterDomain*>& domain) {
  ParallelAxis result;
  result.loop = loopAxis(tv, pt);
  if (result.loop == nullptr) {
    return {};
  }
  auto unsupported = [&](const char* why) {
    MDF_USER_ERROR(
        "the ",
        parallelTypeName(pt),
        " axis ",
        result.loop->toString(),
        " of ",
        tv->toString(),
        " ",
        why,
        "; mdfuser supports parallel axes that are the outer part of a chain "
        "of splits, each splitting the inner part of the previous one");
  };
  // The split that defines `id`; anything else is refused.
  auto definingSplit = [&](const IterDomain* id) {
    Expr* def = id->definition();
    auto* split = dynamic_cast<Split*>(def);
    if (split == nullptr) {
      unsupported(
          def == nullptr ? "does not derive from a tensor axis"
                         : "comes from a merge");
    }
    return split;
  };
  IterDomain* id = result.loop;
  if (!contains(domain, id)) {
    result.split = definingSplit(id);
    id = result.split->in();
  }
  while (!contains(domain, id)) {
    Split* split = definingSplit(id);
    if (split->inner() != id) {
      unsupported("derives from the outer part of a split");
    }
    result.above.insert(result.above.begin(), split->outer());
    id = split->in();
  }
  result.source = id;
  return result;
}

std::optional<std::vector<int64_t>> layoutPlace(
    const TensorView* tv, const IterDomain* id) {
  const std::vector<IterDomain*>& logical = tv->logical();
  std::vector<int64_t> place;
  while (!contains(logical, id)) {
    auto* split = dynamic_cast<Split*>(id->definition());
    if (split == nullptr) {
      return std::nullopt;
    }
    place.insert(place.begin(), split->outer() == id ? 0 : 1);
    id = split->in();
  }
  place.insert(
      place.begin(),
      std::find(logical.begin(), logical.end(), id) - logical.begin());
  return place;
}

std::string allocationMismatch(
    const TensorView* tv, const std::vector<IterDomain*>& allocation) {
  std::vector<int64_t> previous;
  for (IterDomain* id : allocation) {
    if (id->isDeviceParallel() || id->isReduction() || id->isBroadcast()) {
      continue;
    }
    std::optional<std::vector<int64_t>> here = layoutPlace(tv, id);
    if (!here.has_value()) {
      return detail::concat(
          "its axis ",
          id->toString(),
          " does not derive from a logical axis by splits");
    }
    if (!previous.empty() && *here < previous) {
      return detail::concat(
          "its axis ",
          id->toString(),
          " comes after an axis that mdfuser holds inside it (mdfuser holds "
          "local tensors in the order of their logical axes)");
    }
    previous = std::move(*here);
  }
  return "";
}

std::vector<ParallelType> deviceParallelTypes(const TensorView* tv) {
  std::vector<ParallelType> result;
  for (ParallelType pt : kDeviceParallelTypes) {
    if (loopAxis(tv, pt) != nullptr) {
      result.push_back(pt);
    }
  }
  return result;
}

bool isSharded(const TensorView* tv) {
  return !deviceParallelTypes(tv).empty();
}

std::vector<ParallelType> shardingOfLogicalAxes(const TensorView* tv) {
  const std::vector<IterDomain*> logical = tv->logicalNoReductions();
  std::vector<ParallelType> result(logical.size(), ParallelType::Serial);
  for (size_t i = 0; i < logical.size(); ++i) {
    const std::vector<ParallelAxis> axes = deviceAxesOn(tv, logical[i]);
    if (const ParallelAxis* pa = innermost(axes)) {
      result[i] = pa->loop->parallelType();
    }
  }
  return result;
}

std::vector<Scalar*> localExtents(const TensorView* tv) {
  const std::vector<IterDomain*> logical = tv->logicalNoReductions();
  std::vector<Scalar*> result;
  for (IterDomain* id : logical) {
    if (id->isBroadcast()) {
      result.push_back(constant(tv->container(), 1));
      continue;
    }
    const std::vector<ParallelAxis> axes = deviceAxesOn(tv, id);
    const ParallelAxis* pa = innermost(axes);
    if (pa == nullptr) {
      result.push_back(id->extent());
      continue;
    }
    // One part of the innermost device split, times the parts of every
    // other split above it that is not across devices.
    Scalar* local = pa->partExtent();
    for (IterDomain* above : pa->above) {
      if (!above->isDeviceParallel()) {
        local = mul(above->extent(), local);
      }
    }
    result.push_back(local);
  }
  return result;
}

StreamChunk streamChunk(const TensorView* tv, Scalar* index) {
  ParallelAxis axis = findParallelAxis(tv, ParallelType::Stream, tv->logical());
  MDF_CHECK(axis, tv->toString(), " has no stream axis");
  MDF_CHECK(
      axis.isOuter(),
      "the stream axis of ",
      tv->toString(),
      " is the inner part of a split");
  const std::vector<IterDomain*> logical = tv->logicalNoReductions();
  auto it = std::find(logical.begin(), logical.end(), axis.source);
  MDF_CHECK(it != logical.end(), "stream axis of a reduction");
  const int64_t pos = it - logical.begin();
  Scalar* extent = localExtents(tv)[pos];
  // A chunk of the local tensor: one part of the stream split, less the
  // device splits below it.
  Scalar* chunk = axis.partExtent();
  for (const ParallelAxis& device : deviceAxesOn(tv, axis.source)) {
    if (contains(device.above, axis.loop)) {
      chunk = div(chunk, device.parts());
    }
  }
  // Clamping the start keeps it a valid offset when trailing chunks are
  // empty (more chunks than rows).
  Scalar* start = min(mul(index, chunk), extent);
  Scalar* length = min(chunk, sub(extent, start));
  return {pos, start, length};
}

bool sameLayout(const ParallelAxis& a, const ParallelAxis& b) {
  if (!a || !b) {
    return !a && !b;
  }
  if (!sameExtent(a.parts(), b.parts()) || a.isOuter() != b.isOuter() ||
      (a.split == nullptr) != (b.split == nullptr) ||
      a.above.size() != b.above.size()) {
    return false;
  }
  for (size_t i = 0; i < a.above.size(); ++i) {
    if (!sameExtent(a.above[i]->extent(), b.above[i]->extent())) {
      return false;
    }
  }
  return true;
}

std::vector<EvenSplit> evenSplitsNeeded(const TensorView* tv) {
  std::vector<EvenSplit> result;
  for (ParallelType pt : kDeviceParallelTypes) {
    ParallelAxis pa = findParallelAxis(tv, pt, tv->logical());
    if (!pa || pa.split == nullptr) {
      continue;
    }
    // Every split from the tensor axis down to the device split.
    IterDomain* id = pa.loop;
    while (id != pa.source) {
      auto* split = static_cast<Split*>(id->definition());
      const bool outer = split->outer() == id;
      result.push_back(
          {split->in()->extent(),
           outer ? split->outer()->extent() : split->inner()->extent(),
           split->in()});
      id = split->in();
    }
  }
  return result;
}

bool splitsEvenly(const ParallelAxis& pa, const Scalar* extent) {
  // The splits from the source down to the loop axis, outermost first.
  std::vector<const Split*> chain;
  for (IterDomain* id = pa.loop; id != pa.source;) {
    const auto* s = static_cast<const Split*>(id->definition());
    chain.insert(chain.begin(), s);
    id = s->in();
  }
  if (!extent->isConst()) {
    return true;
  }
  int64_t e = extent->value();
  for (size_t i = 0; i < chain.size(); ++i) {
    const Split* s = chain[i];
    if (!s->factor()->isConst()) {
      return true;
    }
    const int64_t f = s->factor()->value();
    if (f <= 0 || e % f != 0) {
      return false;
    }
    // On to the part the chain continues in: the split's factor is the
    // extent of its outer part (outer split) or of its inner part.
    const IterDomain* next =
        i + 1 < chain.size() ? chain[i + 1]->in() : pa.loop;
    const bool outer = s->outer() == next;
    e = outer != s->innerSplit() ? f : e / f;
  }
  return true;
}

IterDomain* mappedAxis(
    const TensorOp* op,
    const TensorView* producer,
    const TensorView* consumer,
    const IterDomain* producer_axis) {
  for (const AxisMapping& m : op->mapProducerToConsumer(producer, consumer)) {
    if (m.producer == producer_axis) {
      return m.consumer;
    }
  }
  return nullptr;
}

bool isDeviceSum(const TensorOp* op) {
  if (opInfo(op->type()).family != OpFamily::kReduction) {
    return false;
  }
  const TensorView* producer = op->tensorInputs().at(0);
  bool reduces = false;
  for (const AxisMapping& m : op->mapProducerToConsumer(producer)) {
    if (!m.consumer->isReduction()) {
      continue;
    }
    reduces = true;
    // The reduced producer axis must itself be the device axis (the
    // device part of an rFactored axis), not a sharded axis with a local
    // remainder.
    if (!m.producer->isDeviceParallel()) {
      return false;
    }
  }
  return reduces;
}

bool isResharding(const TensorOp* op, const TensorView* consumer) {
  // An output without axes, or one that takes nothing from its producers'
  // data (the philox state of attention), moves nothing.
  if (consumer->logical().empty() || !op->takesOperandData(consumer)) {
    return false;
  }
  for (ParallelType pt : kDeviceParallelTypes) {
    IterDomain* id = loopAxis(consumer, pt);
    if (id != nullptr && id->isReduction()) {
      return true;
    }
  }
  for (TensorView* producer : op->tensorInputs()) {
    if (producer->deviceMesh() != consumer->deviceMesh()) {
      return true;
    }
    const std::vector<AxisMapping> map =
        op->mapProducerToConsumer(producer, consumer);
    auto indexes = [&](const IterDomain* c) {
      return std::any_of(map.begin(), map.end(), [&](const AxisMapping& m) {
        return m.consumer == c;
      });
    };
    for (ParallelType pt : kDeviceParallelTypes) {
      ParallelAxis p = findParallelAxis(producer, pt, producer->logical());
      if (p && p.source->isReduction()) {
        // Reduced over these devices: every device holds whole values.
        p = {};
      }
      ParallelAxis c = findParallelAxis(consumer, pt, consumer->maybeRoot());
      if (!p) {
        // A replicated producer feeds a sharded consumer axis it indexes:
        // each device must take its part.
        if (c && indexes(c.source)) {
          return true;
        }
        continue;
      }
      IterDomain* mapped = mappedAxis(op, producer, consumer, p.source);
      if (mapped == nullptr || !c || c.source != mapped || !sameLayout(p, c)) {
        return true;
      }
    }
  }
  return false;
}

bool isResharding(const TensorOp* op) {
  for (TensorView* out : op->outs()) {
    if (isResharding(op, out)) {
      return true;
    }
  }
  return false;
}

} // namespace mdfuser
