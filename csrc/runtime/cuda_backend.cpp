// SPDX-License-Identifier: MIT
#include "runtime/cuda_backend.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include <torch/csrc/distributed/c10d/Work.hpp>

#include "ir/errors.h"
#include "runtime/communicator.h"
#include "runtime/cuda_check.h"
#include "runtime/watchdog.h"

#ifdef MDFUSER_HAS_CUDA
#include <c10/cuda/CUDAStream.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#endif

namespace mdfuser {

#ifdef MDFUSER_HAS_CUDA

namespace {

// cuStreamBatchMemOp, from the driver the runtime loaded.
using BatchMemOp =
    CUresult (*)(CUstream, unsigned int, CUstreamBatchMemOpParams*, unsigned);

// A driver function the runtime loaded, by name, as of CUDA 12.0.
void* driverFunction(const char* name) {
  void* found_fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  const cudaError_t status = cudaGetDriverEntryPointByVersion(
      name, &found_fn, 12000, cudaEnableDefault, &found);
  MDF_CHECK(
      status == cudaSuccess && found == cudaDriverEntryPointSuccess &&
          found_fn != nullptr,
      "the CUDA driver does not provide ",
      name,
      ", which the CUDA communication backend needs");
  return found_fn;
}

template <typename Fn>
Fn driver(const char* name) {
  return reinterpret_cast<Fn>(driverFunction(name));
}

BatchMemOp batchMemOp() {
  static const BatchMemOp fn = driver<BatchMemOp>("cuStreamBatchMemOp");
  return fn;
}

// The driver's graph functions that replays of captured permutes use.
struct GraphDriver {
  using GetNodes = CUresult (*)(CUgraph, CUgraphNode*, size_t*);
  using NodeGetType = CUresult (*)(CUgraphNode, CUgraphNodeType*);
  using GetParams = CUresult (*)(CUgraphNode, CUDA_BATCH_MEM_OP_NODE_PARAMS*);
  using ExecSetParams = CUresult (*)(
      CUgraphExec, CUgraphNode, const CUDA_BATCH_MEM_OP_NODE_PARAMS*);

  GetNodes get_nodes = driver<GetNodes>("cuGraphGetNodes");
  NodeGetType node_get_type = driver<NodeGetType>("cuGraphNodeGetType");
  GetParams get_params = driver<GetParams>("cuGraphBatchMemOpNodeGetParams");
  ExecSetParams exec_set_params =
      driver<ExecSetParams>("cuGraphExecBatchMemOpNodeSetParams");

  static const GraphDriver& instance() {
    static const GraphDriver functions;
    return functions;
  }
};

void check(CUresult result, const char* what) {
  MDF_CHECK(
      result == CUDA_SUCCESS, what, " failed with CUDA driver error ", result);
}

CUdeviceptr address(void* p) {
  return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p));
}

// Enqueues on `stream`, in one driver call: set `signal` (a peer's
// counter) to `n`, then wait until `wait` (this member's) is at least `n`.
// A write with default flags is ordered after the work before it on the
// stream, copies included.
void signalThenWait(
    cudaStream_t stream, CUdeviceptr signal, CUdeviceptr wait, uint32_t n) {
  CUstreamBatchMemOpParams ops[2] = {};
  ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
  ops[0].writeValue.address = signal;
  ops[0].writeValue.value = n;
  ops[1].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
  ops[1].waitValue.address = wait;
  ops[1].waitValue.value = n;
  ops[1].waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
  check(batchMemOp()(stream, 2, ops, 0), "cuStreamBatchMemOp");
}

// A CUDA event without timing, destroyed with its last owner (the destroy
// is deferred by CUDA until the work it marks is done).
using Event = std::shared_ptr<CUevent_st>;

Event recordEvent(cudaStream_t stream) {
  cudaEvent_t event = nullptr;
  MDF_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  Event owned(event, [](cudaEvent_t e) { cudaEventDestroy(e); });
  MDF_CUDA_CHECK(cudaEventRecord(event, stream));
  return owned;
}

} // namespace

// The counters of one team: for each kind (ready, done), channel and
// member that writes it, one uint32 on every member, and this member's
// count of the permutes posted on each channel.
struct CudaBackend::Team {
  enum Kind { kReady = 0, kDone = 1 };

  std::vector<int64_t> members;
  int64_t me = 0;
  at::Tensor counters;
  // Every member's counters, in this process's address space.
  std::vector<char*> bases;
  std::vector<uint32_t> posted = std::vector<uint32_t>(kChannels, 0);

  int64_t size() const {
    return static_cast<int64_t>(members.size());
  }
  // The counter `kind` of `channel` that `writer` sets, on `holder`.
  CUdeviceptr slot(
      int64_t holder, Kind kind, int64_t channel, int64_t writer) const {
    const int64_t index = (kind * kChannels + channel) * size() + writer;
    return address(bases[holder] + index * sizeof(uint32_t));
  }
};

// A capture in progress: every team's counts when it began, and the team
// and channel of each counter its permutes write or wait on.
struct CudaBackend::Capturing {
  std::map<Team*, std::vector<uint32_t>> posted_before;
  std::unordered_map<CUdeviceptr, std::pair<Team*, int64_t>> counters;
};

// The memory operations of a graph's permutes: for each batch node, its
// operations, and for each operation the team and channel it counts on and
// its place among the graph's permutes of that channel (1 for the first).
struct CudaBackend::Capture {
  struct Operation {
    Team* team = nullptr;
    int64_t channel = 0;
    uint32_t place = 0;
  };
  struct Node {
    CUgraphNode node = nullptr;
    CUcontext context = nullptr;
    std::vector<CUstreamBatchMemOpParams> params;
    std::vector<Operation> operations;
  };
  std::vector<Node> nodes;
  // The permutes one replay posts, per team and channel.
  std::map<std::pair<Team*, int64_t>, uint32_t> posted;
};

CudaBackend::CudaBackend(Communicator& communicator, c10::Device device)
    : communicator_(communicator),
      device_(device),
      buffers_(communicator, device) {
  batchMemOp();
}

CudaBackend::~CudaBackend() = default;

CudaBackend::Team& CudaBackend::team(const std::vector<int64_t>& members) {
  auto it = teams_.find(members);
  if (it != teams_.end()) {
    return *it->second;
  }
  MDF_CHECK(
      capturing_ == nullptr,
      "the CUDA backend sets up team ",
      hir::teamString(members),
      " inside a CUDA graph capture; a program runs once before it is "
      "captured");
  auto t = std::make_unique<Team>();
  t->members = members;
  t->me = std::find(members.begin(), members.end(), communicator_.rank()) -
          members.begin();
  MDF_CHECK(
      t->me < t->size(),
      "rank ",
      communicator_.rank(),
      " is not in the team ",
      hir::teamString(members));
  t->counters = buffers_.get(
      "counters" + hir::teamString(members),
      members,
      {2 * kChannels * t->size()},
      at::kInt,
      /*zeroed=*/true);
  for (int64_t peer = 0; peer < t->size(); ++peer) {
    t->bases.push_back(
        static_cast<char*>(buffers_.peerAddress(t->counters, peer)));
  }
  return *teams_.emplace(members, std::move(t)).first->second;
}

PendingCollective CudaBackend::permute(
    const std::vector<int64_t>& members,
    const at::Tensor& in,
    const at::Tensor& out,
    const at::Tensor& landing,
    int64_t channel,
    const std::string& what) {
  MDF_CHECK(
      channel >= 0 && channel < kChannels,
      what,
      " is posted on stream channel ",
      channel,
      "; the CUDA backend serves channels 0 to ",
      kChannels - 1);
  MDF_CHECK(
      in.is_contiguous() && out.is_contiguous() && landing.is_contiguous(),
      what,
      " needs contiguous buffers; got strides ",
      in.strides(),
      ", ",
      out.strides(),
      " and ",
      landing.strides());
  MDF_CHECK(
      in.nbytes() == landing.nbytes(),
      what,
      " sends ",
      in.nbytes(),
      " bytes into a place of ",
      landing.nbytes());
  Team& t = team(members);
  const int64_t next = (t.me + 1) % t.size();
  const int64_t previous = (t.me + t.size() - 1) % t.size();
  const uint32_t n = ++t.posted[channel];
  cudaStream_t stream =
      c10::cuda::getCurrentCUDAStream(device_.index()).stream();

  const CUdeviceptr ready_signal =
      t.slot(previous, Team::kReady, channel, t.me);
  const CUdeviceptr ready_wait = t.slot(t.me, Team::kReady, channel, next);
  const CUdeviceptr done_signal = t.slot(next, Team::kDone, channel, t.me);
  const CUdeviceptr done_wait = t.slot(t.me, Team::kDone, channel, previous);
  if (capturing_ != nullptr) {
    for (CUdeviceptr counter :
         {ready_signal, ready_wait, done_signal, done_wait}) {
      capturing_->counters[counter] = {&t, channel};
    }
  }

  signalThenWait(stream, ready_signal, ready_wait, n);
  // Only for the watchdog's report, which a capture has none of.
  Event ready = capturing_ == nullptr ? recordEvent(stream) : nullptr;
  if (in.nbytes() > 0) {
    MDF_CUDA_CHECK(cudaMemcpyAsync(
        buffers_.peerAddress(landing, next),
        in.data_ptr(),
        in.nbytes(),
        cudaMemcpyDeviceToDevice,
        stream));
  }
  signalThenWait(stream, done_signal, done_wait, n);
  Event done = recordEvent(stream);
  const c10::DeviceIndex index = device_.index();
  PendingCollective pending({}, [done, index] {
    MDF_CUDA_CHECK(cudaStreamWaitEvent(
        c10::cuda::getCurrentCUDAStream(index).stream(), done.get(), 0));
  });
  if (capturing_ != nullptr) {
    // Events recorded in a capture cannot be queried: the graph's replays
    // are watched instead.
    return pending;
  }

  Watchdog::Entry entry;
  entry.finished = [done] {
    // Finished, or the device failed, which its user sees.
    const bool running = cudaEventQuery(done.get()) == cudaErrorNotReady;
    (void)cudaGetLastError();
    return !running;
  };
  // Built only if the watchdog reports: permutes are posted on every ring
  // step.
  entry.describe = [ready,
                    what,
                    members,
                    rank = communicator_.rank(),
                    next_rank = members[next],
                    previous_rank = members[previous]] {
    const bool was_ready = cudaEventQuery(ready.get()) == cudaSuccess;
    (void)cudaGetLastError();
    const std::string where = detail::concat(
        "rank ",
        rank,
        " in ",
        what,
        " with team ",
        hir::teamString(members),
        " on the CUDA backend: waited for rank ");
    return was_ready
               ? detail::concat(where, previous_rank, "'s data")
               : detail::concat(
                     where,
                     next_rank,
                     " to reach the same permute and free its receive buffer");
  };
  entry.timeout = communicator_.options().timeout;
  entry.device = device_.index();
  Watchdog::instance().watch(std::move(entry));
  return pending;
}

void CudaBackend::beginCapture() {
  MDF_CHECK(capturing_ == nullptr, "a CUDA graph capture is under way");
  capturing_ = std::make_unique<Capturing>();
  for (const auto& [members, t] : teams_) {
    capturing_->posted_before.emplace(t.get(), t->posted);
  }
}

void CudaBackend::abortCapture() {
  if (capturing_ == nullptr) {
    return;
  }
  for (const auto& [t, posted] : capturing_->posted_before) {
    t->posted = posted;
  }
  capturing_.reset();
}

std::shared_ptr<const CudaBackend::Capture> CudaBackend::endCapture(
    CUgraph_st* graph) {
  MDF_CHECK(capturing_ != nullptr, "no CUDA graph capture is under way");
  std::unique_ptr<Capturing> capturing = std::move(capturing_);
  auto capture = std::make_shared<Capture>();
  // What the capture posted, given back: its replays post it.
  for (const auto& [t, before] : capturing->posted_before) {
    for (int64_t channel = 0; channel < kChannels; ++channel) {
      const uint32_t posted = t->posted[channel] - before[channel];
      if (posted > 0) {
        capture->posted[{t, channel}] = posted;
      }
    }
    t->posted = before;
  }

  const GraphDriver& fn = GraphDriver::instance();
  size_t count = 0;
  check(fn.get_nodes(graph, nullptr, &count), "cuGraphGetNodes");
  std::vector<CUgraphNode> nodes(count);
  check(fn.get_nodes(graph, nodes.data(), &count), "cuGraphGetNodes");
  for (CUgraphNode node : nodes) {
    CUgraphNodeType type{};
    check(fn.node_get_type(node, &type), "cuGraphNodeGetType");
    if (type != CU_GRAPH_NODE_TYPE_BATCH_MEM_OP) {
      continue;
    }
    CUDA_BATCH_MEM_OP_NODE_PARAMS params{};
    check(fn.get_params(node, &params), "cuGraphBatchMemOpNodeGetParams");
    Capture::Node captured;
    captured.node = node;
    captured.context = params.ctx;
    captured.params.assign(params.paramArray, params.paramArray + params.count);
    for (const CUstreamBatchMemOpParams& op : captured.params) {
      const bool write = op.operation == CU_STREAM_MEM_OP_WRITE_VALUE_32;
      MDF_CHECK(
          write || op.operation == CU_STREAM_MEM_OP_WAIT_VALUE_32,
          "a CUDA graph holds a memory operation of type ",
          op.operation,
          " that no permute posts");
      const CUdeviceptr counter =
          write ? op.writeValue.address : op.waitValue.address;
      const auto found = capturing->counters.find(counter);
      MDF_CHECK(
          found != capturing->counters.end(),
          "a CUDA graph holds a memory operation on an address that is no "
          "permute's counter");
      const auto [t, channel] = found->second;
      const uint32_t value = write ? op.writeValue.value : op.waitValue.value;
      captured.operations.push_back(
          {t, channel, value - capturing->posted_before.at(t)[channel]});
    }
    capture->nodes.push_back(std::move(captured));
  }
  return capture->nodes.empty() ? nullptr : capture;
}

void CudaBackend::prepareReplay(const Capture& capture, CUgraphExec_st* exec) {
  const GraphDriver& fn = GraphDriver::instance();
  std::vector<CUstreamBatchMemOpParams> params;
  for (const Capture::Node& node : capture.nodes) {
    params = node.params;
    for (size_t i = 0; i < params.size(); ++i) {
      const Capture::Operation& op = node.operations[i];
      const uint32_t n = op.team->posted[op.channel] + op.place;
      if (params[i].operation == CU_STREAM_MEM_OP_WRITE_VALUE_32) {
        params[i].writeValue.value = n;
      } else {
        params[i].waitValue.value = n;
      }
    }
    CUDA_BATCH_MEM_OP_NODE_PARAMS update{};
    update.ctx = node.context;
    update.count = static_cast<unsigned int>(params.size());
    update.paramArray = params.data();
    update.flags = 0;
    check(
        fn.exec_set_params(exec, node.node, &update),
        "cuGraphExecBatchMemOpNodeSetParams");
  }
  for (const auto& [where, posted] : capture.posted) {
    where.first->posted[where.second] += posted;
  }
}

bool cudaBackendAvailable() {
  return true;
}

#else // !MDFUSER_HAS_CUDA

struct CudaBackend::Team {};
struct CudaBackend::Capture {};
struct CudaBackend::Capturing {};

CudaBackend::CudaBackend(Communicator& communicator, c10::Device device)
    : communicator_(communicator),
      device_(device),
      buffers_(communicator, device) {
  MDF_USER_ERROR("this build of mdfuser has no CUDA communication backend");
}

CudaBackend::~CudaBackend() = default;

PendingCollective CudaBackend::permute(
    const std::vector<int64_t>&,
    const at::Tensor&,
    const at::Tensor&,
    const at::Tensor&,
    int64_t,
    const std::string&) {
  MDF_UNREACHABLE();
}

void CudaBackend::beginCapture() {
  MDF_UNREACHABLE();
}

std::shared_ptr<const CudaBackend::Capture> CudaBackend::endCapture(
    CUgraph_st*) {
  MDF_UNREACHABLE();
}

void CudaBackend::abortCapture() {}

void CudaBackend::prepareReplay(const Capture&, CUgraphExec_st*) {
  MDF_UNREACHABLE();
}

bool cudaBackendAvailable() {
  return false;
}

#endif

} // namespace mdfuser
