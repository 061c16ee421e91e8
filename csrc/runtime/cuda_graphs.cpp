// SPDX-License-Identifier: MIT
#include "runtime/cuda_graphs.h"

#include <cstring>
#include <string>
#include <unordered_map>

#include "host_ir/communication.h"
#include "host_ir/fused_matmul_communication.h"
#include "host_ir/host_ir_container.h"
#include "host_ir/nodes.h"
#include "ir/errors.h"
#include "ir/ops.h"
#include "runtime/communicator.h"
#include "runtime/cuda_backend.h"
#include "runtime/cuda_util.h"
#include "runtime/fused_matmul.h"
#include "runtime/watchdog.h"

#ifdef MDFUSER_HAS_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace mdfuser {

namespace {

// The user errors of one statement (see checkCudaGraphs of a program).
void checkStatement(const Expr* expr) {
  if (const auto* op = dynamic_cast<const TensorOp*>(expr)) {
    MDF_USER_CHECK(
        op->type() != OpType::Uniform && op->type() != OpType::Normal,
        "the cuda_graph option cannot replay ",
        op->opName(),
        ", which draws new numbers at every run; a replay would draw the "
        "same: ",
        op->toString());
  }
}

} // namespace

void checkCudaGraphs(const hir::HostIrContainer& program, c10::Device device) {
  MDF_USER_CHECK(
      device.is_cuda(),
      "the cuda_graph option replays CUDA graphs, which need CUDA tensors; "
      "the inputs are on ",
      device);
  hir::forEachExpr(program.topLevel(), checkStatement);
}

bool useCudaGraphsByDefault(
    const hir::HostIrContainer& program, c10::Device device) {
  if (!device.is_cuda()) {
    return false;
  }
  bool moves = false;
  bool replayable = true;
  hir::forEachExpr(program.topLevel(), [&](const Expr* expr) {
    if (const auto* c = dynamic_cast<const hir::Communication*>(expr)) {
      const bool move = c->backend() == hir::CommunicatorBackend::kCuda &&
                        c->type() == CommunicationType::CollectivePermute;
      moves = moves || move;
      replayable = replayable && move;
    } else if (const auto* op = dynamic_cast<const TensorOp*>(expr)) {
      replayable = replayable && op->type() != OpType::Uniform &&
                   op->type() != OpType::Normal;
    } else if (
        dynamic_cast<const hir::FusedMatmulCommunication*>(expr) != nullptr) {
      // The CUDA backend's kernels and moves, replayed as its rings are.
      moves = true;
    }
  });
  return moves && replayable;
}

#ifdef MDFUSER_HAS_CUDA

namespace {

// A value a capture bakes into its kernels, as a key: a double's bits, an
// integer or bool itself.
int64_t keyOf(const c10::Scalar& value) {
  int64_t bits = 0;
  if (value.isFloatingPoint()) {
    const double v = value.toDouble();
    std::memcpy(&bits, &v, sizeof(bits));
  } else {
    bits = value.toLong();
  }
  return bits;
}

// What a graph of the program reads: each CUDA input's address, and the
// value of each CPU scalar and of each scalar input.
std::vector<int64_t> addressesOf(
    const std::vector<at::Tensor>& inputs,
    const std::vector<c10::Scalar>& values) {
  std::vector<int64_t> key;
  key.reserve(inputs.size() + values.size());
  for (const at::Tensor& t : inputs) {
    if (!t.defined()) {
      key.push_back(-1);
    } else if (t.is_cpu()) {
      key.push_back(keyOf(t.item()));
    } else {
      key.push_back(reinterpret_cast<int64_t>(t.data_ptr()));
    }
  }
  for (const c10::Scalar& value : values) {
    key.push_back(keyOf(value));
  }
  return key;
}

const c10::StorageImpl* storageOf(const at::Tensor& t) {
  return t.defined() && t.has_storage() ? t.storage().unsafeGetStorageImpl()
                                        : nullptr;
}

// Whether an output shares its storage with an input: a graph would hand
// back the capture's input, not the caller's.
bool outputsAliasInputs(
    const std::vector<at::Tensor>& outputs,
    const std::vector<at::Tensor>& inputs) {
  for (const at::Tensor& out : outputs) {
    const c10::StorageImpl* storage = storageOf(out);
    if (storage == nullptr) {
      continue;
    }
    for (const at::Tensor& in : inputs) {
      if (storageOf(in) == storage) {
        return true;
      }
    }
  }
  return false;
}

} // namespace

struct ProgramGraphs::Graph {
  std::unique_ptr<at::cuda::CUDAGraph> graph;
  // The graph's own output buffers; the caller gets views of them.
  std::vector<at::Tensor> outputs;
  // The events that mark its replays' ends for the watchdog, reused.
  EventPool events;
  // The references to each output's storage when nothing outside held
  // one: this graph's outputs and the views' bases among them.
  std::unordered_map<const c10::StorageImpl*, size_t> held_by_graph;

  void noteReferences() {
    for (const at::Tensor& t : outputs) {
      if (const c10::StorageImpl* storage = storageOf(t)) {
        held_by_graph[storage] = t.storage().use_count();
      }
    }
  }

  // True when no tensor outside the graph holds an output's storage (each
  // tensor holds a reference to its storage).
  bool outputsReleased() const {
    for (const at::Tensor& t : outputs) {
      if (const c10::StorageImpl* storage = storageOf(t)) {
        if (t.storage().use_count() > held_by_graph.at(storage)) {
          return false;
        }
      }
    }
    return true;
  }
};

struct ProgramGraphs::AddressSet {
  std::vector<int64_t> addresses;
  bool outputs_alias_inputs = false;
  std::vector<std::unique_ptr<Graph>> graphs;
};

ProgramGraphs::ProgramGraphs(
    c10::Device device,
    Communicator* communicator,
    const std::unique_ptr<CudaBackend>* cuda,
    bool by_default)
    : device_(device),
      communicator_(communicator),
      cuda_(cuda),
      by_default_(by_default) {
  MDF_CHECK(device.is_cuda(), "CUDA graphs need a CUDA device");
  c10::cuda::CUDAGuard guard(device);
  cudaStream_t stream = nullptr;
  MDF_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  capture_stream_ = std::shared_ptr<void>(
      stream, [](void* s) { cudaStreamDestroy(static_cast<cudaStream_t>(s)); });
}

ProgramGraphs::~ProgramGraphs() = default;

std::vector<at::Tensor> ProgramGraphs::run(
    const std::vector<at::Tensor>& inputs,
    const std::vector<c10::Scalar>& values,
    uint64_t run,
    const Run& statements) {
  c10::cuda::CUDAGuard guard(device_);
  if (given_up_ ||
      isCapturing(c10::cuda::getCurrentCUDAStream(device_.index()).stream())) {
    // A program that cannot be captured, or a caller that captures a graph
    // of its own, which takes the statements.
    ++stats_.eager;
    return statements(/*capturing=*/false);
  }
  std::vector<int64_t> addresses = addressesOf(inputs, values);
  auto it = sets_.begin();
  while (it != sets_.end() && it->addresses != addresses) {
    ++it;
  }
  if (it == sets_.end()) {
    // New addresses: run once before any capture, as a capture needs
    // (libraries set up their handles and workspaces, the CUDA backend its
    // buffers), and to see whether the outputs alias the inputs.
    if (sets_.size() == kAddressSets) {
      sets_.pop_back();
    }
    std::vector<at::Tensor> outputs = statements(/*capturing=*/false);
    ++stats_.eager;
    AddressSet set;
    set.addresses = std::move(addresses);
    set.outputs_alias_inputs = outputsAliasInputs(outputs, inputs);
    sets_.push_front(std::move(set));
    return outputs;
  }
  sets_.splice(sets_.begin(), sets_, it);
  AddressSet& set = sets_.front();
  if (!set.outputs_alias_inputs) {
    for (const std::unique_ptr<Graph>& graph : set.graphs) {
      if (graph->outputsReleased()) {
        return replay(*graph, run);
      }
    }
    if (set.graphs.size() < kGraphsPerSet) {
      if (!by_default_) {
        return capture(set, run, statements);
      }
      try {
        return capture(set, run, statements);
      } catch (const std::exception&) {
        // Graphs nobody asked for must not fail a program that runs: the
        // capture ran nothing (every peer's call still meets this one's
        // statements), so they run now, and at every later call.
        (void)cudaGetLastError();
        given_up_ = true;
        sets_.clear();
        ++stats_.failed_captures;
        ++stats_.eager;
        return statements(/*capturing=*/false);
      }
    }
  }
  ++stats_.eager;
  return statements(/*capturing=*/false);
}

std::vector<at::Tensor> ProgramGraphs::capture(
    AddressSet& set, uint64_t run, const Run& statements) {
  auto graph = std::make_unique<Graph>();
  graph->graph = std::make_unique<at::cuda::CUDAGraph>(/*keep_graph=*/true);
  {
    c10::cuda::CUDAStreamGuard on_capture_stream(
        c10::cuda::getStreamFromExternal(
            static_cast<cudaStream_t>(capture_stream_.get()), device_.index()));
    // Thread-local: other threads (the watchdog's, c10d's) may query their
    // events meanwhile.
    graph->graph->capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
    try {
      graph->outputs = statements(/*capturing=*/true);
    } catch (...) {
      try {
        graph->graph->capture_end();
      } catch (const std::exception&) {
        // The capture was invalidated by the failure: nothing to keep.
      }
      throw;
    }
    graph->graph->capture_end();
    graph->noteReferences();
    graph->graph->instantiate();
  }
  ++stats_.captures;
  set.graphs.push_back(std::move(graph));
  return replay(*set.graphs.back(), run);
}

std::vector<at::Tensor> ProgramGraphs::replay(Graph& graph, uint64_t run) {
  if (cuda_ != nullptr && *cuda_ != nullptr) {
    // What a fused kernel of the previous replay reported, raised before
    // this one as the statement's own call would.
    raiseFusedKernelErrors(**cuda_);
  }
  graph.graph->replay();
  ++stats_.replays;
  if (communicator_ != nullptr) {
    // A replay waits for peers as the communications in it do: bounded the
    // same way, as a whole.
    Event done = graph.events.record(
        c10::cuda::getCurrentCUDAStream(device_.index()).stream());
    Watchdog::Entry entry;
    entry.finished = [done] { return eventFinished(done); };
    entry.describe = [rank = communicator_->rank()] {
      return detail::concat(
          "rank ",
          rank,
          " in a CUDA graph replay of a program that communicates: not "
          "finished; a peer did not reach the same run, or ended");
    };
    entry.timeout = communicator_->options().timeout;
    entry.device = device_.index();
    // Whichever peer the graph's communications wait for.
    entry.peers = communicator_->world();
    entry.epoch = communicator_->epoch();
    entry.run = run;
    if (cuda_ != nullptr && *cuda_ != nullptr) {
      entry.release = (*cuda_)->releaser();
    }
    Watchdog::instance().watch(std::move(entry));
  }
  std::vector<at::Tensor> outputs;
  outputs.reserve(graph.outputs.size());
  for (const at::Tensor& out : graph.outputs) {
    // Views, so that what the caller keeps shows in the storage's count.
    outputs.push_back(out.defined() ? out.alias() : out);
  }
  return outputs;
}

bool isCapturing(c10::Stream stream) {
  if (stream.device_type() != c10::DeviceType::CUDA) {
    return false;
  }
  return isCapturing(
      c10::cuda::CUDAStream(c10::cuda::CUDAStream::UNCHECKED, stream).stream());
}

#else // !MDFUSER_HAS_CUDA

struct ProgramGraphs::Graph {};
struct ProgramGraphs::AddressSet {};

ProgramGraphs::ProgramGraphs(
    c10::Device device,
    Communicator* communicator,
    const std::unique_ptr<CudaBackend>* cuda,
    bool by_default)
    : device_(device),
      communicator_(communicator),
      cuda_(cuda),
      by_default_(by_default) {
  MDF_USER_ERROR("this build of mdfuser has no CUDA graphs");
}

ProgramGraphs::~ProgramGraphs() = default;

std::vector<at::Tensor> ProgramGraphs::run(
    const std::vector<at::Tensor>&,
    const std::vector<c10::Scalar>&,
    uint64_t,
    const Run&) {
  MDF_UNREACHABLE();
}

bool isCapturing(c10::Stream) {
  return false;
}

#endif

} // namespace mdfuser
