// SPDX-License-Identifier: MIT
#include "multidevice/sharding.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ir/container.h"
#include "ir/errors.h"

namespace mdfuser {

namespace {

constexpr ParallelType kDeviceParallelTypes[] = {
    ParallelType::DIDx, ParallelType::DIDy, ParallelType::DIDz};

bool contains(const std::vector<IterDomain*>& ids, const IterDomain* id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
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

ParallelAxis findParallelAxis(
    const TensorView* tv,
    ParallelType pt,
    const std::vector<IterDomain*>& domain) {
  ParallelAxis result;
  result.loop = loopAxis(tv, pt);
  if (result.loop == nullptr) {
    return {};
  }
  // From the loop axis to the logical domain: at most one split.
  IterDomain* id = result.loop;
  if (!contains(tv->logical(), id)) {
    auto* split = dynamic_cast<Split*>(id->definition());
    MDF_USER_CHECK(
        split != nullptr && contains(tv->logical(), split->in()),
        "the ",
        parallelTypeName(pt),
        " axis ",
        result.loop->toString(),
        " of ",
        tv->toString(),
        " does not come from a single split of a tensor axis; parallelize "
        "an axis of the tensor or an output of one split of it");
    result.split = split;
    id = split->in();
  }
  // From the logical domain to `domain` when that is the root domain: the
  // splits an rFactor made.
  while (!contains(domain, id)) {
    auto* split = dynamic_cast<Split*>(id->definition());
    MDF_CHECK(
        split != nullptr,
        id->toString(),
        " of ",
        tv->toString(),
        " does not derive from the requested domain");
    if (result.split == nullptr) {
      result.split = split;
    }
    id = split->in();
  }
  result.source = id;
  return result;
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
  for (ParallelType pt : deviceParallelTypes(tv)) {
    ParallelAxis axis = findParallelAxis(tv, pt, tv->logical());
    auto it = std::find(logical.begin(), logical.end(), axis.source);
    if (it != logical.end()) {
      result[it - logical.begin()] = pt;
    }
  }
  return result;
}

std::vector<Scalar*> localExtents(const TensorView* tv) {
  const std::vector<IterDomain*> logical = tv->logicalNoReductions();
  std::vector<Scalar*> result;
  for (IterDomain* id : logical) {
    result.push_back(id->extent());
  }
  for (ParallelType pt : deviceParallelTypes(tv)) {
    ParallelAxis axis = findParallelAxis(tv, pt, tv->logical());
    auto it = std::find(logical.begin(), logical.end(), axis.source);
    if (it != logical.end()) {
      result[it - logical.begin()] = axis.partExtent();
    }
  }
  return result;
}

StreamChunk streamChunk(const TensorView* tv, Scalar* index) {
  ParallelAxis axis = findParallelAxis(tv, ParallelType::Stream, tv->logical());
  MDF_CHECK(axis, tv->toString(), " has no stream axis");
  const std::vector<IterDomain*> logical = tv->logicalNoReductions();
  auto it = std::find(logical.begin(), logical.end(), axis.source);
  MDF_CHECK(it != logical.end(), "stream axis of a reduction");
  const int64_t pos = it - logical.begin();
  Scalar* extent = localExtents(tv)[pos];
  MDF_CHECK(
      extent == axis.source->extent(),
      "the stream axis of ",
      tv->toString(),
      " is also sharded across devices");
  Scalar* chunk = axis.partExtent();
  // Clamping the start keeps it a valid offset when trailing chunks are
  // empty (more chunks than rows).
  Scalar* start = min(mul(index, chunk), extent);
  Scalar* length = min(chunk, sub(extent, start));
  return {pos, start, length};
}

bool isResharding(const TensorOp* op) {
  const TensorView* consumer = op->out();
  for (TensorView* producer : op->tensorInputs()) {
    if (producer->deviceMesh() != consumer->deviceMesh()) {
      return true;
    }
    std::unordered_map<IterDomain*, IterDomain*> p2c;
    std::unordered_set<IterDomain*> indexed;
    for (auto [p, c] : op->mapProducerToConsumer(producer)) {
      p2c[p] = c;
      indexed.insert(c);
    }
    for (ParallelType pt : kDeviceParallelTypes) {
      ParallelAxis p_axis = findParallelAxis(producer, pt, producer->logical());
      ParallelAxis c_axis =
          findParallelAxis(consumer, pt, consumer->maybeRoot());
      IterDomain* mapped = nullptr;
      if (p_axis) {
        auto it = p2c.find(p_axis.source);
        mapped = it == p2c.end() ? nullptr : it->second;
      }
      // A consumer axis this producer does not index (the out_features of
      // a linear, for its input) puts no requirement on it: every device
      // holds the whole producer along it.
      IterDomain* c_source =
          c_axis && indexed.count(c_axis.source) != 0 ? c_axis.source : nullptr;
      if (mapped != c_source) {
        return true;
      }
    }
  }
  for (ParallelType pt : kDeviceParallelTypes) {
    IterDomain* id = loopAxis(consumer, pt);
    if (id != nullptr && id->isReduction()) {
      return true;
    }
  }
  return false;
}

} // namespace mdfuser
