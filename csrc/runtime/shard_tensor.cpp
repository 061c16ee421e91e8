// SPDX-License-Identifier: MIT
#include "runtime/shard_tensor.h"

#include <algorithm>
#include <optional>

#include <ATen/ops/arange.h>

#include "ir/errors.h"
#include "ir/scalar_eval.h"
#include "multidevice/sharding.h"
#include "passes/choose_stream_chunks.h"

namespace mdfuser {

namespace {

// The loop axes of `tv` that splits cut from its logical axis `axis`, in
// the order its elements are laid out in (a split's outer part before its
// inner part, at every level): [dy, rows, dx, cols] for an axis cut by an
// inner split, then an outer split of each part. Empty when a loop axis
// comes from it otherwise (a merge).
std::vector<IterDomain*> leavesInLayoutOrder(
    const TensorView* tv, const IterDomain* axis) {
  const std::vector<IterDomain*>& logical = tv->logical();
  const int64_t number =
      std::find(logical.begin(), logical.end(), axis) - logical.begin();
  std::vector<std::pair<std::vector<int64_t>, IterDomain*>> leaves;
  for (IterDomain* id : tv->loop()) {
    std::optional<std::vector<int64_t>> place = layoutPlace(tv, id);
    if (!place.has_value()) {
      return {}; // from a merge, perhaps of this axis
    }
    if (place->front() == number) {
      leaves.emplace_back(std::move(*place), id);
    }
  }
  std::sort(leaves.begin(), leaves.end(), [](const auto& a, const auto& b) {
    return a.first < b.first;
  });
  std::vector<IterDomain*> result;
  for (const auto& leaf : leaves) {
    result.push_back(leaf.second);
  }
  return result;
}

// `t` with its axis `dim`, the whole of tv's logical axis `axis`, cut to
// the elements `device` holds: the axis viewed as its loop axes in layout
// order, each device-parallel one narrowed to the device's place in its
// team. Within a chain of splits that is a block, [above..., device,
// rest]; with the device axis the inner part of its split, every d-th
// element; with device axes on both parts of a split (a vector sharded
// across a 2-D mesh), strided blocks.
at::Tensor narrowToDevice(
    const at::Tensor& t,
    int64_t dim,
    const TensorView* tv,
    const IterDomain* axis,
    int64_t device,
    const ScalarEvaluator& extents) {
  const std::vector<IterDomain*> leaves = leavesInLayoutOrder(tv, axis);
  const bool sharded =
      std::any_of(leaves.begin(), leaves.end(), [](const IterDomain* id) {
        return id->isDeviceParallel();
      });
  if (!sharded) {
    for (ParallelType pt : deviceParallelTypes(tv)) {
      // A merge on a sharded axis: findParallelAxis says what is refused.
      (void)findParallelAxis(tv, pt, tv->logical());
    }
    return t;
  }
  const DeviceMesh& mesh = *tv->deviceMesh();
  const int64_t n = t.size(dim);
  std::vector<int64_t> factors;
  int64_t product = 1;
  for (IterDomain* id : leaves) {
    factors.push_back(extents.evaluate(id->extent()));
    product *= factors.back();
  }
  MDF_USER_CHECK(
      product == n,
      "shard_tensor: axis ",
      dim,
      " has size ",
      n,
      ", which does not split evenly into the parts of ",
      tv->toString());
  std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
  std::vector<int64_t> split_shape(shape.begin(), shape.begin() + dim);
  split_shape.insert(split_shape.end(), factors.begin(), factors.end());
  split_shape.insert(split_shape.end(), shape.begin() + dim + 1, shape.end());
  at::Tensor viewed = t.contiguous().view(split_shape);
  int64_t local = n;
  for (size_t j = 0; j < leaves.size(); ++j) {
    if (!leaves[j]->isDeviceParallel()) {
      continue;
    }
    const std::vector<int64_t> team =
        mesh.team(device, leaves[j]->parallelType());
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
