// SPDX-License-Identifier: MIT
#pragma once

#include <memory>
#include <string>

#include "ir/fusion.h"
#include "ir/ops.h"

namespace mdfuser::test {

// The MLP block of examples/transformer_blocks.py on `d` devices:
//   y = linear(gelu_tanh(linear(x, w1, b1)), w2, b2)
// for x [t, h] (t symbolic), w1 [4h, h] and b1 [4h] sharded on out_features,
// w2 [h, 4h] sharded on in_features. `mode` "tp" keeps x and y replicated;
// "sp" splits them along t. With s > 1 the tokens are also split into s
// stream chunks (each chunk split across the devices for SP).
inline std::unique_ptr<Fusion> makeMlp(
    int64_t h, int64_t d, int64_t s, const std::string& mode) {
  auto fusion = std::make_unique<Fusion>();
  const DataType dtype = DataType::BFloat16;
  TensorView* x = fusion->defineTensor({-1, h}, {}, dtype);
  TensorView* w1 = fusion->defineTensor({4 * h, h}, {}, dtype);
  TensorView* b1 = fusion->defineTensor({4 * h}, {}, dtype);
  TensorView* w2 = fusion->defineTensor({h, 4 * h}, {}, dtype);
  TensorView* b2 = fusion->defineTensor({h}, {}, dtype);
  // gelu of BFloat16 is Float; cast back as the example does (FoldCasts
  // folds it into the gelu).
  TensorView* act = unaryOp(OpType::GeluTanh, linear(x, w1, b1));
  if (act->dtype() != dtype) {
    act = cast(act, dtype);
  }
  TensorView* y = linear(act, w2, b2);
  fusion->addOutput(y);

  std::vector<int64_t> devices;
  for (int64_t i = 0; i < d; ++i) {
    devices.push_back(i);
  }
  const DeviceMesh mesh(devices);
  for (TensorView* tv : {x, w1, b1, w2, b2}) {
    tv->setDeviceMesh(mesh);
  }
  auto shard = [d](TensorView* tv, int64_t axis) {
    tv->outerSplit(axis, d);
    tv->parallelize(axis, ParallelType::DIDx);
  };
  shard(w1, 0);
  shard(b1, 0);
  shard(w2, 1);
  auto tokens = [&](TensorView* tv) {
    int64_t axis = 0;
    if (s > 1) {
      tv->outerSplit(0, s);
      tv->parallelize(0, ParallelType::Stream);
      axis = 1;
    }
    if (mode == "sp") {
      shard(tv, axis);
    }
  };
  tokens(x);
  if (mode == "sp") {
    y->setDeviceMesh(mesh);
    tokens(y);
  }
  return fusion;
}

} // namespace mdfuser::test
