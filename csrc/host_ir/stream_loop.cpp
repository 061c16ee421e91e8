// SPDX-License-Identifier: MIT
#include "host_ir/stream_loop.h"

#include <algorithm>

#include "host_ir/stream_segments.h"
#include "ir/errors.h"
#include "ir/ops.h"

namespace mdfuser::hir {

TensorView* viewOf(HostIrContainer& hic, const TensorView* tv) {
  auto* view = hic.create<TensorView>(
      tv->logical(), tv->dtype(), tv->contiguity(), MemoryType::Local);
  view->setDomains(tv->root(), tv->logical(), tv->loop());
  if (tv->hasDeviceMesh()) {
    view->setDeviceMesh(*tv->deviceMesh());
  }
  return view;
}

StreamLoop::StreamLoop(
    HostIrContainer& hic,
    Fusion& fusion,
    Scalar* parts,
    const std::vector<TensorOp*>& segment)
    : hic_(hic),
      loop_(hic.create<ForLoop>(
          symbol(hic.ir()),
          constant(hic.ir(), 0),
          parts,
          ParallelType::Stream)) {
  std::unordered_set<const TensorOp*> in_segment(
      segment.begin(), segment.end());
  for (TensorOp* op : segment) {
    for (TensorView* out : op->outs()) {
      const bool used_outside =
          std::any_of(out->uses().begin(), out->uses().end(), [&](Expr* use) {
            return in_segment.count(dynamic_cast<TensorOp*>(use)) == 0;
          });
      if (!fusion.isOutput(out) && !used_outside) {
        chunk_local_.insert(out);
      }
    }
  }
}

TensorView* StreamLoop::operand(
    TensorView* tv, const TensorOp* op, const TensorView* consumer) {
  if (chunk_local_.count(tv) != 0) {
    return tv;
  }
  ParallelAxis own = findParallelAxis(tv, ParallelType::Stream, tv->logical());
  if (own) {
    return view(tv, -1, [&] { return streamChunk(tv, loop_->index()); });
  }
  ParallelAxis c =
      findParallelAxis(consumer, ParallelType::Stream, consumer->maybeRoot());
  if (!c || tv == consumer) {
    return tv;
  }
  for (const AxisMapping& m : op->mapProducerToConsumer(tv, consumer)) {
    if (m.consumer != c.source || !m.exact) {
      continue;
    }
    const int64_t axis = position(tv->logicalNoReductions(), m.producer);
    return view(tv, axis, [&] {
      StreamChunk chunk = streamChunk(consumer, loop_->index());
      chunk.axis = axis;
      return chunk;
    });
  }
  return tv;
}

TensorView* StreamLoop::view(
    TensorView* tv, int64_t key, const std::function<StreamChunk()>& chunk_of) {
  auto it = views_.find({tv, key});
  if (it != views_.end()) {
    return it->second;
  }
  TensorView* v = viewOf(hic_, tv);
  StreamChunk chunk = chunk_of();
  body().pushBack(hic_.create<ShardByStream>(
      v, tv, loop_->index(), chunk.axis, chunk.start, chunk.length));
  views_.emplace(std::make_pair(tv, key), v);
  return v;
}

} // namespace mdfuser::hir
