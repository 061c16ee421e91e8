// SPDX-License-Identifier: MIT
#include "runtime/shard_tensor.h"

#include <algorithm>

#include <ATen/ops/arange.h>

#include "ir/errors.h"
#include "ir/scalar_eval.h"
#include "multidevice/sharding.h"
#include "passes/choose_stream_chunks.h"

namespace mdfuser {

namespace {

// `t` with its axis `dim`, the whole of tv's logical axis `axis`, cut to
// the elements `device` holds.
at::Tensor narrowToDevice(
    const at::Tensor& t,
    int64_t dim,
    const TensorView* tv,
    const IterDomain* axis,
    int64_t device,
    const ScalarEvaluator& extents) {
  // The innermost device axis on this tensor axis; the splits above it.
  ParallelAxis innermost;
  for (ParallelType pt : deviceParallelTypes(tv)) {
    ParallelAxis pa = findParallelAxis(tv, pt, tv->logical());
    if (pa && pa.source == axis &&
        (!innermost || pa.above.size() > innermost.above.size())) {
      innermost = pa;
    }
  }
  if (!innermost) {
    return t;
  }
  const DeviceMesh& mesh = *tv->deviceMesh();
  // The axis's elements laid out by the splits down to the device axis:
  // [above..., device, rest] when the device axis is the outer part of
  // its split, [above..., outer, device] when it is the inner part (each
  // device then holds every d-th element).
  std::vector<IterDomain*> chain = innermost.above;
  if (!innermost.isOuter()) {
    chain.push_back(innermost.split->outer());
  }
  chain.push_back(innermost.loop);
  const int64_t n = t.size(dim);
  std::vector<int64_t> factors;
  int64_t product = 1;
  for (IterDomain* id : chain) {
    factors.push_back(extents.evaluate(id->extent()));
    product *= factors.back();
  }
  MDF_USER_CHECK(
      product > 0 && n % product == 0,
      "shard_tensor: axis ",
      dim,
      " has size ",
      n,
      ", which does not split evenly into the ",
      product,
      " parts of ",
      tv->toString());
  // View the axis as [f_1, ..., f_k, rest] and keep, for each device
  // factor, the coordinate of `device`.
  std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
  std::vector<int64_t> split_shape(shape.begin(), shape.begin() + dim);
  split_shape.insert(split_shape.end(), factors.begin(), factors.end());
  split_shape.push_back(n / product);
  split_shape.insert(split_shape.end(), shape.begin() + dim + 1, shape.end());
  at::Tensor viewed = t.contiguous().view(split_shape);
  int64_t local = n;
  for (size_t j = 0; j < chain.size(); ++j) {
    if (!chain[j]->isDeviceParallel()) {
      continue;
    }
    const std::vector<int64_t> team =
        mesh.team(device, chain[j]->parallelType());
    const int64_t index =
        std::find(team.begin(), team.end(), device) - team.begin();
    viewed = viewed.narrow(dim + static_cast<int64_t>(j), index, 1);
    local /= factors[j];
  }
  shape[dim] = local;
  return viewed.reshape(shape);
}

} // namespace

at::Tensor shardTensor(
    const at::Tensor& tensor, const TensorView* tv, int64_t device) {
  const std::vector<IterDomain*> logical = tv->logicalNoReductions();
  MDF_USER_CHECK(
      tensor.dim() == static_cast<int64_t>(logical.size()),
      "shard_tensor: the tensor has ",
      tensor.dim(),
      " dimensions but ",
      tv->toString(),
      " has ",
      logical.size());
  if (!tv->hasDeviceMesh()) {
    return tensor;
  }
  checkLayoutNeedsNoChosenCount(tv);
  const DeviceMesh& mesh = *tv->deviceMesh();
  if (!mesh.has(device)) {
    device = mesh.devices().front();
  }
  ScalarEvaluator extents;
  for (size_t a = 0; a < logical.size(); ++a) {
    const Scalar* e = logical[a]->extent();
    if (e->role() == Scalar::Role::kSymbol && !extents.isBound(e)) {
      extents.bind(e, tensor.size(static_cast<int64_t>(a)));
    }
  }

  at::Tensor shard = tensor;
  for (size_t a = 0; a < logical.size(); ++a) {
    shard = narrowToDevice(
        shard, static_cast<int64_t>(a), tv, logical[a], device, extents);
  }
  return shard;
}

std::vector<int64_t> heldIndices(
    const TensorView* tv,
    size_t axis,
    int64_t extent,
    int64_t device,
    const ScalarEvaluator& extents) {
  const std::vector<IterDomain*> logical = tv->logicalNoReductions();
  MDF_CHECK_LT(axis, logical.size());
  std::vector<int64_t> result;
  if (!tv->hasDeviceMesh()) {
    for (int64_t i = 0; i < extent; ++i) {
      result.push_back(i);
    }
    return result;
  }
  if (!tv->deviceMesh()->has(device)) {
    device = tv->deviceMesh()->devices().front();
  }
  const at::Tensor held = narrowToDevice(
      at::arange(extent, at::kLong), 0, tv, logical[axis], device, extents);
  const int64_t* data = held.const_data_ptr<int64_t>();
  return {data, data + held.numel()};
}

} // namespace mdfuser
