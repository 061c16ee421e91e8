// SPDX-License-Identifier: MIT
#pragma once

#include <memory>

#include "ir/fusion.h"
#include "ir/ops.h"

namespace mdfuser::test {

// For `s`: the number of stream chunks is mdfuser's to choose.
inline constexpr int64_t kChosenChunks = 0;

// The row-parallel linear of the architecture guide: inp [t, 4h] with t
// symbolic, split into `s` stream chunks along t and across `d` devices along
// 4h; w [h, 4h] split across devices along 4h; out = linear(inp, w), left for
// propagation.
inline std::unique_ptr<Fusion> makeRowParallelLinear(
    int64_t h, int64_t d, int64_t s, DataType dtype = DataType::BFloat16) {
  auto fusion = std::make_unique<Fusion>();
  TensorView* inp = fusion->defineTensor({-1, 4 * h}, {}, dtype);
  TensorView* w = fusion->defineTensor({h, 4 * h}, {}, dtype);
  TensorView* out = linear(inp, w);
  fusion->addOutput(out);

  std::vector<int64_t> devices;
  for (int64_t i = 0; i < d; ++i) {
    devices.push_back(i);
  }
  const DeviceMesh mesh(devices);
  inp->setDeviceMesh(mesh);
  w->setDeviceMesh(mesh);
  if (s == kChosenChunks) {
    inp->outerSplitChosen(0);
  } else {
    inp->outerSplit(0, s);
  }
  inp->parallelize(0, ParallelType::Stream);
  inp->outerSplit(2, d);
  inp->parallelize(2, ParallelType::DIDx);
  w->outerSplit(1, d);
  w->parallelize(1, ParallelType::DIDx);
  return fusion;
}

// linear(inp [t, 8], w [4, 8]) on `mesh`, in_features split across its
// mesh_x axis, without stream split.
inline std::unique_ptr<Fusion> makeShardedLinear(const DeviceMesh& mesh) {
  auto fusion = std::make_unique<Fusion>();
  TensorView* inp = fusion->defineTensor({-1, 8}, {}, DataType::Float);
  TensorView* w = fusion->defineTensor({4, 8}, {}, DataType::Float);
  fusion->addOutput(linear(inp, w));
  for (TensorView* tv : {inp, w}) {
    tv->setDeviceMesh(mesh);
    tv->outerSplit(1, mesh.size(ParallelType::DIDx));
    tv->parallelize(1, ParallelType::DIDx);
  }
  return fusion;
}

// y = linear(x, w[, b]) with x [t, 4h] and w [h, 4h] split across `d`
// devices along in_features (b [h] replicated), all of `dtype`, and y split
// across the devices along its tokens: lowering reduce-scatters the partial
// sums along the rows (a row-parallel linear before sequence parallelism;
// examples/ring_decomposition.py's linear_reduce_scatter). With s > 1 the
// tokens of x and y are also split into s stream chunks (each of y's cut
// across the devices).
inline std::unique_ptr<Fusion> makeScatteredLinear(
    int64_t h, int64_t d, int64_t s, DataType dtype, bool bias) {
  auto fusion = std::make_unique<Fusion>();
  TensorView* x = fusion->defineTensor({-1, 4 * h}, {}, dtype);
  TensorView* w = fusion->defineTensor({h, 4 * h}, {}, dtype);
  TensorView* b = bias ? fusion->defineTensor({h}, {}, dtype) : nullptr;
  TensorView* y = linear(x, w, b);
  fusion->addOutput(y);
  std::vector<int64_t> devices;
  for (int64_t i = 0; i < d; ++i) {
    devices.push_back(i);
  }
  const DeviceMesh mesh(devices);
  auto shard = [d](TensorView* tv, int64_t axis) {
    tv->outerSplit(axis, d);
    tv->parallelize(axis, ParallelType::DIDx);
  };
  for (TensorView* tv : {x, w, b, y}) {
    if (tv != nullptr) {
      tv->setDeviceMesh(mesh);
    }
  }
  if (s > 1) {
    for (TensorView* tv : {x, y}) {
      tv->outerSplit(0, s);
      tv->parallelize(0, ParallelType::Stream);
    }
  }
  shard(x, s > 1 ? 2 : 1);
  shard(w, 1);
  shard(y, s > 1 ? 1 : 0);
  return fusion;
}

} // namespace mdfuser::test
