// SPDX-License-Identifier: MIT
#include "host_ir/lower.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ir/errors.h"
#include "ir/ops.h"
#include "multidevice/communication_type.h"
#include "multidevice/sharding.h"

namespace mdfuser::hir {

namespace {

Scalar* streamParts(const TensorView* tv) {
  ParallelAxis axis = findParallelAxis(tv, ParallelType::Stream, tv->logical());
  return axis ? axis.parts() : nullptr;
}

bool sameExtent(const Scalar* a, const Scalar* b) {
  return a == b || (a->isConst() && b->isConst() && a->value() == b->value());
}

// A Stream loop being filled: its operations and the chunk views created
// for it.
class StreamLoop {
 public:
  StreamLoop(
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
      TensorView* out = op->out();
      const bool used_outside =
          std::any_of(out->uses().begin(), out->uses().end(), [&](Expr* use) {
            return in_segment.count(dynamic_cast<TensorOp*>(use)) == 0;
          });
      if (!fusion.isOutput(out) && !used_outside) {
        chunk_local_.insert(out);
      }
    }
  }

  ForLoop* loop() const {
    return loop_;
  }
  Scope& body() {
    return loop_->body();
  }

  // What an operation in the loop reads or writes in place of `tv`: `tv`
  // itself when it has no stream axis or lives only inside the loop, else a
  // view of this iteration's chunk.
  TensorView* operand(TensorView* tv) {
    if (streamParts(tv) == nullptr || chunk_local_.count(tv) != 0) {
      return tv;
    }
    auto it = views_.find(tv);
    if (it != views_.end()) {
      return it->second;
    }
    auto* view = hic_.create<TensorView>(
        tv->logical(), tv->dtype(), tv->contiguity(), MemoryType::Local);
    view->setDomains(tv->root(), tv->logical(), tv->loop());
    if (tv->hasDeviceMesh()) {
      view->setDeviceMesh(*tv->deviceMesh());
    }
    StreamChunk chunk = streamChunk(tv, loop_->index());
    body().pushBack(hic_.create<ShardByStream>(
        view, tv, loop_->index(), chunk.axis, chunk.start, chunk.length));
    views_.emplace(tv, view);
    return view;
  }

 private:
  HostIrContainer& hic_;
  ForLoop* loop_;
  std::unordered_set<const TensorView*> chunk_local_;
  std::unordered_map<const TensorView*, TensorView*> views_;
};

void lowerCommunication(
    HostIrContainer& hic,
    Scope& scope,
    const TensorOp* op,
    TensorView* in,
    TensorView* out,
    const LoweringOptions& options) {
  CommunicationInfo info = chooseCommunication(op);
  MDF_USER_CHECK(
      info.type == CommunicationType::Allreduce,
      "mdfuser cannot execute ",
      communicationTypeName(info.type),
      " yet, which this operation needs:\n",
      op->toString());
  const DeviceMesh& mesh = *op->out()->deviceMesh();
  auto* communication = hic.create<Communication>(
      info.type,
      mesh.team(options.device, info.parallel_type),
      in,
      out,
      options.backend);
  scope.pushBack(communication);
  scope.pushBack(hic.create<Wait>(communication));
}

// Appends the statements for `op` to `scope`; `loop` is the enclosing
// Stream loop, if any.
void lowerOp(
    HostIrContainer& hic,
    Scope& scope,
    const TensorOp* op,
    StreamLoop* loop,
    const LoweringOptions& options) {
  auto operand = [&](TensorView* tv) {
    return loop == nullptr ? tv : loop->operand(tv);
  };
  if (isResharding(op)) {
    TensorView* in = operand(op->tensorInputs().front());
    TensorView* out = operand(op->out());
    lowerCommunication(hic, scope, op, in, out, options);
    return;
  }
  std::vector<TensorView*> ins;
  for (TensorView* tv : op->tensorInputs()) {
    ins.push_back(operand(tv));
  }
  TensorView* out = operand(op->out());
  scope.pushBack(op->withOperands(out, ins));
}

} // namespace

std::unique_ptr<HostIrContainer> lowerToHostIr(
    std::unique_ptr<Fusion> fusion, const LoweringOptions& options) {
  Fusion& f = *fusion;
  auto hic = std::make_unique<HostIrContainer>(std::move(fusion));
  const std::vector<TensorOp*> exprs = f.exprs();

  for (size_t i = 0; i < exprs.size();) {
    Scalar* parts = streamParts(exprs[i]->out());
    if (parts == nullptr) {
      lowerOp(*hic, hic->topLevel(), exprs[i], nullptr, options);
      ++i;
      continue;
    }
    size_t end = i + 1;
    while (end < exprs.size()) {
      Scalar* next = streamParts(exprs[end]->out());
      if (next == nullptr || !sameExtent(next, parts)) {
        break;
      }
      ++end;
    }
    std::vector<TensorOp*> segment(exprs.begin() + i, exprs.begin() + end);
    StreamLoop loop(*hic, f, parts, segment);
    for (TensorOp* op : segment) {
      lowerOp(*hic, loop.body(), op, &loop, options);
    }
    hic->topLevel().pushBack(loop.loop());
    i = end;
  }
  return hic;
}

} // namespace mdfuser::hir
