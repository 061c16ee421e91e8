// SPDX-License-Identifier: MIT
#include "multidevice/validate_schedule.h"

#include <algorithm>

#include "ir/errors.h"
#include "ir/ops.h"
#include "multidevice/communication_type.h"
#include "multidevice/sharding.h"

namespace mdfuser {

namespace {

void validateDeviceAxes(const TensorView* tv) {
  for (ParallelType pt : deviceParallelTypes(tv)) {
    MDF_USER_CHECK(
        tv->hasDeviceMesh(),
        tv->toString(),
        " has an axis parallelized on ",
        parallelTypeName(pt),
        " but no device mesh; call set_device_mesh on it");
    const DeviceMesh& mesh = *tv->deviceMesh();
    const int64_t devices = mesh.size(pt);
    ParallelAxis axis = findParallelAxis(tv, pt, tv->maybeRoot());
    MDF_USER_CHECK(
        axis.isOuter(),
        "the ",
        parallelTypeName(pt),
        " axis ",
        axis.loop->toString(),
        " of ",
        tv->toString(),
        " is the inner part of a split, which would give each device a "
        "strided shard; parallelize the outer part instead");
    Scalar* parts = axis.parts();
    if (parts->isConst()) {
      MDF_USER_CHECK(
          parts->value() == devices,
          "the ",
          parallelTypeName(pt),
          " axis ",
          axis.loop->toString(),
          " of ",
          tv->toString(),
          " has ",
          parts->value(),
          " parts, but ",
          mesh.toString(),
          " has ",
          devices,
          " devices on ",
          parallelTypeName(pt),
          "; split by the number of devices");
    }
  }
  for (const EvenSplit& even : evenSplitsNeeded(tv)) {
    if (even.dividend->isConst() && even.divisor->isConst()) {
      MDF_USER_CHECK(
          even.dividend->value() % even.divisor->value() == 0,
          "axis ",
          even.axis->toString(),
          " of ",
          tv->toString(),
          " has extent ",
          even.dividend->value(),
          ", which is not divisible into ",
          even.divisor->value(),
          " equal parts; every split on the way to a device axis must "
          "divide evenly");
    }
  }
}

void validateStreamAxis(const TensorView* tv) {
  ParallelAxis axis = findParallelAxis(tv, ParallelType::Stream, tv->logical());
  if (!axis) {
    return;
  }
  MDF_USER_CHECK(
      axis.isOuter(),
      "the stream axis ",
      axis.loop->toString(),
      " of ",
      tv->toString(),
      " is the inner part of a split; parallelize the outer part, which "
      "counts the chunks");
  MDF_USER_CHECK(
      !axis.source->isReduction(),
      "the stream axis ",
      axis.loop->toString(),
      " of ",
      tv->toString(),
      " comes from a reduction axis; only iteration axes can be split "
      "across streams");
}

bool sameExtent(const Scalar* a, const Scalar* b) {
  return a == b || (a->isConst() && b->isConst() && a->value() == b->value());
}

// The device axes above a stream axis, as (parallel type, parts).
std::vector<std::pair<ParallelType, const Scalar*>> devicesAbove(
    const ParallelAxis& stream) {
  std::vector<std::pair<ParallelType, const Scalar*>> result;
  for (const IterDomain* id : stream.above) {
    if (id->isDeviceParallel()) {
      result.emplace_back(id->parallelType(), id->extent());
    }
  }
  return result;
}

// Inside a stream loop, iteration i of `op` reads chunk i of each producer
// that has a stream axis: the chunks must cover the same elements.
void validateStreamChunks(const TensorOp* op) {
  for (const TensorView* consumer : op->outs()) {
    ParallelAxis c =
        findParallelAxis(consumer, ParallelType::Stream, consumer->maybeRoot());
    if (!c) {
      continue;
    }
    for (const TensorView* producer : op->tensorInputs()) {
      ParallelAxis p =
          findParallelAxis(producer, ParallelType::Stream, producer->logical());
      if (!p) {
        continue;
      }
      const IterDomain* mapped = mappedAxis(op, producer, consumer, p.source);
      const auto p_above = devicesAbove(p);
      const auto c_above = devicesAbove(c);
      bool same_devices = p_above.size() == c_above.size();
      for (size_t i = 0; same_devices && i < p_above.size(); ++i) {
        same_devices = p_above[i].first == c_above[i].first &&
                       sameExtent(p_above[i].second, c_above[i].second);
      }
      MDF_USER_CHECK(
          mapped == c.source && sameExtent(p.parts(), c.parts()) &&
              same_devices,
          "the stream chunks of ",
          producer->toString(),
          " and ",
          consumer->toString(),
          " cover different elements in ",
          op->opName(),
          ": split the axis they share by the same number of streams, with "
          "any device split of it below (not above) the stream split, or "
          "with the same device split above it in both");
    }
  }
}

// Attention's dropout mask is drawn per call from one philox state, which
// sdpfa_fwd returns once: per stream chunk, each chunk would draw its own
// and the state returned would be the last chunk's.
void refuseDropoutPerStreamChunk(const TensorOp* op) {
  const auto* sdpa = dynamic_cast<const SdpaOp*>(op);
  if (sdpa == nullptr || sdpa->options().dropout_p == 0.0) {
    return;
  }
  for (const TensorView* tv : op->tensorInputs()) {
    MDF_USER_CHECK(
        !findParallelAxis(tv, ParallelType::Stream, tv->logical()),
        op->opName(),
        " with dropout_p=",
        sdpa->options().dropout_p,
        " cannot run per stream chunk (its philox state is one per call), but ",
        tv->toString(),
        " is split across streams; leave attention's operands unsplit or "
        "pass dropout_p=0");
  }
}

// A collective moves each device's part of the sharded axis as one block.
// With a serial split above the device split (non-outermost sharding: a
// device holds one run of every outer part), the blocks would land out of
// order, so such a move is refused rather than computed wrong.
void requireOutermostDeviceSplit(const TensorOp* op, const Resharding& r) {
  if (r.kind != Resharding::Kind::kCollective) {
    return;
  }
  const TensorView* producer = op->tensorInputs().at(0);
  const TensorView* consumer = op->out();
  for (const TensorView* tv : {producer, consumer}) {
    const ParallelAxis pa = findParallelAxis(
        tv, r.parallel_type, tv == producer ? tv->logical() : tv->maybeRoot());
    if (!pa || pa.source->isReduction()) {
      continue;
    }
    for (const IterDomain* above : pa.above) {
      MDF_USER_CHECK(
          above->isDeviceParallel() ||
              above->parallelType() == ParallelType::Stream,
          "the ",
          parallelTypeName(r.parallel_type),
          " axis ",
          pa.loop->toString(),
          " of ",
          tv->toString(),
          " lies below the serial split ",
          above->toString(),
          " (non-outermost sharding): mdfuser computes on such shards but "
          "cannot move them between devices yet (",
          r.toString(),
          " into ",
          consumer->toString(),
          "); keep the device split outermost, or split by streams instead");
    }
  }
}

} // namespace

void validateSchedule(const Fusion& fusion) {
  // Two tensors on different meshes, if any.
  const TensorView* with_mesh = nullptr;
  const TensorView* on_another = nullptr;
  for (const TensorView* tv : fusion.allTensors()) {
    if (!tv->hasDeviceMesh()) {
      continue;
    }
    if (with_mesh == nullptr) {
      with_mesh = tv;
    } else if (
        on_another == nullptr &&
        *tv->deviceMesh() != *with_mesh->deviceMesh()) {
      on_another = tv;
    }
  }
  for (const TensorView* tv : fusion.allTensors()) {
    validateDeviceAxes(tv);
    validateStreamAxis(tv);
  }
  if (on_another != nullptr) {
    // Which mesh an input without one would be replicated on is unclear.
    for (const TensorView* tv : fusion.inputs()) {
      MDF_USER_CHECK(
          tv->hasDeviceMesh(),
          "fusion input ",
          tv->toString(),
          " has no device mesh while ",
          with_mesh->toString(),
          " and ",
          on_another->toString(),
          " are on different meshes; call set_device_mesh on every input");
    }
  }
}

void requireEvenSplits(Fusion* fusion) {
  for (const TensorView* tv : fusion->allTensors()) {
    for (const EvenSplit& even : evenSplitsNeeded(tv)) {
      if (even.dividend->isConst() && even.divisor->isConst()) {
        continue;
      }
      fusion->addDivisibilityConstraint(
          even.dividend,
          even.divisor,
          "axis " + even.axis->toString() + " of T" +
              std::to_string(tv->name()) + ", split across devices,");
    }
  }
}

void validateReshardings(const Fusion& fusion) {
  for (const TensorOp* op : fusion.exprs()) {
    validateStreamChunks(op);
    refuseDropoutPerStreamChunk(op);
    if (!isResharding(op)) {
      continue;
    }
    const bool communication =
        (dynamic_cast<const LoadStoreOp*>(op) != nullptr || isDeviceSum(op)) &&
        op->tensorInputs().size() == 1;
    MDF_CHECK(
        communication,
        "the fusion passes left a compute operation that moves data between "
        "devices:\n",
        op->toString());
    requireOutermostDeviceSplit(op, chooseResharding(op));
  }
}

} // namespace mdfuser
