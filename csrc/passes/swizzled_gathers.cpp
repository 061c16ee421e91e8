// SPDX-License-Identifier: MIT
#include "passes/swizzled_gathers.h"

#include <algorithm>

#include "ir/errors.h"
#include "ir/ops.h"
#include "multidevice/sharding.h"

namespace mdfuser {

namespace {

int64_t position(const std::vector<IterDomain*>& ids, const IterDomain* id) {
  return std::find(ids.begin(), ids.end(), id) - ids.begin();
}

// User error unless `tv`'s swizzled loop axis `id` is the stream split of a
// gather: `tv` = set(x), x split across `pt` along the axis `id` splits,
// into as many parts, and `tv` replicated along `pt`.
void checkSwizzledGather(const TensorView* tv, const IterDomain* id) {
  const ParallelType pt = *id->swizzle();
  const int64_t k = position(tv->loop(), id);
  MDF_USER_CHECK(
      id->isStream(),
      "swizzle1d: axis ",
      k,
      " of ",
      tv->toString(),
      " is swizzled on ",
      parallelTypeName(pt),
      " but not parallelized on ParallelType.stream; a swizzled axis is "
      "the stream split of a gather (axis(",
      k,
      ").parallelize(ParallelType.stream))");
  const auto* set = dynamic_cast<const LoadStoreOp*>(tv->definition());
  const ParallelAxis stream =
      findParallelAxis(tv, ParallelType::Stream, tv->maybeRoot());
  auto expected = [&] {
    return std::string(
               ": mdfuser takes a swizzle1d as the gather of a set whose input "
               "is "
               "split across ") +
           std::string(parallelTypeName(pt)) +
           " along the same axis into as many parts (the input of the "
           "column-parallel linear), into a tensor replicated along " +
           std::string(parallelTypeName(pt));
  };
  MDF_USER_CHECK(
      set != nullptr,
      "swizzle1d: ",
      tv->toString(),
      " is not defined by a set",
      expected());
  MDF_USER_CHECK(
      loopAxis(tv, pt) == nullptr,
      "swizzle1d: ",
      tv->toString(),
      " is itself split across ",
      parallelTypeName(pt),
      expected());
  const TensorView* x = set->in();
  const ParallelAxis device = findParallelAxis(x, pt, x->logical());
  bool same_axis = false;
  if (device) {
    for (const AxisMapping& m : set->mapProducerToConsumer(x, tv)) {
      same_axis = same_axis || (m.exact && m.producer == device.source &&
                                m.consumer == stream.source);
    }
  }
  const Scalar* parts = id->extent();
  MDF_USER_CHECK(
      same_axis && device.isOuter() && device.above.empty() &&
          stream.isOuter() && stream.above.empty() && parts->isConst() &&
          device.parts()->isConst() &&
          parts->value() == device.parts()->value(),
      "swizzle1d: axis ",
      k,
      " of ",
      tv->toString(),
      " (",
      parts->toString(),
      " stream parts) does not match the split of its input ",
      x->toString(),
      " across ",
      parallelTypeName(pt),
      expected());
}

} // namespace

bool hasSwizzledGather(const TensorView* tv) {
  return std::any_of(tv->loop().begin(), tv->loop().end(), [](const auto* id) {
    return id->swizzle().has_value();
  });
}

void prepareSwizzledGathers(Fusion* fusion) {
  for (TensorView* tv : fusion->allTensors()) {
    for (IterDomain* id : tv->loop()) {
      if (!id->swizzle().has_value()) {
        continue;
      }
      checkSwizzledGather(tv, id);
      // The ring's steps take the place of the stream loop.
      id->parallelize(ParallelType::Serial);
    }
  }
}

} // namespace mdfuser
