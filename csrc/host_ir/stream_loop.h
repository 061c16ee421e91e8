// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "host_ir/host_ir_container.h"
#include "ir/fusion.h"
#include "multidevice/sharding.h"

namespace mdfuser::hir {

// A view of `tv` with the same domains, for ShardByStream and ShardByDevice.
TensorView* viewOf(HostIrContainer& hic, const TensorView* tv);

// A Stream loop being filled (lowering's Segment of `parts` chunks): its
// operations and the chunk views created for it.
class StreamLoop {
 public:
  StreamLoop(
      HostIrContainer& hic,
      Fusion& fusion,
      Scalar* parts,
      const std::vector<TensorOp*>& segment);

  ForLoop* loop() const {
    return loop_;
  }
  Scope& body() {
    return loop_->body();
  }
  // Whether `tv` lives only inside the loop, one chunk at a time.
  bool isChunkLocal(const TensorView* tv) const {
    return chunk_local_.count(tv) != 0;
  }

  // What an operation in the loop reads or writes in place of `tv`: `tv`
  // itself when it lives only inside the loop or is not cut by the loop,
  // else a view of this iteration's chunk. A tensor without a stream split
  // of its own is cut like `consumer`, the operation's output, along the
  // axis it maps to `consumer`'s stream axis.
  TensorView* operand(
      TensorView* tv, const TensorOp* op, const TensorView* consumer);

 private:
  // The view of `tv` keyed by `key` (-1: its own stream split; else the
  // axis cut like a consumer's), made at first use from `chunk_of`.
  TensorView* view(
      TensorView* tv,
      int64_t key,
      const std::function<StreamChunk()>& chunk_of);

  HostIrContainer& hic_;
  ForLoop* loop_;
  std::unordered_set<const TensorView*> chunk_local_;
  std::map<std::pair<const TensorView*, int64_t>, TensorView*> views_;
};

} // namespace mdfuser::hir
