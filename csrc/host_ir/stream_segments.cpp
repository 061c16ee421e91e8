// SPDX-License-Identifier: MIT
#include "host_ir/stream_segments.h"

#include <algorithm>
#include <string>
#include <unordered_set>

#include "ir/errors.h"
#include "ir/ops.h"
#include "multidevice/communication_type.h"
#include "multidevice/sharding.h"

namespace mdfuser::hir {

namespace {

// Whether `op` reshards a producer along the axis its output splits into
// stream chunks, where the producer is split across devices and not by
// streams (x [device{d}, ...] gathered into y [stream{s}, ...]): a stream
// chunk of the output then holds other devices' data in another layout
// than this device's shard, so the resharding runs whole, outside a Stream
// loop.
bool reshardsAcrossStreamChunks(const TensorOp* op) {
  if (chunksAreDeviceParts(op)) {
    return false; // one Broadcast per chunk, in the loop
  }
  const TensorView* consumer = op->out();
  ParallelAxis stream =
      findParallelAxis(consumer, ParallelType::Stream, consumer->maybeRoot());
  if (!stream || !isResharding(op)) {
    return false;
  }
  for (TensorView* producer : op->tensorInputs()) {
    if (findParallelAxis(producer, ParallelType::Stream, producer->logical())) {
      continue;
    }
    for (const AxisMapping& m : op->mapProducerToConsumer(producer, consumer)) {
      if (m.consumer != stream.source) {
        continue;
      }
      for (ParallelType pt : kDeviceParallelTypes) {
        ParallelAxis p = findParallelAxis(producer, pt, producer->logical());
        ParallelAxis c = findParallelAxis(consumer, pt, consumer->logical());
        if (p && p.source == m.producer && !(c && c.source == m.consumer)) {
          return true;
        }
      }
    }
  }
  return false;
}

bool sameExtent(const Scalar* a, const Scalar* b) {
  return a == b || (a->isConst() && b->isConst() && a->value() == b->value());
}

} // namespace

std::optional<ParallelType> chunksAreDeviceParts(const TensorOp* op) {
  const auto* set = dynamic_cast<const LoadStoreOp*>(op);
  if (set == nullptr) {
    return std::nullopt;
  }
  const TensorView* x = set->in();
  const TensorView* y = set->out();
  const ParallelAxis stream =
      findParallelAxis(y, ParallelType::Stream, y->maybeRoot());
  if (!stream || !stream.isOuter() || !stream.above.empty() ||
      !stream.parts()->isConst() || !x->hasDeviceMesh() ||
      !y->hasDeviceMesh() || !(*x->deviceMesh() == *y->deviceMesh()) ||
      findParallelAxis(x, ParallelType::Stream, x->logical())) {
    return std::nullopt;
  }
  for (ParallelType pt : kDeviceParallelTypes) {
    const ParallelAxis p = findParallelAxis(x, pt, x->logical());
    if (!p || !p.isOuter() || !p.above.empty() || loopAxis(y, pt) != nullptr ||
        x->deviceMesh()->size(pt) != stream.parts()->value() ||
        !p.parts()->isConst() ||
        p.parts()->value() != stream.parts()->value()) {
      continue;
    }
    for (const AxisMapping& m : op->mapProducerToConsumer(x, y)) {
      if (m.exact && m.producer == p.source && m.consumer == stream.source) {
        return pt;
      }
    }
  }
  return std::nullopt;
}

Scalar* streamParts(const TensorOp* op) {
  if (reshardsAcrossStreamChunks(op)) {
    return nullptr;
  }
  for (const TensorView* tv : op->outs()) {
    ParallelAxis axis =
        findParallelAxis(tv, ParallelType::Stream, tv->logical());
    if (axis) {
      return axis.parts();
    }
  }
  return nullptr;
}

std::vector<Segment> segmentsOf(const std::vector<TensorOp*>& exprs) {
  std::vector<Segment> segments;
  std::vector<bool> placed(exprs.size(), false);
  for (size_t i = 0; i < exprs.size(); ++i) {
    if (placed[i]) {
      continue;
    }
    Scalar* parts = streamParts(exprs[i]);
    if (parts == nullptr) {
      segments.push_back({nullptr, {exprs[i]}});
      continue;
    }
    Segment hoisted;
    Segment loop{parts, {exprs[i]}};
    const std::vector<TensorView*> first_outs = exprs[i]->outs();
    std::unordered_set<const TensorView*> written(
        first_outs.begin(), first_outs.end());
    for (size_t j = i + 1; j < exprs.size(); ++j) {
      TensorOp* op = exprs[j];
      Scalar* next = streamParts(op);
      if (next != nullptr && sameExtent(next, parts)) {
        loop.ops.push_back(op);
        const std::vector<TensorView*> outs = op->outs();
        written.insert(outs.begin(), outs.end());
        placed[j] = true;
        continue;
      }
      const std::vector<TensorView*> ins = op->tensorInputs();
      const bool reads_loop =
          std::any_of(ins.begin(), ins.end(), [&](const TensorView* tv) {
            return written.count(tv) != 0;
          });
      if (next != nullptr || reads_loop) {
        break;
      }
      // Loop-invariant: it runs once, in front of the loop.
      hoisted.ops.push_back(op);
      placed[j] = true;
    }
    if (!hoisted.ops.empty()) {
      segments.push_back(std::move(hoisted));
    }
    segments.push_back(std::move(loop));
  }
  return segments;
}

void checkInputStreamSplitsRun(
    const Fusion& f, const std::vector<TensorOp*>& exprs) {
  for (const TensorView* in : f.inputs()) {
    const ParallelAxis stream =
        findParallelAxis(in, ParallelType::Stream, in->logical());
    if (!stream) {
      continue;
    }
    std::vector<const TensorOp*> readers;
    bool runs = false;
    for (const TensorOp* op : exprs) {
      const std::vector<TensorView*> ins = op->tensorInputs();
      if (std::find(ins.begin(), ins.end(), in) == ins.end()) {
        continue;
      }
      readers.push_back(op);
      for (const TensorView* out : op->outs()) {
        runs = runs || streamParts(op) != nullptr ||
               findParallelAxis(out, ParallelType::Stream, out->logical());
      }
    }
    if (runs || readers.empty()) {
      continue;
    }
    std::string names;
    for (const TensorOp* op : readers) {
      names += (names.empty() ? "" : ", ") + std::string(op->opName());
    }
    MDF_USER_ERROR(
        "axis ",
        position(in->logical(), stream.source),
        " of ",
        in->toString(),
        " is split into ",
        stream.parts()->toString(),
        " stream chunks, but no operation runs in them: ",
        names,
        " reads it and reduces that axis or runs whole (a reduction over "
        "the chunks would have to add up across them, which mdfuser does "
        "not do). Split an axis the operations keep, such as a linear's "
        "tokens, or remove the stream split");
  }
}

int64_t position(const std::vector<IterDomain*>& ids, const IterDomain* id) {
  auto it = std::find(ids.begin(), ids.end(), id);
  MDF_CHECK(it != ids.end(), id->toString(), " not found");
  return it - ids.begin();
}

} // namespace mdfuser::hir
