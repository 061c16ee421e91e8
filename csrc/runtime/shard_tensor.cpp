// SPDX-License-Identifier: MIT
#include "runtime/shard_tensor.h"

#include <algorithm>

#include "ir/errors.h"
#include "ir/scalar_eval.h"
#include "multidevice/sharding.h"
#include "passes/choose_stream_chunks.h"

namespace mdfuser {

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
    // The innermost device axis on this tensor axis; the splits above it.
    ParallelAxis innermost;
    for (ParallelType pt : deviceParallelTypes(tv)) {
      ParallelAxis pa = findParallelAxis(tv, pt, tv->logical());
      if (pa && pa.source == logical[a] &&
          (!innermost || pa.above.size() > innermost.above.size())) {
        innermost = pa;
      }
    }
    if (!innermost) {
      continue;
    }
    // The axis's elements laid out by the splits down to the device axis:
    // [above..., device, rest] when the device axis is the outer part of
    // its split, [above..., outer, device] when it is the inner part (each
    // device then holds every d-th element).
    std::vector<IterDomain*> chain = innermost.above;
    if (!innermost.isOuter()) {
      chain.push_back(innermost.split->outer());
    }
    chain.push_back(innermost.loop);
    const int64_t n = shard.size(static_cast<int64_t>(a));
    std::vector<int64_t> factors;
    int64_t product = 1;
    for (IterDomain* id : chain) {
      factors.push_back(extents.evaluate(id->extent()));
      product *= factors.back();
    }
    MDF_USER_CHECK(
        product > 0 && n % product == 0,
        "shard_tensor: axis ",
        a,
        " has size ",
        n,
        ", which does not split evenly into the ",
        product,
        " parts of ",
        tv->toString());
    // View the axis as [f_1, ..., f_k, rest] and keep, for each device
    // factor, the coordinate of `device`.
    std::vector<int64_t> shape(shard.sizes().begin(), shard.sizes().end());
    std::vector<int64_t> split_shape(shape.begin(), shape.begin() + a);
    split_shape.insert(split_shape.end(), factors.begin(), factors.end());
    split_shape.push_back(n / product);
    split_shape.insert(split_shape.end(), shape.begin() + a + 1, shape.end());
    at::Tensor viewed = shard.contiguous().view(split_shape);
    int64_t local = n;
    for (size_t j = 0; j < chain.size(); ++j) {
      if (!chain[j]->isDeviceParallel()) {
        continue;
      }
      const std::vector<int64_t> team =
          mesh.team(device, chain[j]->parallelType());
      const int64_t index =
          std::find(team.begin(), team.end(), device) - team.begin();
      viewed = viewed.narrow(static_cast<int64_t>(a + j), index, 1);
      local /= factors[j];
    }
    shape[a] = local;
    shard = viewed.reshape(shape);
  }
  return shard;
}

} // namespace mdfuser
