// SPDX-License-Identifier: MIT
#include "host_ir/lower.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "host_ir/ring_decomposition.h"
#include "host_ir/stream_loop.h"
#include "host_ir/stream_segments.h"
#include "ir/errors.h"
#include "ir/ops.h"
#include "multidevice/communication_type.h"
#include "multidevice/sharding.h"
#include "passes/swizzled_gathers.h"

namespace mdfuser::hir {

namespace {

bool onDevice(const TensorView* tv, int64_t device) {
  return !tv->hasDeviceMesh() || tv->deviceMesh()->has(device);
}

class Lowerer {
 public:
  // `segment_of` numbers the operations by the scope they are lowered into:
  // a Stream loop, or the top level.
  Lowerer(
      HostIrContainer& hic,
      const LoweringOptions& options,
      std::unordered_map<const TensorOp*, size_t> segment_of)
      : hic_(hic), options_(options), segment_of_(std::move(segment_of)) {}

  // Appends the statements for `op` to `scope`; `loop` is the enclosing
  // Stream loop, if any.
  void lowerOp(Scope& scope, const TensorOp* op, StreamLoop* loop) {
    scope_ = &scope;
    loop_ = loop;
    op_ = op;
    const bool communication =
        dynamic_cast<const LoadStoreOp*>(op) != nullptr || isDeviceSum(op);
    if (communication && isResharding(op)) {
      // A swizzled gather (prepareSwizzledGathers) asks for its ring.
      if ((ringsWanted() || hasSwizzledGather(op->out())) &&
          deferGatherToRing(op)) {
        return;
      }
      if (ringsWanted() && lowerReductionRing(op)) {
        return;
      }
      if (loop_ != nullptr && lowerChunkBroadcast(op)) {
        return;
      }
      lowerResharding(op);
      return;
    }
    if (!onDevice(op->out(), options_.device)) {
      return;
    }
    if (lowerGatherRing(op) || (ringsWanted() && deferPartialSumsToRing(op))) {
      return;
    }
    std::vector<TensorView*> ins;
    for (TensorView* tv : op->tensorInputs()) {
      ins.push_back(operand(tv));
    }
    std::vector<TensorView*> outs;
    for (TensorView* tv : op->outs()) {
      outs.push_back(operand(tv));
    }
    scope.pushBack(op->withTensors(outs, ins));
  }

 private:
  TensorView* operand(TensorView* tv) {
    return loop_ == nullptr ? tv : loop_->operand(tv, op_, op_->out());
  }

  // ----------------------------------------------------- ring decompositions

  bool ringsWanted() const {
    return makesRings(options_);
  }

  // The backend of the collectives that stay collectives: NCCL beside the
  // CUDA backend's rings.
  CommunicatorBackend collectiveBackend() const {
    return options_.backend == CommunicatorBackend::kCuda
               ? CommunicatorBackend::kNccl
               : options_.backend;
  }

  // The team a collective `r` from `producer` to `consumer` runs over, when
  // it can become a ring on this device: one mesh holding it, two devices
  // or more along the collective's axis.
  std::optional<std::vector<int64_t>> ringTeam(
      const Resharding& r,
      const TensorView* producer,
      const TensorView* consumer) const {
    if (r.kind != Resharding::Kind::kCollective || !producer->hasDeviceMesh() ||
        !consumer->hasDeviceMesh() ||
        !(*producer->deviceMesh() == *consumer->deviceMesh()) ||
        !producer->deviceMesh()->has(options_.device)) {
      return std::nullopt;
    }
    std::vector<int64_t> team =
        producer->deviceMesh()->team(options_.device, r.parallel_type);
    if (team.size() < 2) {
      return std::nullopt;
    }
    return team;
  }

  Ring ring(const std::vector<int64_t>& team) {
    const int64_t me =
        std::find(team.begin(), team.end(), options_.device) - team.begin();
    return Ring{hic_, *scope_, team, me, options_.backend};
  }

  // `tv`'s only use, when it has one and is no program output.
  const TensorOp* onlyUse(const TensorView* tv) const {
    if (hic_.isOutput(tv) || tv->uses().size() != 1) {
      return nullptr;
    }
    return dynamic_cast<const TensorOp*>(tv->uses().front());
  }

  bool sameSegment(const TensorOp* a, const TensorOp* b) const {
    auto ia = segment_of_.find(a);
    auto ib = segment_of_.find(b);
    return ia != segment_of_.end() && ib != segment_of_.end() &&
           ia->second == ib->second;
  }

  // The extent of `tv`'s non-reduction axis `axis` in the buffer this scope
  // sees: one stream chunk's inside a loop that cuts it.
  Scalar* extentInScope(const TensorView* tv, int64_t axis) const {
    if (loop_ != nullptr && loopAxis(tv, ParallelType::Stream) != nullptr) {
      const StreamChunk chunk = streamChunk(tv, loop_->loop()->index());
      if (chunk.axis == axis) {
        return chunk.length;
      }
    }
    return localExtents(tv).at(axis);
  }

  // An allgather whose only use is a linear's input waits for that linear,
  // with which it becomes one ring.
  bool deferGatherToRing(const TensorOp* op) {
    if (dynamic_cast<const LoadStoreOp*>(op) == nullptr) {
      return false;
    }
    TensorView* producer = op->tensorInputs().front();
    TensorView* gathered = op->out();
    const Resharding r = chooseResharding(op);
    std::optional<std::vector<int64_t>> team = ringTeam(r, producer, gathered);
    const auto* linear = dynamic_cast<const LinearOp*>(onlyUse(gathered));
    if (!team || r.type != CommunicationType::Allgather || linear == nullptr ||
        linear->outFeatureAxes() != 1 || linear->in() != gathered ||
        linear->weight() == gathered || linear->bias() == gathered ||
        !sameSegment(op, linear)) {
      return false;
    }
    // The gathered axis must index the linear's output, not its contracted
    // in_features.
    const std::vector<IterDomain*> ids = gathered->logicalNoReductions();
    const std::vector<IterDomain*> out_ids =
        linear->out()->logicalNoReductions();
    if (r.axis < 0 || r.axis + 1 >= static_cast<int64_t>(ids.size())) {
      return false;
    }
    for (const AxisMapping& m :
         linear->mapProducerToConsumer(gathered, linear->out())) {
      auto it = std::find(out_ids.begin(), out_ids.end(), m.consumer);
      if (m.producer == ids[r.axis] && m.exact && it != out_ids.end()) {
        gathers_.emplace(
            gathered,
            DeferredGather{
                operand(producer), *team, r.axis, it - out_ids.begin()});
        return true;
      }
    }
    return false;
  }

  // The ring of a deferred allgather and the linear consuming it.
  bool lowerGatherRing(const TensorOp* op) {
    const auto* linear = dynamic_cast<const LinearOp*>(op);
    if (linear == nullptr) {
      return false;
    }
    auto it = gathers_.find(linear->in());
    if (it == gathers_.end()) {
      return false;
    }
    const DeferredGather g = it->second;
    gathers_.erase(it);
    Scalar* extent = extentInScope(linear->in(), g.axis);
    const auto d = static_cast<int64_t>(g.team.size());
    // Outside Stream loops only: the kernel computes the whole GEMM while
    // the rows come in, which a loop's chunks would cut into launches
    // waiting on each other's rows; there the ring pipelines the chunks.
    if (loop_ == nullptr &&
        fusesAllgatherLinear(
            options_.fused_matmul_communication,
            whyFusedKernelsUnusable(options_).empty(),
            allgatherLinearPair(linear, d, g.axis, g.out_axis, extent))) {
      scope_->pushBack(hic_.create<AllgatherLinear>(
          g.team, g.in, operand(linear->weight()), operand(linear->out())));
      return true;
    }
    TensorView* bias = linear->bias();
    emitAllgatherLinear(
        ring(g.team),
        g.in,
        operand(linear->in()),
        g.axis,
        operand(linear->out()),
        g.out_axis,
        extent,
        operand(linear->weight()),
        bias == nullptr ? nullptr : operand(bias));
    return true;
  }

  // The partial sums of a linear without bias whose only use is their
  // reduce-scatter or allreduce are computed by that reduction's ring.
  bool deferPartialSumsToRing(const TensorOp* op) {
    const auto* linear = dynamic_cast<const LinearOp*>(op);
    if (linear == nullptr || linear->bias() != nullptr ||
        linear->outFeatureAxes() != 1) {
      return false;
    }
    const TensorOp* sum = onlyUse(linear->out());
    if (sum == nullptr || !isDeviceSum(sum) ||
        reduceKind(sum) != ReduceKind::kSum || !sameSegment(op, sum)) {
      return false;
    }
    const TensorView* in = linear->in();
    const TensorView* out = sum->out();
    const Resharding r = chooseResharding(sum);
    std::optional<std::vector<int64_t>> team = ringTeam(r, linear->out(), out);
    const auto rank = static_cast<int64_t>(in->logicalNoReductions().size());
    if (!team || rank < 2 ||
        rank != static_cast<int64_t>(out->logicalNoReductions().size())) {
      return false;
    }
    // The tokens the ring cuts: the scattered axis, or the outermost one.
    // Input and output share their axes but the last.
    int64_t axis = 0;
    if (r.type == CommunicationType::ReduceScatter) {
      axis = r.axis;
    } else if (r.type != CommunicationType::Allreduce) {
      return false;
    }
    if (axis < 0 || axis + 1 >= rank) {
      return false;
    }
    partials_.emplace(
        linear->out(),
        DeferredPartials{
            linear, operand(linear->in()), operand(linear->weight()), axis});
    return true;
  }

  // The ring of a reduction whose partial sums were deferred.
  bool lowerReductionRing(const TensorOp* op) {
    if (!isDeviceSum(op)) {
      return false;
    }
    auto it = partials_.find(op->tensorInputs().front());
    if (it == partials_.end()) {
      return false;
    }
    const DeferredPartials p = it->second;
    partials_.erase(it);
    TensorView* consumer = op->out();
    const Resharding r = chooseResharding(op);
    const std::vector<int64_t> team =
        *ringTeam(r, op->tensorInputs().front(), consumer);
    TensorView* out = operand(consumer);
    Scalar* extent = extentInScope(consumer, p.axis);
    if (r.type == CommunicationType::Allreduce) {
      // On the CUDA backend peers write into the ring's buffer, which must
      // then live in symmetric memory; a program output cannot (each run
      // returns a fresh one): the parts arrive in a buffer of their own.
      const bool apart = options_.backend == CommunicatorBackend::kCuda &&
                         hic_.isOutput(consumer);
      emitLinearAllreduce(
          ring(team),
          p.in,
          p.axis,
          p.weight,
          out,
          p.axis,
          extent,
          apart ? operand(bufferLike(consumer)) : out);
      return true;
    }
    // Outside Stream loops only, as for AllgatherLinear (lowerGatherRing).
    if (loop_ == nullptr && fusesLinearReduceScatter(
                                options_.fused_matmul_communication,
                                whyFusedKernelsUnusable(options_).empty(),
                                linearReduceScatterPair(
                                    p.linear,
                                    consumer,
                                    static_cast<int64_t>(team.size()),
                                    p.axis,
                                    extentInScope(p.linear->in(), p.axis)))) {
      scope_->pushBack(
          hic_.create<LinearReduceScatter>(team, p.in, p.weight, out));
      return true;
    }
    if (options_.direct_reduce_scatter && team.size() > 2) {
      // Every peer's partial sum is sent straight to it: d - 1 moves that
      // depend on no other device's, each beside the next step's GEMM. (At
      // d = 2 the ring below is the same schedule.) Buffers of one part's
      // shape, as the ring's.
      std::vector<TensorView*> sends;
      std::vector<TensorView*> receives;
      for (size_t j = 1; j < team.size(); ++j) {
        sends.push_back(bufferLike(consumer));
        receives.push_back(bufferLike(consumer));
      }
      emitDirectLinearReduceScatter(
          ring(team), p.in, p.axis, p.weight, out, sends, receives, extent);
      return true;
    }
    // The partial sums arrive in a buffer of one part's shape.
    emitLinearReduceScatter(
        ring(team), p.in, p.axis, p.weight, out, bufferLike(consumer), extent);
    return true;
  }

  // A fresh intermediate of `tv`'s shape, mesh and dtype (of one stream
  // chunk's shape inside a Stream loop that cuts it).
  TensorView* bufferLike(const TensorView* tv) {
    auto* buffer = hic_.create<TensorView>(
        tv->logical(), tv->dtype(), tv->contiguity(), MemoryType::Global);
    buffer->setDomains(tv->root(), tv->logical(), tv->loop());
    buffer->setDeviceMesh(*tv->deviceMesh());
    return buffer;
  }

  // ------------------------------------------------------------ collectives

  // Stream chunk i of a gathered tensor that is device i's part
  // (chunksAreDeviceParts): a Broadcast from device i of its whole part
  // into this iteration's chunk, the root changing with the loop index.
  bool lowerChunkBroadcast(const TensorOp* op) {
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

  void lowerResharding(const TensorOp* op) {
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
    spec.senders =
        r.type == CommunicationType::Broadcast ||
                r.type == CommunicationType::Scatter ||
                r.type == CommunicationType::SendRecv
            ? std::vector<int64_t>{r.root.value_or(from.devices()[0])}
            : from.devices();
    spec.receivers = r.type == CommunicationType::Gather ||
                             r.type == CommunicationType::Reduce
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

  void post(
      const CommunicationSpec& spec,
      TensorView* producer,
      TensorView* consumer) {
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

  // A copy, after taking this device's part where the consumer is sharded
  // and the producer is not.
  void lowerLocal(
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
        !findParallelAxis(
            producer, ParallelType::Stream, producer->logical()) &&
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

  // Where this iteration's chunk of `consumer` on this device (`index` on
  // the device axis `device`) starts in the whole tensor, along the axis
  // that both `stream` and `device` split:
  //   [stream{s}, device{d}, n/(s*d)]  chunk i, then the device's part of it
  //   [device{d}, stream{s}, ...]      the device's shard, then chunk i of it
  //                                    (`chunk`, in the shard's coordinates)
  Scalar* startInWhole(
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

  // The position of the producer's device axis that a sum over devices
  // reduces, or -1.
  static int64_t deviceAxisOf(
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

  static ReduceKind reduceKind(const TensorOp* op) {
    switch (op->type()) {
      case OpType::Max:
        return ReduceKind::kMax;
      case OpType::Min:
        return ReduceKind::kMin;
      default:
        return ReduceKind::kSum;
    }
  }

  // An allgather deferred to the linear that consumes it: this device's
  // part, the team, the gathered axis and the linear output's axis it
  // becomes.
  struct DeferredGather {
    TensorView* in;
    std::vector<int64_t> team;
    int64_t axis;
    int64_t out_axis;
  };
  // A linear deferred to the reduction of its partial sums: the linear, its
  // operands and the axis the ring cuts.
  struct DeferredPartials {
    const LinearOp* linear;
    TensorView* in;
    TensorView* weight;
    int64_t axis;
  };

  HostIrContainer& hic_;
  const LoweringOptions& options_;
  std::unordered_map<const TensorOp*, size_t> segment_of_;
  std::unordered_map<const TensorView*, DeferredGather> gathers_;
  std::unordered_map<const TensorView*, DeferredPartials> partials_;
  Scope* scope_ = nullptr;
  StreamLoop* loop_ = nullptr;
  const TensorOp* op_ = nullptr;
};

} // namespace

bool makesRings(const LoweringOptions& options) {
  return options.ring_decomposition ||
         options.backend == CommunicatorBackend::kCuda;
}

std::string whyFusedKernelsUnusable(const LoweringOptions& options) {
  if (options.backend != CommunicatorBackend::kCuda) {
    return "it needs the CUDA communication backend "
           "(CommunicatorBackend.cuda), got " +
           std::string(backendName(options.backend));
  }
  return options.fused_kernels_available
             ? ""
             : "this device or build has no fused kernels";
}

std::unique_ptr<HostIrContainer> lowerToHostIr(
    std::unique_ptr<Fusion> fusion, const LoweringOptions& options) {
  checkFusedMatmulRequest(
      options.fused_matmul_communication, whyFusedKernelsUnusable(options));
  Fusion& f = *fusion;
  checkInputStreamSplitsRun(f, f.exprs());
  auto hic = std::make_unique<HostIrContainer>(std::move(fusion));

  const std::vector<Segment> segments = segmentsOf(f.exprs());
  std::unordered_map<const TensorOp*, size_t> segment_of;
  constexpr size_t kTopLevel = std::numeric_limits<size_t>::max();
  for (size_t i = 0; i < segments.size(); ++i) {
    for (const TensorOp* op : segments[i].ops) {
      segment_of.emplace(op, segments[i].parts == nullptr ? kTopLevel : i);
    }
  }

  Lowerer lowerer(*hic, options, std::move(segment_of));
  for (const Segment& segment : segments) {
    if (segment.parts == nullptr) {
      for (const TensorOp* op : segment.ops) {
        lowerer.lowerOp(hic->topLevel(), op, nullptr);
      }
      continue;
    }
    StreamLoop loop(*hic, f, segment.parts, segment.ops);
    for (const TensorOp* op : segment.ops) {
      lowerer.lowerOp(loop.body(), op, &loop);
    }
    if (!loop.body().exprs().empty()) {
      hic->topLevel().pushBack(loop.loop());
    }
  }
  return hic;
}

} // namespace mdfuser::hir
