// SPDX-License-Identifier: MIT
//
// The Interpreter's dispatch, and its statements that stay on this device:
// loops, streams, allocations, views and compute operations.
#include "runtime/interpreter.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <variant>

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <ATen/record_function.h>

#include "ir/errors.h"
#include "ir/ops.h"
#include "runtime/communicator.h"
#include "runtime/cuda_backend.h"
#include "runtime/cuda_graphs.h"
#include "runtime/tensor_types.h"
#include "runtime/views.h"

namespace mdfuser {
namespace evaluator_detail {

namespace {

// A host statement's name for the profiler: "mdfuser::linear".
std::string profilerName(const Expr* expr) {
  return "mdfuser::" + std::string(expr->opName());
}

} // namespace

c10::Scalar scalarOf(const Literal::Value& value) {
  return std::visit([](auto v) { return c10::Scalar(v); }, value);
}

at::Tensor& Interpreter::tensor(const TensorView* tv) {
  auto it = state_.tensors.find(tv);
  MDF_CHECK(
      it != state_.tensors.end(), "no buffer is bound to ", tv->toString());
  return it->second;
}

int64_t Interpreter::scalar(const Scalar* s) const {
  return state_.scalars.evaluate(s);
}

c10::Stream Interpreter::stream(const hir::Stream* s) {
  if (s->isCommunication()) {
    return streams_.communication(scalar(s->index()), s->lane());
  }
  if (s->index() != nullptr) {
    return streams_.worker(scalar(s->index()));
  }
  auto it = state_.captured.find(s);
  MDF_CHECK(it != state_.captured.end(), s->toString(), " was not captured");
  return it->second;
}

void Interpreter::run(const Expr* expr) {
  at::RecordFunction guard(at::RecordScope::USER_SCOPE);
  if (guard.isActive()) {
    guard.before(profilerName(expr));
  }
  const auto found = tables_.statements.find(expr);
  MDF_CHECK(
      found != tables_.statements.end(),
      "a statement outside the program: ",
      expr->toString());
  const HostIrEvaluator::Statement kind = found->second;
  if (state_.capturing && enqueuesWork(kind)) {
    // Work enqueued on a stream outside the capture would run now, once,
    // rather than at each replay, and memory allocated there would not
    // be the graph's.
    MDF_CHECK(
        isCapturing(streams_.current()),
        "a CUDA graph capture would miss ",
        expr->toString(),
        ": its stream does not take part in the capture");
  }
  using S = HostIrEvaluator::Statement;
  switch (kind) {
    case S::kLoop:
      runLoop(static_cast<const hir::ForLoop*>(expr));
      return;
    case S::kGetCurrentStream: {
      const auto* get = static_cast<const hir::GetCurrentStream*>(expr);
      state_.captured.insert_or_assign(get->stream(), streams_.current());
      return;
    }
    case S::kSetCurrentStream: {
      const auto* set = static_cast<const hir::SetCurrentStream*>(expr);
      streams_.setCurrent(stream(set->stream()));
      channel_ = channelOf(set->stream());
      return;
    }
    case S::kSynchronize:
      streams_.waitFor(
          stream(static_cast<const hir::Synchronize*>(expr)->stream()));
      return;
    case S::kSynchronizePreviousRun:
      streams_.waitForRunStart();
      return;
    case S::kAllocate:
      runAllocate(static_cast<const hir::Allocate*>(expr));
      return;
    case S::kDeallocate: {
      const auto* dealloc = static_cast<const hir::Deallocate*>(expr);
      // The buffer may have been allocated on another stream than the one
      // its last use ran on.
      streams_.recordUse(tensor(dealloc->buffer()).storage().data_ptr());
      state_.tensors.erase(dealloc->buffer());
      return;
    }
    case S::kShardView: {
      const auto* view = static_cast<const hir::ShardView*>(expr);
      state_.tensors.insert_or_assign(
          view->out(),
          narrowView(
              tensor(view->in()),
              view->axis(),
              scalar(view->start()),
              scalar(view->length())));
      return;
    }
    case S::kView: {
      const auto* alias = static_cast<const hir::View*>(expr);
      state_.tensors.insert_or_assign(
          alias->out(), layoutView(bind(*alias->op())));
      return;
    }
    case S::kCommunication:
      runCommunication(static_cast<const hir::Communication*>(expr));
      return;
    case S::kWait:
      runWait(static_cast<const hir::Wait*>(expr));
      return;
    case S::kAllgatherLinear:
    case S::kLinearReduceScatter:
      runFused(static_cast<const hir::FusedMatmulCommunication*>(expr), kind);
      return;
    case S::kCompute:
      runCompute(static_cast<const TensorOp*>(expr));
      return;
  }
  MDF_UNREACHABLE("the evaluator cannot run ", expr->toString());
}

bool Interpreter::enqueuesWork(HostIrEvaluator::Statement kind) {
  using S = HostIrEvaluator::Statement;
  return kind == S::kAllocate || kind == S::kCommunication ||
         kind == S::kWait || kind == S::kAllgatherLinear ||
         kind == S::kLinearReduceScatter || kind == S::kCompute;
}

void Interpreter::runLoop(const hir::ForLoop* loop) {
  const int64_t start = scalar(loop->start());
  const int64_t stop = scalar(loop->stop());
  iteration_.push_back(0);
  for (int64_t i = start; i < stop; ++i) {
    iteration_.back() = i;
    state_.scalars.bind(loop->index(), i);
    runScope(loop->body());
  }
  iteration_.pop_back();
}

int64_t Interpreter::channelOf(const hir::Stream* s) const {
  if (s->index() == nullptr) {
    return 0;
  }
  // Lane 0 and the workers interleaved from 1, the other lanes in blocks
  // of their own above them.
  static_assert(
      kChannelsALane * hir::Stream::kCommunicationLanes <=
          CudaBackend::kChannels,
      "the CUDA backend serves every lane's channels");
  return (s->isCommunication() ? 2 : 1) + 2 * scalar(s->index()) +
         s->lane() * kChannelsALane;
}

void Interpreter::runAllocate(const hir::Allocate* alloc) {
  std::vector<int64_t> shape;
  for (const Scalar* extent : alloc->shape()) {
    shape.push_back(scalar(extent));
  }
  const auto options = at::TensorOptions()
                           .dtype(toScalarType(alloc->buffer()->dtype()))
                           .device(device_);
  auto allocate = [&](at::IntArrayRef sizes) {
    if (alloc->isSymmetric()) {
      return symmetricBuffer(alloc, sizes);
    }
    return alloc->zeroInit() ? at::zeros(sizes, options)
                             : at::empty(sizes, options);
  };
  const std::vector<int64_t>& ranks = alloc->strideOrder();
  if (ranks.empty()) {
    state_.tensors.insert_or_assign(alloc->buffer(), allocate(shape));
    return;
  }
  // A row-major buffer of the axes from the outermost in memory to the
  // innermost, permuted back to the logical order.
  std::vector<int64_t> memory(shape.size());
  std::iota(memory.begin(), memory.end(), 0);
  std::sort(memory.begin(), memory.end(), [&](int64_t a, int64_t b) {
    return ranks[a] > ranks[b];
  });
  std::vector<int64_t> memory_shape;
  std::vector<int64_t> position(shape.size());
  for (size_t i = 0; i < memory.size(); ++i) {
    memory_shape.push_back(shape[memory[i]]);
    position[memory[i]] = static_cast<int64_t>(i);
  }
  state_.tensors.insert_or_assign(
      alloc->buffer(), allocate(memory_shape).permute(position));
}

KernelCall Interpreter::bind(const TensorOp& op, bool with_outputs) {
  KernelCall call{op, {}, {}, {}, state_.scalars, state_.rng_base};
  call.device = communicator_ == nullptr ? 0 : communicator_->rank();
  for (const Val* in : op.inputs()) {
    if (const auto* tv = dynamic_cast<const TensorView*>(in)) {
      call.tensors.push_back(tensor(tv));
      call.scalars.emplace_back();
    } else if (const auto* literal = dynamic_cast<const Literal*>(in)) {
      call.tensors.emplace_back();
      call.scalars.push_back(
          literal->isSymbolic() ? state_.literals.at(literal)
                                : scalarOf(literal->value()));
    } else {
      call.tensors.emplace_back();
      call.scalars.emplace_back(scalar(static_cast<const Scalar*>(in)));
    }
  }
  if (with_outputs) {
    for (const TensorView* out : op.outs()) {
      call.outputs.push_back(tensor(out));
    }
  }
  return call;
}

void Interpreter::runCompute(const TensorOp* op) {
  KernelCall call = bind(*op, /*with_outputs=*/true);
  try {
    runKernel(call);
  } catch (const c10::Error& e) {
    // ATen checked what mdfuser should have: name the operation.
    MDF_UNREACHABLE(
        "ATen refused ",
        op->opName(),
        " on tensors of shapes ",
        shapesOf(call),
        ":\n",
        op->toString(),
        "\n",
        e.what_without_backtrace());
  }
}

std::string Interpreter::shapesOf(const KernelCall& call) {
  std::string s;
  for (const at::Tensor& t : call.tensors) {
    if (t.defined()) {
      s += (s.empty() ? "" : ", ") + c10::str(t.sizes());
    }
  }
  s += " -> ";
  for (size_t i = 0; i < call.outputs.size(); ++i) {
    s += (i > 0 ? ", " : "") + c10::str(call.outputs[i].sizes());
  }
  return s;
}

} // namespace evaluator_detail
} // namespace mdfuser
