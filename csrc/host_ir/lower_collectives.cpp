// SPDX-License-Identifier: MIT
//
// The Lowerer's collectives: an operation that moves data between devices
// becomes a Communication and its Wait, or this device's part of it a view
// and a copy.
#include <algorithm>
#include <iterator>

#include "host_ir/lowerer.h"
#include "host_ir/stream_loop.h"
#include "host_ir/stream_segments.h"
#include "ir/errors.h"
#include "multidevice/sharding.h"

namespace mdfuser::hir::lower_detail {

CommunicatorBackend Lowerer::collectiveBackend() const {
  return options_.backend == CommunicatorBackend::kCuda
             ? CommunicatorBackend::kNccl
             : options_.backend;
}

bool Lowerer::lowerChunkBroadcast(const TensorOp* op) {
  const std::optional<ParallelType> pt = chunksAreDeviceParts(op);
  TensorView* producer = op->tensorInputs().front();
  TensorView* consumer = op->out();
  if (!pt || !producer->deviceMesh()->has(options_.device)) {
    return pt.has_value();
  }
  CommunicationSpec spec;
  spec.type = CommunicationType::Broadcast;
  spec.team = producer->deviceMesh()->team(options_.device, *pt);
  auto* communication = hic_.create<Communication>(
      spec, producer, operand(consumer), collectiveBackend());
  communication->setRootIndex(loop_->loop()->index());
  scope_->pushBack(communication);
  scope_->pushBack(hic_.create<Wait>(communication));
  return true;
}

void Lowerer::lowerResharding(const TensorOp* op) {
  TensorView* producer = op->tensorInputs().front();
  TensorView* consumer = op->out();
  const Resharding r = chooseResharding(op);
  if (r.kind == Resharding::Kind::kLocal) {
    lowerLocal(op, producer, consumer);
    return;
  }
  const int64_t me = options_.device;
  CommunicationSpec spec;
  spec.type = r.type;
  spec.axis = r.axis;
  spec.out_axis = r.out_axis;
  spec.root = r.root;
  spec.reduce = reduceKind(op);
  spec.in_device_axis = deviceAxisOf(op, producer, consumer);
  const DeviceMesh& from = *producer->deviceMesh();
  const DeviceMesh& to = *consumer->deviceMesh();
  if (from == to) {
    if (!from.has(me)) {
      return;
    }
    spec.team = from.team(me, r.parallel_type);
    spec.senders = spec.team;
    spec.receivers = spec.team;
    post(spec, producer, consumer);
    return;
  }
  if (r.type == CommunicationType::SendRecv && from.size() == to.size() &&
      from.size() > 1) {
    // Device i of one mesh to device i of the other.
    for (int64_t i = 0; i < from.size(); ++i) {
      const int64_t sender = from.devices()[i];
      const int64_t receiver = to.devices()[i];
      if (sender != me && receiver != me) {
        continue;
      }
      if (sender == receiver) {
        scope_->pushBack(
            hic_.create<LoadStoreOp>(operand(consumer), operand(producer)));
        continue;
      }
      CommunicationSpec pair = spec;
      pair.team = {std::min(sender, receiver), std::max(sender, receiver)};
      pair.senders = {sender};
      pair.receivers = {receiver};
      post(pair, producer, consumer);
    }
    return;
  }
  spec.senders = r.type == CommunicationType::Broadcast ||
                         r.type == CommunicationType::Scatter ||
                         r.type == CommunicationType::SendRecv
                     ? std::vector<int64_t>{r.root.value_or(from.devices()[0])}
                     : from.devices();
  spec.receivers =
      r.type == CommunicationType::Gather || r.type == CommunicationType::Reduce
          ? std::vector<int64_t>{*r.root}
          : to.devices();
  std::vector<int64_t> team = spec.senders;
  team.insert(team.end(), spec.receivers.begin(), spec.receivers.end());
  std::sort(team.begin(), team.end());
  team.erase(std::unique(team.begin(), team.end()), team.end());
  spec.team = team;
  if (std::find(team.begin(), team.end(), me) == team.end()) {
    return;
  }
  post(spec, producer, consumer);
}

void Lowerer::post(
    const CommunicationSpec& spec, TensorView* producer, TensorView* consumer) {
  const int64_t me = options_.device;
  auto has = [me](const std::vector<int64_t>& v) {
    return std::find(v.begin(), v.end(), me) != v.end();
  };
  TensorView* in = has(spec.senders) ? operand(producer) : nullptr;
  TensorView* out = has(spec.receivers) ? operand(consumer) : nullptr;
  auto* communication =
      hic_.create<Communication>(spec, in, out, collectiveBackend());
  scope_->pushBack(communication);
  scope_->pushBack(hic_.create<Wait>(communication));
}

void Lowerer::lowerLocal(
    const TensorOp* op, TensorView* producer, TensorView* consumer) {
  if (!onDevice(consumer, options_.device)) {
    return;
  }
  TensorView* out = operand(consumer);
  // Inside a Stream loop: the consumer's stream axis, whose chunk `out` is.
  ParallelAxis stream;
  if (loop_ != nullptr && out != consumer) {
    stream =
        findParallelAxis(consumer, ParallelType::Stream, consumer->logical());
  }
  // A producer without a stream split of its own is chunked like the
  // consumer, in the consumer's local coordinates; where the consumer is
  // also split across devices on its stream axis those are not the
  // (whole) producer's, so the device's part of the chunk is taken from
  // the whole producer instead.
  const bool from_whole =
      stream && !loop_->isChunkLocal(producer) &&
      !findParallelAxis(producer, ParallelType::Stream, producer->logical()) &&
      std::any_of(
          std::begin(kDeviceParallelTypes),
          std::end(kDeviceParallelTypes),
          [&](ParallelType pt) {
            ParallelAxis c =
                findParallelAxis(consumer, pt, consumer->logical());
            return c && c.source == stream.source;
          });
  TensorView* in = from_whole ? producer : operand(producer);
  const std::vector<IterDomain*> logical = consumer->logicalNoReductions();
  for (ParallelType pt : kDeviceParallelTypes) {
    ParallelAxis c = findParallelAxis(consumer, pt, consumer->logical());
    if (!c || loopAxis(producer, pt) != nullptr) {
      continue;
    }
    const int64_t axis = position(logical, c.source);
    const DeviceMesh& mesh = *consumer->deviceMesh();
    const std::vector<int64_t> team = mesh.team(options_.device, pt);
    Scalar* index = constant(
        hic_.ir(),
        std::find(team.begin(), team.end(), options_.device) - team.begin());
    // This device's part: one local extent (one chunk inside a loop).
    Scalar* length = localExtents(consumer)[axis];
    Scalar* start = nullptr;
    if (stream && stream.source == c.source) {
      const StreamChunk chunk = streamChunk(consumer, loop_->loop()->index());
      length = chunk.length;
      start = from_whole ? startInWhole(consumer, stream, c, chunk, index)
                         : mul(index, length);
    } else {
      start = mul(index, length);
    }
    TensorView* view = viewOf(hic_, in);
    scope_->pushBack(
        hic_.create<ShardByDevice>(view, in, pt, axis, start, length));
    in = view;
  }
  scope_->pushBack(hic_.create<LoadStoreOp>(out, in));
  (void)op;
}

Scalar* Lowerer::startInWhole(
    const TensorView* consumer,
    const ParallelAxis& stream,
    const ParallelAxis& device,
    const StreamChunk& chunk,
    Scalar* index) {
  auto only = [](const std::vector<IterDomain*>& above,
                 const IterDomain* allowed) {
    return above.empty() || (above.size() == 1 && above[0] == allowed);
  };
  MDF_USER_CHECK(
      only(device.above, stream.loop) && only(stream.above, device.loop),
      "cannot take a device's part of the stream chunks of ",
      consumer->toString(),
      ": its stream axis is cut by more than one stream and one device "
      "split");
  Scalar* shard_start = mul(index, device.partExtent());
  if (!device.above.empty()) {
    return add(mul(loop_->loop()->index(), stream.partExtent()), shard_start);
  }
  return add(shard_start, chunk.start);
}

int64_t Lowerer::deviceAxisOf(
    const TensorOp* op,
    const TensorView* producer,
    const TensorView* consumer) {
  if (!isDeviceSum(op)) {
    return -1;
  }
  const std::vector<IterDomain*> ids = producer->logicalNoReductions();
  for (const AxisMapping& m : op->mapProducerToConsumer(producer, consumer)) {
    if (m.consumer->isReduction()) {
      return position(ids, m.producer);
    }
  }
  return -1;
}

ReduceKind Lowerer::reduceKind(const TensorOp* op) {
  switch (op->type()) {
    case OpType::Max:
      return ReduceKind::kMax;
    case OpType::Min:
      return ReduceKind::kMin;
    default:
      return ReduceKind::kSum;
  }
}

} // namespace mdfuser::hir::lower_detail
