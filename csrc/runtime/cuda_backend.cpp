// SPDX-License-Identifier: MIT
#include "runtime/cuda_backend.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <list>
#include <mutex>
#include <thread>

#include <torch/csrc/distributed/c10d/Work.hpp>

#include "ir/errors.h"
#include "runtime/communicator.h"

#ifdef MDFUSER_HAS_CUDA
#include <c10/cuda/CUDAStream.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#endif

namespace mdfuser {

#ifdef MDFUSER_HAS_CUDA

namespace {

#define MDF_CUDA_CHECK(call)            \
  do {                                  \
    const cudaError_t status_ = (call); \
    MDF_CHECK(                          \
        status_ == cudaSuccess,         \
        #call,                          \
        " failed: ",                    \
        cudaGetErrorString(status_));   \
  } while (false)

// cuStreamBatchMemOp, from the driver the runtime loaded.
using BatchMemOp =
    CUresult (*)(CUstream, unsigned int, CUstreamBatchMemOpParams*, unsigned);

BatchMemOp batchMemOp() {
  static const BatchMemOp fn = [] {
    void* found_fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    const cudaError_t status = cudaGetDriverEntryPointByVersion(
        "cuStreamBatchMemOp", &found_fn, 12000, cudaEnableDefault, &found);
    MDF_CHECK(
        status == cudaSuccess && found == cudaDriverEntryPointSuccess &&
            found_fn != nullptr,
        "the CUDA driver does not provide cuStreamBatchMemOp, which the CUDA "
        "communication backend needs");
    return reinterpret_cast<BatchMemOp>(found_fn);
  }();
  return fn;
}

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

// Watches posted permutes; one that does not finish within its timeout is
// reported and ends the process: its stream waits on a counter nothing
// will write, and nothing can unblock it.
class Watchdog {
 public:
  struct Entry {
    Event ready; // the next member's buffer was free
    Event done;  // the previous member's data arrived
    std::chrono::steady_clock::time_point deadline;
    std::chrono::milliseconds timeout;
    int device = 0;
    // "rank 0 waited ... for rank 1 to ...": before `ready`, after it.
    std::string waiting_for_ready;
    std::string waiting_for_data;
  };

  static Watchdog& instance() {
    static Watchdog watchdog;
    return watchdog;
  }

  void watch(Entry entry) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!thread_.joinable()) {
      thread_ = std::thread([this] { loop(); });
    }
    entries_.push_back(std::move(entry));
    wake_.notify_one();
  }

  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      wake_.notify_one();
    }
    if (thread_.joinable()) {
      thread_.join();
    }
  }

 private:
  void loop() {
    int device = -1;
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      if (entries_.empty()) {
        wake_.wait(lock, [this] { return stop_ || !entries_.empty(); });
        continue;
      }
      const auto now = std::chrono::steady_clock::now();
      for (auto it = entries_.begin(); it != entries_.end();) {
        if (it->device != device) {
          device = it->device;
          cudaSetDevice(device);
        }
        const cudaError_t done = cudaEventQuery(it->done.get());
        if (done != cudaErrorNotReady) {
          // Finished, or the device failed, which its user sees.
          (void)cudaGetLastError();
          it = entries_.erase(it);
          continue;
        }
        if (now > it->deadline) {
          const bool ready = cudaEventQuery(it->ready.get()) == cudaSuccess;
          (void)cudaGetLastError();
          std::fprintf(
              stderr,
              "[mdfuser] %s (more than %lld s); the stream cannot go on, "
              "ending the process\n",
              (ready ? it->waiting_for_data : it->waiting_for_ready).c_str(),
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::seconds>(it->timeout)
                      .count()));
          std::fflush(stderr);
          std::abort();
        }
        ++it;
      }
      wake_.wait_for(
          lock, std::chrono::milliseconds(20), [this] { return stop_; });
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::list<Entry> entries_;
  std::thread thread_;
  bool stop_ = false;
};

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

  signalThenWait(
      stream,
      t.slot(previous, Team::kReady, channel, t.me),
      t.slot(t.me, Team::kReady, channel, next),
      n);
  Event ready = recordEvent(stream);
  if (in.nbytes() > 0) {
    MDF_CUDA_CHECK(cudaMemcpyAsync(
        buffers_.peerAddress(landing, next),
        in.data_ptr(),
        in.nbytes(),
        cudaMemcpyDeviceToDevice,
        stream));
  }
  signalThenWait(
      stream,
      t.slot(next, Team::kDone, channel, t.me),
      t.slot(t.me, Team::kDone, channel, previous),
      n);
  Event done = recordEvent(stream);

  const int64_t rank = communicator_.rank();
  const std::string where = detail::concat(
      "rank ", rank, " in ", what, " with team ", hir::teamString(members));
  Watchdog::Entry entry;
  entry.ready = ready;
  entry.done = done;
  entry.timeout = communicator_.options().timeout;
  entry.deadline = std::chrono::steady_clock::now() + entry.timeout;
  entry.device = device_.index();
  entry.waiting_for_ready = detail::concat(
      where,
      " on the CUDA backend: waited for rank ",
      members[next],
      " to reach the same permute and free its receive buffer");
  entry.waiting_for_data = detail::concat(
      where,
      " on the CUDA backend: waited for rank ",
      members[previous],
      "'s data");
  Watchdog::instance().watch(std::move(entry));

  const c10::DeviceIndex index = device_.index();
  return PendingCollective({}, [done, index] {
    MDF_CUDA_CHECK(cudaStreamWaitEvent(
        c10::cuda::getCurrentCUDAStream(index).stream(), done.get(), 0));
  });
}

bool cudaBackendAvailable() {
  return true;
}

#else // !MDFUSER_HAS_CUDA

struct CudaBackend::Team {};

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

bool cudaBackendAvailable() {
  return false;
}

#endif

} // namespace mdfuser
