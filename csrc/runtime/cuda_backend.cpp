// SPDX-License-Identifier: MIT
#include "runtime/cuda_backend.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <mutex>
#include <set>
#include <utility>

#include <torch/csrc/distributed/c10d/Work.hpp>

#include "ir/errors.h"
#include "runtime/communicator.h"
#include "runtime/copy_plan.h"
#include "runtime/cuda_util.h"
#include "runtime/watchdog.h"

#ifdef MDFUSER_HAS_CUDA
#include <c10/cuda/CUDAStream.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "runtime/cuda_backend_team.h"
#endif

namespace mdfuser {

int64_t CudaBackend::rank() const {
  return communicator_.rank();
}

std::chrono::milliseconds CudaBackend::timeout() const {
  return communicator_.options().timeout;
}

#ifdef MDFUSER_HAS_CUDA

using namespace cuda_backend_detail;

namespace cuda_backend_detail {

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

void raiseWaitAndClear(
    cudaStream_t stream, CUdeviceptr signal, CUdeviceptr wait) {
  CUstreamBatchMemOpParams ops[3] = {};
  ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
  ops[0].writeValue.address = signal;
  ops[0].writeValue.value = 1;
  ops[1].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
  ops[1].waitValue.address = wait;
  ops[1].waitValue.value = 1;
  // At least 1: a released flag (CudaBackend::releaser) holds more.
  ops[1].waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
  ops[2].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
  ops[2].writeValue.address = wait;
  ops[2].writeValue.value = 0;
  check(batchMemOp()(stream, 3, ops, 0), "cuStreamBatchMemOp");
}

void copyToPeer(
    const at::Tensor& in,
    const at::Tensor& landing,
    void* to,
    cudaStream_t stream) {
  const auto* from = static_cast<const char*>(in.data_ptr());
  auto* dst = static_cast<char*>(to);
  for (const RowCopy& copy : planRowCopies(
           in.sizes().vec(),
           in.strides().vec(),
           landing.strides().vec(),
           static_cast<int64_t>(in.element_size()))) {
    if (copy.height == 1) {
      MDF_CUDA_CHECK(cudaMemcpyAsync(
          dst + copy.dst_offset,
          from + copy.src_offset,
          copy.width,
          cudaMemcpyDeviceToDevice,
          stream));
    } else {
      MDF_CUDA_CHECK(cudaMemcpy2DAsync(
          dst + copy.dst_offset,
          copy.dst_pitch,
          from + copy.src_offset,
          copy.src_pitch,
          copy.width,
          copy.height,
          cudaMemcpyDeviceToDevice,
          stream));
    }
  }
}

} // namespace cuda_backend_detail

// The flags of this backend's teams, on every member, and a stream to raise
// them on that no waiting work blocks; shared with the watchdog's release
// functions, which may outlive the backend.
struct CudaBackend::Release {
  std::mutex mutex;
  bool alive = true;
  cudaStream_t stream = nullptr;
  // Each team's flags on each member, in this process's address space.
  struct Flags {
    int64_t rank = 0;
    void* address = nullptr;
    size_t bytes = 0;
  };
  std::vector<Flags> flags;
  int64_t me = 0;
  // Whether a rank knows its epoch ended (Communicator::knowsEndOf): a
  // peer's flags are raised only then. Asked about each peer at most every
  // kAskEvery; a yes is kept.
  std::function<bool(int64_t)> knows;
  std::set<int64_t> known;
  std::chrono::steady_clock::time_point asked{};
  static constexpr std::chrono::milliseconds kAskEvery{200};

  // Raises the flags of this rank and of the peers that know; false when
  // the backend is gone.
  bool raiseEveryFlag();
};

CudaBackend::CudaBackend(Communicator& communicator, c10::Device device)
    : communicator_(communicator),
      device_(device),
      buffers_(communicator, device),
      release_(std::make_shared<Release>()) {
  batchMemOp();
}

CudaBackend::~CudaBackend() {
  std::lock_guard<std::mutex> lock(release_->mutex);
  release_->alive = false;
  if (release_->stream != nullptr) {
    (void)cudaStreamDestroy(release_->stream);
    (void)cudaGetLastError();
  }
}

bool CudaBackend::Release::raiseEveryFlag() {
  std::lock_guard<std::mutex> lock(mutex);
  if (!alive || stream == nullptr) {
    return false;
  }
  const auto now = std::chrono::steady_clock::now();
  const bool ask = now - asked >= kAskEvery;
  if (ask) {
    asked = now;
  }
  for (const Flags& f : flags) {
    if (f.rank != me && known.count(f.rank) == 0) {
      if (!ask || !knows(f.rank)) {
        continue;
      }
      known.insert(f.rank);
    }
    // Bytes of 1: every flag reads 0x01010101, at least the 1 waited for.
    (void)cudaMemsetAsync(f.address, 1, f.bytes, stream);
  }
  (void)cudaGetLastError();
  return true;
}

std::function<bool()> CudaBackend::releaser() const {
  return [release = release_] {
    (void)release->raiseEveryFlag();
    // Until the work's events complete.
    return false;
  };
}

CudaBackend::Team& CudaBackend::team(const std::vector<int64_t>& members) {
  auto it = teams_.find(members);
  if (it != teams_.end()) {
    return *it->second;
  }
  MDF_CHECK(
      !isCapturing(c10::cuda::getCurrentCUDAStream(device_.index()).stream()),
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
  t->flags = buffers_.get(
      "flags" + hir::teamString(members),
      members,
      {Team::kKinds * kChannels * t->size()},
      at::kInt,
      /*zeroed=*/true);
  for (int64_t peer = 0; peer < t->size(); ++peer) {
    t->bases.push_back(
        static_cast<char*>(buffers_.peerAddress(t->flags, peer)));
  }
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(release_->mutex);
    if (release_->stream == nullptr) {
      MDF_CUDA_CHECK(
          cudaStreamCreateWithFlags(&release_->stream, cudaStreamNonBlocking));
      release_->me = communicator_.rank();
      release_->knows = communicator_.knowsEndOf(buffers_.epoch());
      first = true;
    }
    for (int64_t m = 0; m < t->size(); ++m) {
      release_->flags.push_back(
          {members[m], t->bases[m], static_cast<size_t>(t->flags.nbytes())});
    }
  }
  if (first) {
    // Whether or not this rank waits when the epoch is abandoned: a peer's
    // stream may wait on flags that only this rank can still raise.
    Watchdog::Standby standby;
    standby.epoch = buffers_.epoch();
    standby.device = device_.index();
    standby.duration = communicator_.options().timeout;
    standby.owner = release_;
    standby.release = [weak = std::weak_ptr<Release>(release_)] {
      const std::shared_ptr<Release> release = weak.lock();
      return release == nullptr || !release->raiseEveryFlag();
    };
    Watchdog::instance().onAbandon(std::move(standby));
  }
  return *teams_.emplace(members, std::move(t)).first->second;
}

PendingCollective CudaBackend::permute(
    const std::vector<int64_t>& members,
    int64_t shift,
    const at::Tensor& in,
    const at::Tensor& out,
    const at::Tensor& landing,
    int64_t channel,
    std::shared_ptr<const std::string> what,
    uint64_t run,
    const std::function<void()>& before_copy) {
  checkChannel(channel, *what);
  MDF_CHECK(
      in.dtype() == landing.dtype() && in.numel() == landing.numel(),
      *what,
      " sends a ",
      in.dtype().name(),
      " tensor of sizes ",
      in.sizes(),
      " into a ",
      landing.dtype().name(),
      " place of sizes ",
      landing.sizes());
  // An input squeezed of its device axis (a part of one row) lacks the
  // landing's axis of one element.
  const at::Tensor place =
      landing.sizes() == in.sizes() ? landing : landing.view(in.sizes());
  Team& t = team(members);
  MDF_CHECK(
      shift >= 1 && shift < t.size(),
      *what,
      " shifts by ",
      shift,
      " places in a team of ",
      t.size());
  // The flags are per writer, so permutes of different shifts on one
  // channel raise and wait on different flags of each holder.
  const int64_t next = (t.me + shift) % t.size();
  const int64_t previous = (t.me + t.size() - shift) % t.size();
  cudaStream_t stream =
      c10::cuda::getCurrentCUDAStream(device_.index()).stream();
  const bool captured = isCapturing(stream);

  raiseWaitAndClear(
      stream,
      t.slot(previous, Team::kReady, channel, t.me),
      t.slot(t.me, Team::kReady, channel, next));
  // Only for the watchdog's report, which a capture has none of.
  Event ready = captured ? nullptr : t.events.record(stream);
  if (before_copy) {
    before_copy();
  }
  if (in.numel() > 0) {
    copyToPeer(in, place, buffers_.peerAddress(landing, next), stream);
  }
  raiseWaitAndClear(
      stream,
      t.slot(next, Team::kDone, channel, t.me),
      t.slot(t.me, Team::kDone, channel, previous));
  Event done = t.events.record(stream);
  const c10::DeviceIndex index = device_.index();
  PendingCollective pending({}, [done, index] {
    MDF_CUDA_CHECK(cudaStreamWaitEvent(
        c10::cuda::getCurrentCUDAStream(index).stream(), done.get(), 0));
  });
  if (captured) {
    // Events recorded in a capture cannot be queried: the graph's replays
    // are watched instead (ProgramGraphs).
    return pending;
  }

  // Built only if the watchdog reports: permutes are posted on every ring
  // step.
  watch(
      done,
      [ready,
       what = std::move(what),
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
            *what,
            " with team ",
            hir::teamString(members),
            " on the CUDA backend: waited for rank ");
        return was_ready
                   ? detail::concat(where, previous_rank, "'s data")
                   : detail::concat(
                         where,
                         next_rank,
                         " to reach the same permute and free its receive "
                         "buffer");
      },
      {members[next], members[previous]},
      run);
  return pending;
}

void CudaBackend::watch(
    std::shared_ptr<CUevent_st> done,
    std::function<std::string()> describe,
    std::vector<int64_t> peers,
    uint64_t run) {
  Watchdog::Entry entry;
  entry.finished = [done = std::move(done)] { return eventFinished(done); };
  entry.describe = std::move(describe);
  entry.timeout = communicator_.options().timeout;
  entry.device = device_.index();
  entry.peers = std::move(peers);
  entry.epoch = buffers_.epoch();
  entry.run = run;
  entry.release = releaser();
  Watchdog::instance().watch(std::move(entry));
}

void CudaBackend::checkChannel(int64_t channel, const std::string& what) {
  MDF_CHECK(
      channel >= 0 && channel < kChannels,
      what,
      " is posted on channel ",
      channel,
      "; the CUDA backend serves channels 0 to ",
      kChannels - 1);
}

bool cudaBackendAvailable() {
  return true;
}

bool cudaBackendReachesPeers(
    const Communicator& communicator, c10::Device device) {
  if (!device.is_cuda() || communicator.size() < 2 ||
      communicator.localSize() != communicator.size()) {
    return false;
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    return false;
  }
  const int me = device.index();
  for (int64_t r = 0; r < communicator.localSize(); ++r) {
    // Local rank r's GPU, numbered as input binding numbers them.
    const int peer =
        static_cast<int>(communicator.options().share_devices ? r % count : r);
    if (peer == me) {
      continue;
    }
    int can = 0;
    if (peer >= count ||
        cudaDeviceCanAccessPeer(&can, me, peer) != cudaSuccess || can == 0) {
      (void)cudaGetLastError();
      return false;
    }
  }
  return true;
}

bool processesShareGpus(const Communicator& communicator, c10::Device device) {
  if (!device.is_cuda() || !communicator.options().share_devices) {
    return false;
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    return false;
  }
  return communicator.localSize() > count;
}

#else // !MDFUSER_HAS_CUDA

struct CudaBackend::Team {};
struct CudaBackend::Release {};

CudaBackend::CudaBackend(Communicator& communicator, c10::Device device)
    : communicator_(communicator),
      device_(device),
      buffers_(communicator, device) {
  MDF_USER_ERROR("this build of mdfuser has no CUDA communication backend");
}

CudaBackend::~CudaBackend() = default;

std::function<bool()> CudaBackend::releaser() const {
  return [] { return false; };
}

PendingCollective CudaBackend::permute(
    const std::vector<int64_t>&,
    int64_t,
    const at::Tensor&,
    const at::Tensor&,
    const at::Tensor&,
    int64_t,
    std::shared_ptr<const std::string>,
    uint64_t,
    const std::function<void()>&) {
  MDF_UNREACHABLE();
}

bool cudaBackendAvailable() {
  return false;
}

bool cudaBackendReachesPeers(const Communicator&, c10::Device) {
  return false;
}

bool processesShareGpus(const Communicator&, c10::Device) {
  return false;
}

#endif

} // namespace mdfuser
