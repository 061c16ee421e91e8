// SPDX-License-Identifier: MIT
#include "runtime/evaluator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <numeric>
#include <string_view>
#include <unordered_map>
#include <utility>

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <ATen/record_function.h>
#include <c10/core/DeviceGuard.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "ir/errors.h"
#include "ir/literal.h"
#include "ir/ops.h"
#include "runtime/collectives.h"
#include "runtime/communicator.h"
#include "runtime/cuda_backend.h"
#include "runtime/cuda_graphs.h"
#include "runtime/fused_matmul.h"
#include "runtime/kernels.h"
#include "runtime/tensor_types.h"
#include "runtime/views.h"
#include "runtime/watchdog.h"

namespace mdfuser {

namespace {

// Everything one run binds: scalars, buffers, captured streams and the
// collectives in flight.
struct RunState {
  ScalarEvaluator scalars;
  std::unordered_map<const TensorView*, at::Tensor> tensors;
  std::unordered_map<const hir::Stream*, c10::Stream> captured;
  std::unordered_map<const hir::Communication*, PendingCollective> pending;
  // The values of the fusion's scalar inputs.
  std::unordered_map<const Literal*, c10::Scalar> literals;
  uint64_t rng_base = 0;
  // A CUDA graph capture records the run (runtime/cuda_graphs.h).
  bool capturing = false;
};

c10d::ReduceOp::RedOpType redOp(hir::ReduceKind kind) {
  switch (kind) {
    case hir::ReduceKind::kSum:
      return c10d::ReduceOp::SUM;
    case hir::ReduceKind::kMax:
      return c10d::ReduceOp::MAX;
    case hir::ReduceKind::kMin:
      return c10d::ReduceOp::MIN;
  }
  MDF_UNREACHABLE();
}

c10::Scalar scalarOf(const Literal::Value& value) {
  return std::visit([](auto v) { return c10::Scalar(v); }, value);
}

// A host statement's name for the profiler: "mdfuser::linear".
std::string profilerName(const Expr* expr) {
  return "mdfuser::" + std::string(expr->opName());
}

class Interpreter {
 public:
  Interpreter(
      RunState& state,
      c10::Device device,
      Communicator* communicator,
      StreamSet& streams,
      std::unique_ptr<CudaBackend>& cuda,
      const HostIrEvaluator::Tables& tables)
      : state_(state),
        device_(device),
        communicator_(communicator),
        streams_(streams),
        cuda_(cuda),
        tables_(tables) {}

  void runScope(const hir::Scope& scope) {
    for (const Expr* expr : scope.exprs()) {
      run(expr);
    }
  }

 private:
  at::Tensor& tensor(const TensorView* tv) {
    auto it = state_.tensors.find(tv);
    MDF_CHECK(
        it != state_.tensors.end(), "no buffer is bound to ", tv->toString());
    return it->second;
  }

  int64_t scalar(const Scalar* s) const {
    return state_.scalars.evaluate(s);
  }

  c10::Stream stream(const hir::Stream* s) {
    if (s->isCommunication()) {
      return streams_.communication(scalar(s->index()));
    }
    if (s->index() != nullptr) {
      return streams_.worker(scalar(s->index()));
    }
    auto it = state_.captured.find(s);
    MDF_CHECK(it != state_.captured.end(), s->toString(), " was not captured");
    return it->second;
  }

  void run(const Expr* expr) {
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

  // Whether a statement enqueues device work or allocates: what must happen
  // on a stream taking part in a capture. (A Synchronize is how a stream
  // joins one.)
  static bool enqueuesWork(HostIrEvaluator::Statement kind) {
    using S = HostIrEvaluator::Statement;
    return kind == S::kAllocate || kind == S::kCommunication ||
           kind == S::kWait || kind == S::kAllgatherLinear ||
           kind == S::kLinearReduceScatter || kind == S::kCompute;
  }

  void runLoop(const hir::ForLoop* loop) {
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

  // The number, the same on every rank, of the stream that communications
  // posted now go on: the CUDA backend orders each stream's moves on
  // flags of their own.
  int64_t channelOf(const hir::Stream* s) const {
    if (s->index() == nullptr) {
      return 0;
    }
    return (s->isCommunication() ? 2 : 1) + 2 * scalar(s->index());
  }

  CudaBackend& cuda() {
    if (cuda_ == nullptr) {
      MDF_CHECK(
          communicator_ != nullptr && device_.is_cuda(),
          "the CUDA communication backend needs a communicator and a CUDA "
          "device");
      cuda_ = std::make_unique<CudaBackend>(*communicator_, device_);
    }
    return *cuda_;
  }

  // The key of symmetric buffers that statement `number` of a kind
  // (`prefix`) keeps in this loop iteration for `shape` and `dtype`:
  // "S2.1:8x4:BFloat16" for the third symmetric Allocate, in iteration 1.
  std::string bufferKey(
      std::string_view prefix,
      int64_t number,
      at::IntArrayRef shape,
      at::ScalarType dtype) const {
    std::string key = std::string(prefix) + std::to_string(number);
    for (int64_t i : iteration_) {
      key += "." + std::to_string(i);
    }
    for (size_t a = 0; a < shape.size(); ++a) {
      key += (a == 0 ? ":" : "x") + std::to_string(shape[a]);
    }
    key += ":";
    key += c10::toString(dtype);
    return key;
  }

  // A symmetric buffer of `shape`, the same one at each run of `alloc` in
  // the same loop iteration, and in every program of the fusion whose
  // symmetric Allocate of the same number asks for the same shape and dtype
  // and memory order (the key says which: "S2.1:8x4:BFloat16" for the
  // third one, in iteration 1, row-major).
  at::Tensor symmetricBuffer(
      const hir::Allocate* alloc, at::IntArrayRef shape) {
    const auto number = tables_.symmetric_numbers.find(alloc);
    MDF_CHECK(
        number != tables_.symmetric_numbers.end(), "an unnumbered Allocate");
    std::string key = bufferKey(
        "S", number->second, shape, toScalarType(alloc->buffer()->dtype()));
    // The order of the axes in memory: peers write into this buffer as
    // their program lays it out, so two layouts never share one.
    for (size_t a = 0; a < alloc->strideOrder().size(); ++a) {
      key +=
          (a == 0 ? ":order" : ",") + std::to_string(alloc->strideOrder()[a]);
    }
    at::Tensor buffer = cuda().buffers().get(
        key, alloc->team(), shape, toScalarType(alloc->buffer()->dtype()));
    if (alloc->zeroInit()) {
      buffer.zero_();
    }
    return buffer;
  }

  // A fused matmul–communication kernel (`kind` says which), on the current
  // stream. Its key ("AllgatherLinear0.1:4x8:BFloat16": the first
  // AllgatherLinear, in iteration 1, of this input shape and dtype) finds
  // the same symmetric buffers at every run, and in every program of the
  // fusion that runs the same statement.
  void runFused(
      const hir::FusedMatmulCommunication* fused,
      HostIrEvaluator::Statement kind) {
    const auto found = tables_.fused.find(fused);
    MDF_CHECK(found != tables_.fused.end(), "an unnumbered ", fused->opName());
    const at::Tensor& in = tensor(fused->in());
    const std::string key = bufferKey(
        fused->opName(), found->second.number, in.sizes(), in.scalar_type());
    const auto kernel = kind == HostIrEvaluator::Statement::kAllgatherLinear
                            ? fusedAllgatherLinear
                            : fusedLinearReduceScatter;
    kernel(
        cuda(),
        fused->team(),
        in,
        tensor(fused->weight()),
        tensor(fused->out()),
        key,
        found->second.what,
        state_.rng_base);
  }

  void runAllocate(const hir::Allocate* alloc) {
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

  // `op`'s operands bound; outputs only when `with_outputs`.
  KernelCall bind(const TensorOp& op, bool with_outputs = false) {
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

  void runCompute(const TensorOp* op) {
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

  static std::string shapesOf(const KernelCall& call) {
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

  void runCommunication(const hir::Communication* comm) {
    const hir::CommunicationSpec& spec = comm->spec();
    CollectiveRequest request;
    request.type = spec.type;
    request.team = spec.team;
    request.senders = spec.senders;
    request.receivers = spec.receivers;
    request.rank = communicator_ == nullptr ? 0 : communicator_->rank();
    request.op = redOp(spec.reduce);
    request.axis = std::max<int64_t>(spec.axis, 0);
    request.out_axis = std::max<int64_t>(spec.out_axis, 0);
    request.shift = spec.shift;
    const bool sends = comm->rootIndex() == nullptr || isRootNow(comm);
    if (comm->rootIndex() != nullptr) {
      // The root of this step: it sends its input, every other member
      // receives.
      request.senders = {comm->team().at(scalar(comm->rootIndex()))};
    }
    if (comm->in() != nullptr && sends) {
      request.in = tensor(comm->in());
      if (spec.in_device_axis >= 0 && request.in.dim() > spec.in_device_axis) {
        request.in = request.in.squeeze(spec.in_device_axis);
      }
    }
    if (comm->out() != nullptr) {
      request.out = tensor(comm->out());
    }
    if (spec.team.size() == 1) {
      // Every collective of one device is a copy.
      if (request.in.defined() && request.out.defined() &&
          !request.out.is_same(request.in)) {
        request.out.copy_(request.in.reshape(request.out.sizes()));
      }
      return;
    }
    MDF_CHECK(communicator_ != nullptr, "a communication needs a communicator");
    if (comm->backend() == hir::CommunicatorBackend::kCuda) {
      const TensorView* landing = comm->landing();
      state_.pending.insert_or_assign(
          comm,
          cuda().permute(
              spec.team,
              spec.shift,
              request.in,
              request.out,
              landing == comm->in()    ? request.in
              : landing == comm->out() ? request.out
                                       : tensor(landing),
              channel_,
              tables_.names.at(comm),
              state_.rng_base));
      return;
    }
    c10d::Backend& backend = communicator_->backend(spec.team, comm->backend());
    PendingCollective pending = postCollective(backend, request);
    if (comm->backend() == hir::CommunicatorBackend::kNccl &&
        !state_.capturing) {
      // A capture's work cannot be queried: its replays are watched.
      watch(comm, pending, backend);
    }
    state_.pending.insert_or_assign(comm, std::move(pending));
  }

  // Whether this rank is the root, this step, of a Broadcast whose root
  // changes at run time.
  bool isRootNow(const hir::Communication* comm) const {
    const int64_t rank = communicator_ == nullptr ? 0 : communicator_->rank();
    return comm->team().at(scalar(comm->rootIndex())) == rank;
  }

  // "Allreduce (Communication 3) with team (0 1)", as errors name it.
  static std::string describe(
      CommunicationType type, int64_t name, const std::vector<int64_t>& team) {
    return detail::concat(
        communicationTypeName(type),
        " (Communication ",
        name,
        ") with team ",
        hir::teamString(team));
  }
  static std::string describe(const hir::Communication* comm) {
    return describe(comm->type(), comm->name(), comm->team());
  }

  // An NCCL collective that a rank of its team never reaches blocks the
  // stream that waits for it; the watchdog names it and ends the process
  // after the communicator's timeout (c10d's own watchdog, which names
  // neither the operation nor mdfuser's team, waits longer).
  void watch(
      const hir::Communication* comm,
      const PendingCollective& pending,
      c10d::Backend& backend) {
    Watchdog::Entry entry;
    entry.finished = [works = pending.works()] {
      for (const c10::intrusive_ptr<c10d::Work>& work : works) {
        try {
          if (!work->isCompleted()) {
            return false;
          }
        } catch (const std::exception&) {
          // Failed: the rank waiting on it sees the failure.
        }
      }
      return true;
    };
    // Built only if the watchdog reports (from copies: the program may be
    // gone by then).
    entry.describe = [rank = communicator_->rank(),
                      type = comm->type(),
                      name = comm->name(),
                      team = comm->team()] {
      return detail::concat(
          "rank ",
          rank,
          " in ",
          describe(type, name, team),
          " on NCCL: not finished; a rank of the team did not reach it, or "
          "ended");
    };
    entry.timeout = communicator_->options().timeout;
    entry.device = device_.is_cuda() ? device_.index() : -1;
    entry.peers = comm->team();
    entry.epoch = communicator_->epoch();
    entry.run = state_.rng_base;
    // Abandoned (a rank failed): aborting the communicator ends the kernel
    // that waits for the peer, and the work with it. From the poller or a
    // thread of the supervisor's, whichever comes first.
    entry.release =
        [backend = c10::intrusive_ptr<c10d::Backend>::reclaim_copy(&backend),
         aborted = std::make_shared<std::atomic<bool>>(false)] {
          if (!aborted->exchange(true)) {
            try {
              backend->abort();
            } catch (const std::exception&) {
            }
          }
          return true;
        };
    entry.release_anywhere = true;
    Watchdog::instance().watch(std::move(entry));
  }

  void runWait(const hir::Wait* wait) {
    const hir::Communication* comm = wait->communication();
    auto it = state_.pending.find(comm);
    if (it == state_.pending.end()) {
      // Nothing was posted: a team of one device.
      return;
    }
    PendingCollective pending = std::move(it->second);
    state_.pending.erase(it);
    const auto start = std::chrono::steady_clock::now();
    try {
      if (device_.is_cuda()) {
        // The current stream waits; the watchdog bounds it.
        pending.wait();
      } else {
        // The host waits, bounded by the backend's timeout, and
        // stops within a second when a rank fails. Stuck for a second or
        // more, it says so (a rank that waits for it to read its error
        // then knows it will not).
        auto said_stuck = start;
        // Withdrawn however the wait ends.
        struct ClearStuck {
          Communicator* communicator;
          const std::chrono::steady_clock::time_point& said;
          std::chrono::steady_clock::time_point start;
          ~ClearStuck() {
            if (said != start) {
              communicator->clearStuck();
            }
          }
        } clear_stuck{communicator_, said_stuck, start};
        pending.waitInterruptibly(
            [&] {
              communicator_->throwIfPeerFailed(comm->team(), describe(comm));
              const auto now = std::chrono::steady_clock::now();
              if (now - said_stuck >= std::chrono::seconds(1)) {
                communicator_->noteStuck(comm->team(), state_.rng_base);
                said_stuck = now;
              }
            },
            std::chrono::milliseconds(200));
      }
    } catch (const CommunicationError& e) {
      if (e.cause() != CommunicationError::Cause::kPeerFailed) {
        communicator_->notePeerFailure();
      }
      throw;
    } catch (const std::exception& e) {
      const double waited = std::chrono::duration<double>(
                                std::chrono::steady_clock::now() - start)
                                .count();
      communicator_->notePeerFailure();
      const auto timeout = communicator_->options().timeout;
      const bool timed_out =
          waited * 1000.0 >= 0.9 * static_cast<double>(timeout.count());
      throw CommunicationError(
          detail::concat(
              "rank ",
              communicator_->rank(),
              " failed waiting ",
              waited,
              " s for ",
              describe(comm),
              timed_out ? " (timed out)" : "",
              ": ",
              e.what()),
          timed_out);
    }
  }

  RunState& state_;
  c10::Device device_;
  Communicator* communicator_;
  StreamSet& streams_;
  std::unique_ptr<CudaBackend>& cuda_;
  const HostIrEvaluator::Tables& tables_;
  // The index of each enclosing loop's current iteration, outermost first.
  std::vector<int64_t> iteration_;
  int64_t channel_ = 0;
};

// `t` with its expanded broadcast axes at their extent, as torch returns
// them.
at::Tensor expandBroadcasts(
    const at::Tensor& t, const TensorView* tv, const ScalarEvaluator& extents) {
  const std::vector<IterDomain*> ids = tv->logicalNoReductions();
  std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
  bool any = false;
  for (size_t a = 0; a < ids.size() && a < shape.size(); ++a) {
    if (ids[a]->isExpanded()) {
      shape[a] = extents.evaluate(ids[a]->extent());
      any = true;
    }
  }
  return any ? t.expand(shape) : t;
}

} // namespace

namespace {

// Whether `scope` exchanges data with peers.
bool communicates(const hir::Scope& scope) {
  bool found = false;
  hir::forEachExpr(scope, [&](const Expr* expr) {
    const auto* comm = dynamic_cast<const hir::Communication*>(expr);
    found |=
        (comm != nullptr && comm->team().size() > 1) ||
        dynamic_cast<const hir::FusedMatmulCommunication*>(expr) != nullptr;
  });
  return found;
}

template <typename T>
bool isA(const Expr* expr) {
  return dynamic_cast<const T*>(expr) != nullptr;
}

// What `expr` is to the evaluator; fails on a statement it cannot run.
HostIrEvaluator::Statement classify(const Expr* expr) {
  using S = HostIrEvaluator::Statement;
  // No class listed derives from another: the first match is the only one.
  static constexpr std::pair<bool (*)(const Expr*), S> kKinds[] = {
      {isA<hir::ForLoop>, S::kLoop},
      {isA<hir::GetCurrentStream>, S::kGetCurrentStream},
      {isA<hir::SetCurrentStream>, S::kSetCurrentStream},
      {isA<hir::Synchronize>, S::kSynchronize},
      {isA<hir::Allocate>, S::kAllocate},
      {isA<hir::Deallocate>, S::kDeallocate},
      {isA<hir::ShardView>, S::kShardView},
      {isA<hir::View>, S::kView},
      {isA<hir::Communication>, S::kCommunication},
      {isA<hir::Wait>, S::kWait},
      {isA<hir::AllgatherLinear>, S::kAllgatherLinear},
      {isA<hir::LinearReduceScatter>, S::kLinearReduceScatter},
      {isA<TensorOp>, S::kCompute},
  };
  for (const auto& [is, kind] : kKinds) {
    if (is(expr)) {
      return kind;
    }
  }
  MDF_UNREACHABLE("the evaluator cannot run ", expr->toString());
}

// The tables of a program's statements, from one walk in program order.
HostIrEvaluator::Tables tablesOf(const hir::Scope& scope) {
  using S = HostIrEvaluator::Statement;
  HostIrEvaluator::Tables tables;
  // The fused statements are numbered per kind.
  std::map<S, int64_t> fused_count;
  hir::forEachExpr(scope, [&](const Expr* expr) {
    const S kind = classify(expr);
    tables.statements.emplace(expr, kind);
    if (kind == S::kAllocate) {
      const auto* alloc = static_cast<const hir::Allocate*>(expr);
      if (alloc->isSymmetric()) {
        tables.symmetric_numbers.emplace(
            alloc, static_cast<int64_t>(tables.symmetric_numbers.size()));
      }
    } else if (kind == S::kCommunication) {
      const auto* comm = static_cast<const hir::Communication*>(expr);
      tables.names.emplace(
          comm,
          std::make_shared<const std::string>(detail::concat(
              communicationTypeName(comm->type()),
              " (Communication ",
              comm->name(),
              ")")));
    } else if (kind == S::kAllgatherLinear || kind == S::kLinearReduceScatter) {
      const auto* fused =
          static_cast<const hir::FusedMatmulCommunication*>(expr);
      tables.fused.emplace(
          fused,
          HostIrEvaluator::Tables::Fused{
              fused_count[kind]++,
              // The backend's messages name the team.
              detail::concat(fused->opName(), " ", fused->name())});
    }
  });
  return tables;
}

} // namespace

HostIrEvaluator::HostIrEvaluator(
    const hir::HostIrContainer& hic,
    c10::Device device,
    Communicator* communicator,
    std::unique_ptr<CudaBackend>* cuda,
    ExecuteOptions::Choice graphs)
    : hic_(hic),
      device_(device),
      communicator_(communicator),
      streams_(device),
      cuda_(cuda != nullptr ? *cuda : own_cuda_),
      tables_(tablesOf(hic_.topLevel())) {
  graphs_by_default_ = graphs == ExecuteOptions::Choice::kDefault;
  if (graphs != ExecuteOptions::Choice::kOff) {
    graphs_ = std::make_unique<ProgramGraphs>(
        device,
        communicates(hic_.topLevel()) ? communicator : nullptr,
        &cuda_,
        graphs_by_default_);
  }
}

void HostIrEvaluator::dropGraphs() {
  if (graphs_ != nullptr) {
    const ProgramGraphs::Stats stats = graphs_->stats();
    graphs_ = std::make_unique<ProgramGraphs>(
        device_,
        communicates(hic_.topLevel()) ? communicator_ : nullptr,
        &cuda_,
        graphs_by_default_);
    graphs_->addStats(stats);
  }
}

const ProgramGraphs* HostIrEvaluator::graphs() const {
  return graphs_.get();
}

HostIrEvaluator::~HostIrEvaluator() {
  if (cuda_ != nullptr || graphs_ != nullptr) {
    // Copies into and out of the symmetric buffers, and replays of the
    // graphs about to be destroyed, may still be queued.
    // At process exit the CUDA runtime may be gone already, and its work
    // with it: a destructor must not throw.
    try {
      c10::impl::VirtualGuardImpl(device_.type())
          .synchronizeDevice(device_.index());
    } catch (const std::exception&) {
    }
  }
}

std::vector<at::Tensor> HostIrEvaluator::run(
    const std::vector<at::Tensor>& inputs,
    const ScalarEvaluator& extents,
    uint64_t rng_base,
    const std::vector<Literal::Value>& scalars) {
  MDF_CHECK_EQ(inputs.size(), hic_.inputs().size());
  MDF_CHECK_EQ(scalars.size(), hic_.fusion().scalarInputs().size());
  std::optional<c10::DeviceGuard> device_guard;
  if (device_.is_cuda()) {
    device_guard.emplace(device_);
  }
  // Each scalar input's value as its dtype holds it.
  std::vector<c10::Scalar> values;
  const std::vector<Literal*>& scalar_inputs = hic_.fusion().scalarInputs();
  for (size_t i = 0; i < scalars.size(); ++i) {
    values.push_back(
        scalarOf(Literal::as(scalars[i], scalar_inputs[i]->dtype())));
  }
  if (graphs_ != nullptr) {
    return graphs_->run(inputs, values, rng_base, [&](bool capturing) {
      return runStatements(inputs, values, extents, rng_base, capturing);
    });
  }
  return runStatements(inputs, values, extents, rng_base, /*capturing=*/false);
}

std::vector<at::Tensor> HostIrEvaluator::runStatements(
    const std::vector<at::Tensor>& inputs,
    const std::vector<c10::Scalar>& scalars,
    const ScalarEvaluator& extents,
    uint64_t rng_base,
    bool capturing) {
  StreamRestorer restore_stream(streams_);

  RunState state;
  state.scalars = extents;
  const std::vector<Literal*>& scalar_inputs = hic_.fusion().scalarInputs();
  for (size_t i = 0; i < scalars.size(); ++i) {
    state.literals.emplace(scalar_inputs[i], scalars[i]);
  }
  state.rng_base = rng_base;
  state.capturing = capturing;
  for (size_t i = 0; i < inputs.size(); ++i) {
    state.tensors.emplace(hic_.inputs()[i], inputs[i]);
  }
  Interpreter(state, device_, communicator_, streams_, cuda_, tables_)
      .runScope(hic_.topLevel());
  MDF_CHECK(state.pending.empty(), "a communication was never waited for");

  std::vector<at::Tensor> outputs;
  for (const TensorView* out : hic_.outputs()) {
    auto it = state.tensors.find(out);
    if (it == state.tensors.end()) {
      // An output on a mesh without this device: nothing to return.
      MDF_CHECK(
          out->hasDeviceMesh() && communicator_ != nullptr &&
              !out->deviceMesh()->has(communicator_->rank()),
          "output ",
          out->toString(),
          " unset");
      outputs.push_back(at::empty(
          {0},
          at::TensorOptions()
              .dtype(toScalarType(out->dtype()))
              .device(device_)));
      continue;
    }
    outputs.push_back(expandBroadcasts(it->second, out, state.scalars));
  }
  return outputs;
}

} // namespace mdfuser
