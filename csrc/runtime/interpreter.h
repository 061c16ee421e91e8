// SPDX-License-Identifier: MIT
#pragma once

// The evaluator's statement runner (private to runtime/evaluator.cpp, which
// runs a program with it): what one run binds, and the Interpreter that runs
// each statement. Its statements on this device are in interpreter.cpp, its
// communications in interpreter_communication.cpp.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/Scalar.h>
#include <c10/core/Stream.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "host_ir/communication.h"
#include "host_ir/fused_matmul_communication.h"
#include "host_ir/nodes.h"
#include "ir/literal.h"
#include "ir/scalar_eval.h"
#include "runtime/collectives.h"
#include "runtime/evaluator.h"
#include "runtime/kernels.h"
#include "runtime/streams.h"

namespace c10d {
class Backend;
} // namespace c10d

namespace mdfuser {
namespace evaluator_detail {

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

// A literal's value, as ATen takes it.
c10::Scalar scalarOf(const Literal::Value& value);

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
  // The statements on this device (interpreter.cpp).
  at::Tensor& tensor(const TensorView* tv);
  int64_t scalar(const Scalar* s) const;
  c10::Stream stream(const hir::Stream* s);
  void run(const Expr* expr);
  // Whether a statement enqueues device work or allocates: what must happen
  // on a stream taking part in a capture. (A Synchronize is how a stream
  // joins one.)
  static bool enqueuesWork(HostIrEvaluator::Statement kind);
  void runLoop(const hir::ForLoop* loop);
  // The number, the same on every rank, of the stream that communications
  // posted now go on: the CUDA backend orders each stream's moves on
  // flags of their own (CudaBackend::kChannels of them).
  int64_t channelOf(const hir::Stream* s) const;
  // The channels of each lane of communication streams.
  static constexpr int64_t kChannelsALane = 256;
  void runAllocate(const hir::Allocate* alloc);
  // `op`'s operands bound; outputs only when `with_outputs`.
  KernelCall bind(const TensorOp& op, bool with_outputs = false);
  void runCompute(const TensorOp* op);
  static std::string shapesOf(const KernelCall& call);

  // Communications (interpreter_communication.cpp).
  CudaBackend& cuda();
  // The key of symmetric buffers that statement `number` of a kind
  // (`prefix`) keeps in this loop iteration for `shape` and `dtype`:
  // "S2.1:8x4:BFloat16" for the third symmetric Allocate, in iteration 1.
  std::string bufferKey(
      std::string_view prefix,
      int64_t number,
      at::IntArrayRef shape,
      at::ScalarType dtype) const;
  // A symmetric buffer of `shape`, the same one at each run of `alloc` in
  // the same loop iteration, and in every program of the fusion whose
  // symmetric Allocate of the same number asks for the same shape and dtype
  // and memory order (the key says which: "S2.1:8x4:BFloat16" for the
  // third one, in iteration 1, row-major).
  at::Tensor symmetricBuffer(const hir::Allocate* alloc, at::IntArrayRef shape);
  // A fused matmul–communication kernel (`kind` says which), on the current
  // stream. Its key ("AllgatherLinear0.1:4x8:BFloat16": the first
  // AllgatherLinear, in iteration 1, of this input shape and dtype) finds
  // the same symmetric buffers at every run, and in every program of the
  // fusion that runs the same statement.
  void runFused(
      const hir::FusedMatmulCommunication* fused,
      HostIrEvaluator::Statement kind);
  void runCommunication(const hir::Communication* comm);
  // Whether this rank is the root, this step, of a Broadcast whose root
  // changes at run time.
  bool isRootNow(const hir::Communication* comm) const;
  // "Allreduce (Communication 3) with team (0 1)", as errors name it.
  static std::string describe(
      CommunicationType type, int64_t name, const std::vector<int64_t>& team);
  static std::string describe(const hir::Communication* comm);
  // An NCCL collective that a rank of its team never reaches blocks the
  // stream that waits for it; the watchdog names it and ends the process
  // after the communicator's timeout (c10d's own watchdog, which names
  // neither the operation nor mdfuser's team, waits longer).
  void watch(
      const hir::Communication* comm,
      const PendingCollective& pending,
      c10d::Backend& backend);
  void runWait(const hir::Wait* wait);

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

} // namespace evaluator_detail
} // namespace mdfuser
