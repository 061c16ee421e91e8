// SPDX-License-Identifier: MIT
#include "multidevice/validate_schedule.h"

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
    ParallelAxis axis = findParallelAxis(tv, pt, tv->logical());
    MDF_USER_CHECK(
        axis.split == nullptr || axis.split->outer() == axis.loop,
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
    Scalar* extent = axis.source->extent();
    Scalar* part = axis.partExtent();
    if (extent->isConst() && part->isConst()) {
      MDF_USER_CHECK(
          extent->value() == devices * part->value(),
          "axis ",
          axis.source->toString(),
          " of ",
          tv->toString(),
          " has extent ",
          extent->value(),
          ", which is not divisible into ",
          devices,
          " equal shards for ",
          parallelTypeName(pt),
          " of ",
          mesh.toString());
    }
  }
}

void validateStreamAxis(const TensorView* tv) {
  ParallelAxis axis = findParallelAxis(tv, ParallelType::Stream, tv->logical());
  if (!axis) {
    return;
  }
  MDF_USER_CHECK(
      axis.split == nullptr || axis.split->outer() == axis.loop,
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

} // namespace

void validateSchedule(const Fusion& fusion) {
  const TensorView* with_mesh = nullptr;
  for (const TensorView* tv : fusion.allTensors()) {
    if (tv->hasDeviceMesh()) {
      with_mesh = tv;
      break;
    }
  }
  for (const TensorView* tv : fusion.allTensors()) {
    validateDeviceAxes(tv);
    validateStreamAxis(tv);
    if (with_mesh == nullptr || !tv->hasDeviceMesh()) {
      continue;
    }
    MDF_USER_CHECK(
        *tv->deviceMesh() == *with_mesh->deviceMesh(),
        tv->toString(),
        " and ",
        with_mesh->toString(),
        " are on different device meshes; mdfuser supports one mesh per "
        "fusion");
  }
  if (with_mesh != nullptr) {
    for (const TensorView* tv : fusion.inputs()) {
      MDF_USER_CHECK(
          tv->hasDeviceMesh(),
          "fusion input ",
          tv->toString(),
          " has no device mesh while ",
          with_mesh->toString(),
          " has one; call set_device_mesh on every input");
    }
  }
}

void validateReshardings(const Fusion& fusion) {
  for (const TensorOp* op : fusion.exprs()) {
    if (!isResharding(op)) {
      continue;
    }
    const bool single_input = dynamic_cast<const LoadStoreOp*>(op) != nullptr ||
                              dynamic_cast<const ReductionOp*>(op) != nullptr;
    MDF_USER_CHECK(
        single_input,
        "the inputs of ",
        op->opName(),
        " are sharded inconsistently:\n",
        op->toString(),
        "\nAxes that the operation maps to each other must be sharded on the "
        "same device parallel type (for example, shard the weight's "
        "in_features like the input's last axis)");
    chooseCommunication(op);
  }
}

} // namespace mdfuser
