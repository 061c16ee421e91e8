// SPDX-License-Identifier: MIT
#include "runtime/evaluator.h"

#include <chrono>
#include <unordered_map>

#include <ATen/ops/copy.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "ir/errors.h"
#include "ir/ops.h"
#include "runtime/communicator.h"
#include "runtime/tensor_types.h"

namespace mdfuser {

namespace {

// Everything one run binds: scalars, buffers, captured streams and the
// collectives in flight.
struct RunState {
  ScalarEvaluator scalars;
  std::unordered_map<const TensorView*, at::Tensor> tensors;
  std::unordered_map<const hir::Stream*, c10::Stream> captured;
  std::unordered_map<const hir::Communication*, c10::intrusive_ptr<c10d::Work>>
      pending;
};

std::string teamString(const std::vector<int64_t>& team) {
  std::string s = "(";
  for (size_t i = 0; i < team.size(); ++i) {
    s += (i > 0 ? " " : "") + std::to_string(team[i]);
  }
  return s + ")";
}

// `buffer` seen with `shape`: the ATen operation's natural output shape,
// which differs from the buffer's only by size-1 device axes.
at::Tensor viewAs(const at::Tensor& buffer, at::IntArrayRef shape) {
  if (buffer.sizes() == shape) {
    return buffer;
  }
  return buffer.view(shape);
}

class Interpreter {
 public:
  Interpreter(
      RunState& state,
      c10::Device device,
      Communicator* communicator,
      StreamSet& streams)
      : state_(state),
        device_(device),
        communicator_(communicator),
        streams_(streams) {}

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
    if (s->index() != nullptr) {
      return streams_.worker(scalar(s->index()));
    }
    auto it = state_.captured.find(s);
    MDF_CHECK(it != state_.captured.end(), s->toString(), " was not captured");
    return it->second;
  }

  void run(const Expr* expr) {
    if (const auto* loop = dynamic_cast<const hir::ForLoop*>(expr)) {
      runLoop(loop);
    } else if (
        const auto* get = dynamic_cast<const hir::GetCurrentStream*>(expr)) {
      state_.captured.insert_or_assign(get->stream(), streams_.current());
    } else if (
        const auto* set = dynamic_cast<const hir::SetCurrentStream*>(expr)) {
      streams_.setCurrent(stream(set->stream()));
    } else if (const auto* sync = dynamic_cast<const hir::Synchronize*>(expr)) {
      streams_.waitFor(stream(sync->stream()));
    } else if (const auto* alloc = dynamic_cast<const hir::Allocate*>(expr)) {
      runAllocate(alloc);
    } else if (
        const auto* dealloc = dynamic_cast<const hir::Deallocate*>(expr)) {
      // The buffer may have been allocated on another stream than the one
      // its last use ran on.
      streams_.recordUse(tensor(dealloc->buffer()).storage().data_ptr());
      state_.tensors.erase(dealloc->buffer());
    } else if (
        const auto* view = dynamic_cast<const hir::ShardByStream*>(expr)) {
      state_.tensors.insert_or_assign(
          view->out(),
          tensor(view->in())
              .narrow(
                  view->axis(), scalar(view->start()), scalar(view->length())));
    } else if (
        const auto* comm = dynamic_cast<const hir::Communication*>(expr)) {
      runCommunication(comm);
    } else if (const auto* wait = dynamic_cast<const hir::Wait*>(expr)) {
      runWait(wait);
    } else if (const auto* op = dynamic_cast<const TensorOp*>(expr)) {
      runCompute(op);
    } else {
      MDF_UNREACHABLE("the evaluator cannot run ", expr->toString());
    }
  }

  void runLoop(const hir::ForLoop* loop) {
    const int64_t start = scalar(loop->start());
    const int64_t stop = scalar(loop->stop());
    for (int64_t i = start; i < stop; ++i) {
      state_.scalars.bind(loop->index(), i);
      runScope(loop->body());
    }
  }

  void runAllocate(const hir::Allocate* alloc) {
    std::vector<int64_t> shape;
    for (const Scalar* extent : alloc->shape()) {
      shape.push_back(scalar(extent));
    }
    const auto options = at::TensorOptions()
                             .dtype(toScalarType(alloc->buffer()->dtype()))
                             .device(device_);
    state_.tensors.insert_or_assign(
        alloc->buffer(),
        alloc->zeroInit() ? at::zeros(shape, options)
                          : at::empty(shape, options));
  }

  void runCompute(const TensorOp* op) {
    at::Tensor& out = tensor(op->out());
    if (const auto* linear = dynamic_cast<const LinearOp*>(op)) {
      const at::Tensor& in = tensor(linear->in());
      const at::Tensor& weight = tensor(linear->weight());
      std::optional<at::Tensor> bias;
      if (linear->bias() != nullptr) {
        bias = tensor(linear->bias());
      }
      std::vector<int64_t> shape(in.sizes().begin(), in.sizes().end() - 1);
      shape.push_back(weight.size(0));
      at::Tensor out_view = viewAs(out, shape);
      at::linear_out(out_view, in, weight, bias);
    } else if (const auto* matmul = dynamic_cast<const MatmulOp*>(op)) {
      const at::Tensor& a = tensor(matmul->a());
      const at::Tensor& b = tensor(matmul->b());
      std::vector<int64_t> shape(a.sizes().begin(), a.sizes().end() - 1);
      shape.push_back(b.size(1));
      at::Tensor out_view = viewAs(out, shape);
      at::matmul_out(out_view, a, b);
    } else if (const auto* set = dynamic_cast<const LoadStoreOp*>(op)) {
      out.copy_(tensor(set->in()));
    } else if (const auto* sum = dynamic_cast<const ReductionOp*>(op)) {
      std::vector<int64_t> dims;
      const std::vector<IterDomain*>& logical = sum->out()->logical();
      for (size_t i = 0; i < logical.size(); ++i) {
        if (logical[i]->isReduction()) {
          dims.push_back(static_cast<int64_t>(i));
        }
      }
      at::sum_out(out, tensor(sum->in()), dims);
    } else {
      MDF_UNREACHABLE("the evaluator cannot run ", op->toString());
    }
  }

  void runCommunication(const hir::Communication* comm) {
    MDF_CHECK(
        comm->type() == CommunicationType::Allreduce,
        "the evaluator cannot run a ",
        comm->type());
    at::Tensor& in = tensor(comm->in());
    at::Tensor& out = tensor(comm->out());
    MDF_CHECK_EQ(in.numel(), out.numel(), "allreduce buffers differ in size");
    MDF_CHECK(out.is_contiguous(), "allreduce output must be contiguous");
    // c10d reduces in place: the output starts as this rank's contribution.
    if (!out.is_same(in)) {
      out.copy_(viewAs(in, out.sizes()));
    }
    if (comm->team().size() == 1) {
      return;
    }
    MDF_CHECK(communicator_ != nullptr, "a communication needs a communicator");
    c10d::Backend& backend =
        communicator_->backend(comm->team(), comm->backend());
    std::vector<at::Tensor> buffers = {out};
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::SUM;
    state_.pending.insert_or_assign(comm, backend.allreduce(buffers, options));
  }

  void runWait(const hir::Wait* wait) {
    const hir::Communication* comm = wait->communication();
    auto it = state_.pending.find(comm);
    if (it == state_.pending.end()) {
      // Nothing was posted: a team of one device.
      return;
    }
    c10::intrusive_ptr<c10d::Work> work = std::move(it->second);
    state_.pending.erase(it);
    const auto start = std::chrono::steady_clock::now();
    try {
      // On CUDA this makes the current stream wait; on the CPU the host
      // waits, bounded by the backend's timeout.
      work->wait();
    } catch (const std::exception& e) {
      const double waited = std::chrono::duration<double>(
                                std::chrono::steady_clock::now() - start)
                                .count();
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
              communicationTypeName(comm->type()),
              " (Communication ",
              comm->name(),
              ") with team ",
              teamString(comm->team()),
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
};

} // namespace

HostIrEvaluator::HostIrEvaluator(
    const hir::HostIrContainer& hic,
    c10::Device device,
    Communicator* communicator)
    : hic_(hic),
      device_(device),
      communicator_(communicator),
      streams_(device) {}

HostIrEvaluator::~HostIrEvaluator() = default;

std::vector<at::Tensor> HostIrEvaluator::run(
    const std::vector<at::Tensor>& inputs, const ScalarEvaluator& extents) {
  MDF_CHECK_EQ(inputs.size(), hic_.inputs().size());
  std::optional<c10::DeviceGuard> device_guard;
  if (device_.is_cuda()) {
    device_guard.emplace(device_);
  }
  StreamRestorer restore_stream(streams_);

  RunState state;
  state.scalars = extents;
  for (size_t i = 0; i < inputs.size(); ++i) {
    state.tensors.emplace(hic_.inputs()[i], inputs[i]);
  }
  Interpreter(state, device_, communicator_, streams_)
      .runScope(hic_.topLevel());
  MDF_CHECK(state.pending.empty(), "a communication was never waited for");

  std::vector<at::Tensor> outputs;
  for (const TensorView* out : hic_.outputs()) {
    auto it = state.tensors.find(out);
    MDF_CHECK(it != state.tensors.end(), "output ", out->toString(), " unset");
    outputs.push_back(it->second);
  }
  return outputs;
}

} // namespace mdfuser
