// SPDX-License-Identifier: MIT
#pragma once

#include <vector>

#include "ir/ops.h"
#include "ir/tensor_view.h"

namespace mdfuser {

// How one parallel type is applied to a tensor: the loop axis that carries
// it, the domain axis it comes from and the split between them (nullptr when
// the domain axis itself is parallelized). mdfuser supports parallel loop
// axes that are a domain axis or a direct output of one split of it.
struct ParallelAxis {
  IterDomain* loop = nullptr;
  IterDomain* source = nullptr;
  Split* split = nullptr;

  explicit operator bool() const {
    return loop != nullptr;
  }
  // Extent of the parallel loop axis: number of devices or of stream chunks.
  Scalar* parts() const {
    return loop->extent();
  }
  // Extent of one part: the other output of the split, or 1.
  Scalar* partExtent() const;
};

// The loop axis of `tv` parallelized on `pt`, or nullptr.
IterDomain* loopAxis(const TensorView* tv, ParallelType pt);

// Where `pt` is applied to `tv`, traced back to `domain` (tv's logical or
// root domain). Empty when `tv` has no `pt` axis. User error when the loop
// axis is derived in a way mdfuser does not support.
ParallelAxis findParallelAxis(
    const TensorView* tv,
    ParallelType pt,
    const std::vector<IterDomain*>& domain);

// The device parallel types `tv` is sharded on, in the order x, y, z.
std::vector<ParallelType> deviceParallelTypes(const TensorView* tv);
bool isSharded(const TensorView* tv);

// Per non-reduction logical axis of `tv`, its extent in one device's shard:
// one part of its split when the axis is split across devices, 1 when the
// axis itself is device-parallel, the global extent otherwise.
std::vector<Scalar*> localExtents(const TensorView* tv);

// Per non-reduction logical axis of `tv`, the device parallel type it is
// sharded on, or Serial.
std::vector<ParallelType> shardingOfLogicalAxes(const TensorView* tv);

// The part of `tv`'s stream-split axis that iteration `index` of its stream
// loop covers: local axis `axis`, elements [start, start + length). The last
// chunks may be short or empty when the axis does not divide evenly.
struct StreamChunk {
  int64_t axis;
  Scalar* start;
  Scalar* length;
};
StreamChunk streamChunk(const TensorView* tv, Scalar* index);

// True when `op` moves data between devices: a producer and the consumer
// shard mapped axes differently, live on different meshes, or the consumer
// reduces over a device-parallel axis.
bool isResharding(const TensorOp* op);

} // namespace mdfuser
