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

} // namespace mdfuser::test
