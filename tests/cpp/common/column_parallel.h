// SPDX-License-Identifier: MIT
#pragma once

#include <memory>

#include "ir/fusion.h"
#include "ir/ops.h"

namespace mdfuser::test {

// The reference system's overlapped column-parallel linear: inp [t, h] and
// w [4h, h] split across `d` devices along their rows; g = set(inp), split
// into d stream chunks along the tokens (each one device's part) and, with
// `swizzle`, swizzled on mesh_x (the collective-permute form); out =
// linear(g, w), left for propagation. Sets *gathered to g when given.
inline std::unique_ptr<Fusion> makeColumnParallelLinear(
    int64_t h, int64_t d, bool swizzle, TensorView** gathered = nullptr) {
  auto fusion = std::make_unique<Fusion>();
  TensorView* inp = fusion->defineTensor({-1, h}, {}, DataType::Float);
  TensorView* w = fusion->defineTensor({4 * h, h}, {}, DataType::Float);
  TensorView* g = set(inp);
  fusion->addOutput(linear(g, w));
  std::vector<int64_t> devices;
  for (int64_t i = 0; i < d; ++i) {
    devices.push_back(i);
  }
  const DeviceMesh mesh(devices);
  for (TensorView* tv : {inp, w}) {
    tv->setDeviceMesh(mesh);
    tv->outerSplit(0, d);
    tv->parallelize(0, ParallelType::DIDx);
  }
  g->setDeviceMesh(mesh);
  g->outerSplit(0, d);
  if (swizzle) {
    g->swizzle1d(0, ParallelType::DIDx);
  }
  g->parallelize(0, ParallelType::Stream);
  if (gathered != nullptr) {
    *gathered = g;
  }
  return fusion;
}

// y = linear(x, w[, b]) with x [t, h] split across `d` devices along its
// tokens and w [4h, h] (and b [4h]) along out_features, all of `dtype`:
// lowering gathers x for the linear (sequence parallelism before a
// column-parallel linear). With s > 1 the tokens are also split into s
// stream chunks (each chunk split across the devices), and so are y's,
// whose columns are split across the devices as the weight's rows.
inline std::unique_ptr<Fusion> makeGatheredLinear(
    int64_t h, int64_t d, int64_t s, DataType dtype, bool bias) {
  auto fusion = std::make_unique<Fusion>();
  TensorView* x = fusion->defineTensor({-1, h}, {}, dtype);
  TensorView* w = fusion->defineTensor({4 * h, h}, {}, dtype);
  TensorView* b = bias ? fusion->defineTensor({4 * h}, {}, dtype) : nullptr;
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
  for (TensorView* tv : {x, w, b}) {
    if (tv != nullptr) {
      tv->setDeviceMesh(mesh);
    }
  }
  if (s > 1) {
    y->setDeviceMesh(mesh);
    for (TensorView* tv : {x, y}) {
      tv->outerSplit(0, s);
      tv->parallelize(0, ParallelType::Stream);
    }
  }
  shard(x, s > 1 ? 1 : 0);
  if (s > 1) {
    shard(y, 2);
  }
  shard(w, 0);
  if (b != nullptr) {
    shard(b, 0);
  }
  return fusion;
}

} // namespace mdfuser::test
