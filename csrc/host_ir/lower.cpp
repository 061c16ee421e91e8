// SPDX-License-Identifier: MIT
//
// Lowering a fusion into the host program of one device: its segments into
// Stream loops and the top level, each operation by the Lowerer
// (host_ir/lowerer.h).
#include "host_ir/lower.h"

#include <limits>
#include <unordered_map>

#include "host_ir/lowerer.h"
#include "host_ir/stream_loop.h"
#include "host_ir/stream_segments.h"
#include "multidevice/sharding.h"
#include "passes/swizzled_gathers.h"

namespace mdfuser::hir {

namespace lower_detail {

bool onDevice(const TensorView* tv, int64_t device) {
  return !tv->hasDeviceMesh() || tv->deviceMesh()->has(device);
}

void Lowerer::lowerOp(Scope& scope, const TensorOp* op, StreamLoop* loop) {
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

TensorView* Lowerer::operand(TensorView* tv) {
  return loop_ == nullptr ? tv : loop_->operand(tv, op_, op_->out());
}

} // namespace lower_detail

using lower_detail::Lowerer;

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
