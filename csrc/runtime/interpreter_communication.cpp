// SPDX-License-Identifier: MIT
//
// The Interpreter's communications: collectives posted through c10d or the
// CUDA backend (with its symmetric buffers and fused matmul kernels), the
// watchdog's watch over NCCL's, and the waits for them.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "ir/errors.h"
#include "runtime/communicator.h"
#include "runtime/cuda_backend.h"
#include "runtime/fused_matmul.h"
#include "runtime/interpreter.h"
#include "runtime/tensor_types.h"
#include "runtime/watchdog.h"

namespace mdfuser {
namespace evaluator_detail {

namespace {

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

} // namespace

CudaBackend& Interpreter::cuda() {
  if (cuda_ == nullptr) {
    MDF_CHECK(
        communicator_ != nullptr && device_.is_cuda(),
        "the CUDA communication backend needs a communicator and a CUDA "
        "device");
    cuda_ = std::make_unique<CudaBackend>(*communicator_, device_);
  }
  return *cuda_;
}

std::string Interpreter::bufferKey(
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

at::Tensor Interpreter::symmetricBuffer(
    const hir::Allocate* alloc, at::IntArrayRef shape) {
  const auto number = tables_.symmetric_numbers.find(alloc);
  MDF_CHECK(
      number != tables_.symmetric_numbers.end(), "an unnumbered Allocate");
  std::string key = bufferKey(
      "S", number->second, shape, toScalarType(alloc->buffer()->dtype()));
  // The order of the axes in memory: peers write into this buffer as
  // their program lays it out, so two layouts never share one.
  for (size_t a = 0; a < alloc->strideOrder().size(); ++a) {
    key += (a == 0 ? ":order" : ",") + std::to_string(alloc->strideOrder()[a]);
  }
  at::Tensor buffer = cuda().buffers().get(
      key, alloc->team(), shape, toScalarType(alloc->buffer()->dtype()));
  if (alloc->zeroInit()) {
    buffer.zero_();
  }
  return buffer;
}

void Interpreter::runFused(
    const hir::FusedMatmulCommunication* fused,
    HostIrEvaluator::Statement kind) {
  const auto found = tables_.fused.find(fused);
  MDF_CHECK(found != tables_.fused.end(), "an unnumbered ", fused->opName());
  const at::Tensor& in = tensor(fused->in());
  const at::Tensor& weight = tensor(fused->weight());
  // The statement keeps buffers of its shapes and its kernel's: a program
  // of other shapes has statements of its own.
  std::string key = bufferKey(
      fused->opName(), found->second.number, in.sizes(), in.scalar_type());
  key += ":n" + std::to_string(weight.size(0)) + ":" +
         std::string(fused->kernelName());
  const auto kernel = kind == HostIrEvaluator::Statement::kAllgatherLinear
                          ? fusedAllgatherLinear
                          : fusedLinearReduceScatterPulled;
  kernel(
      cuda(),
      fused->team(),
      in,
      weight,
      tensor(fused->out()),
      key,
      found->second.what,
      state_.rng_base);
}

void Interpreter::runCommunication(const hir::Communication* comm) {
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
    // A receive posted early: the copy waits for its data's stream as it is
    // now, once the handshake is enqueued.
    std::function<void()> before_copy;
    if (comm->sendsAfter() != nullptr) {
      before_copy = [this, data = stream(comm->sendsAfter())] {
        streams_.waitFor(data);
      };
    }
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
            state_.rng_base,
            before_copy));
    return;
  }
  c10d::Backend& backend = communicator_->backend(spec.team, comm->backend());
  PendingCollective pending = postCollective(backend, request);
  if (comm->backend() == hir::CommunicatorBackend::kNccl && !state_.capturing) {
    // A capture's work cannot be queried: its replays are watched.
    watch(comm, pending, backend);
  }
  state_.pending.insert_or_assign(comm, std::move(pending));
}

bool Interpreter::isRootNow(const hir::Communication* comm) const {
  const int64_t rank = communicator_ == nullptr ? 0 : communicator_->rank();
  return comm->team().at(scalar(comm->rootIndex())) == rank;
}

std::string Interpreter::describe(
    CommunicationType type, int64_t name, const std::vector<int64_t>& team) {
  return detail::concat(
      communicationTypeName(type),
      " (Communication ",
      name,
      ") with team ",
      hir::teamString(team));
}
std::string Interpreter::describe(const hir::Communication* comm) {
  return describe(comm->type(), comm->name(), comm->team());
}

void Interpreter::watch(
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

void Interpreter::runWait(const hir::Wait* wait) {
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
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
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

} // namespace evaluator_detail
} // namespace mdfuser
