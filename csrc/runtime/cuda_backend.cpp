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
#endif

namespace mdfuser {

int64_t CudaBackend::rank() const {
  return communicator_.rank();
}

std::chrono::milliseconds CudaBackend::timeout() const {
  return communicator_.options().timeout;
}

#ifdef MDFUSER_HAS_CUDA

namespace {

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

// Enqueues on `stream`, in one driver call: raise `signal` (a peer's flag,
// to 1), wait until `wait` (this member's) is raised, and clear it. A write
// with default flags is fenced: it is ordered after the work before it on
// the stream, copies and the previous clear included.
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

// Copies `in` to `to`, the address in a peer's memory of `landing` (a
// view of the same sizes), on `stream`: one copy-engine copy when both are
// laid out alike and contiguously, one 2-D copy per part of rows otherwise
// (a ring's chunk cut from a middle axis is one).
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

} // namespace

// The flags of one team: for each kind, channel and member that raises it,
// one uint32 on every member. A permute's: ready, done; a fused
// matmul's: the place of the raiser's rows is free, they arrived.
struct CudaBackend::Team {
  enum Kind { kReady = 0, kDone = 1, kRowsFree = 2, kRowsArrived = 3 };
  static constexpr int64_t kKinds = 4;

  std::vector<int64_t> members;
  int64_t me = 0;
  at::Tensor flags;
  // For the events of its permutes.
  EventPool events;
  // Every member's flags, in this process's address space.
  std::vector<char*> bases;

  int64_t size() const {
    return static_cast<int64_t>(members.size());
  }
  // The other members' ranks.
  std::vector<int64_t> peers() const {
    std::vector<int64_t> ranks;
    for (int64_t m = 0; m < size(); ++m) {
      if (m != me) {
        ranks.push_back(members[m]);
      }
    }
    return ranks;
  }
  // The flag `kind` of `channel` that `writer` raises, on `holder`.
  CUdeviceptr slot(
      int64_t holder, Kind kind, int64_t channel, int64_t writer) const {
    const int64_t index = (kind * kChannels + channel) * size() + writer;
    return address(bases[holder] + index * sizeof(uint32_t));
  }
};

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
    uint64_t run) {
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

CudaBackend::RowPushes CudaBackend::pushRows(
    const std::vector<int64_t>& members,
    const std::function<std::vector<RowPush>(int64_t)>& push,
    const at::Tensor& place,
    int64_t channel,
    cudaStream_t stream,
    std::shared_ptr<const std::string> what,
    uint64_t run) {
  checkChannel(channel, *what);
  Team& t = team(members);
  const bool captured = isCapturing(stream);
  // For the watchdog's report (a capture has none): where the moves were
  // held up, the push to which member and before which of its steps.
  struct Step {
    int64_t to = 0;
    Event freed;
    std::vector<Event> counted;
  };
  std::vector<Step> steps;
  Event started = captured ? nullptr : t.events.record(stream);
  for (int64_t shift = 1; shift < t.size(); ++shift) {
    const int64_t next = (t.me + shift) % t.size();
    const int64_t previous = (t.me + t.size() - shift) % t.size();
    Step step;
    step.to = members[next];
    // This member's place for the previous one's rows is free (the caller
    // ordered this after the kernel that read them); wait until the next
    // one's place for ours is.
    raiseWaitAndClear(
        stream,
        t.slot(previous, Team::kRowsFree, channel, t.me),
        t.slot(t.me, Team::kRowsFree, channel, next));
    if (!captured) {
      step.freed = t.events.record(stream);
    }
    for (const RowPush& part : push(next)) {
      MDF_CHECK(
          part.from.dim() == place.dim() &&
              part.from.sizes().slice(1) == place.sizes().slice(1) &&
              part.row_offset >= 0 &&
              part.row_offset + part.from.size(0) <= place.size(0) &&
              part.from.dtype() == place.dtype(),
          *what,
          " pushes rows of sizes ",
          part.from.sizes(),
          " from row ",
          part.row_offset,
          " into a place of sizes ",
          place.sizes());
      if (part.counter != nullptr) {
        // The rows are finished once the kernel that writes them has
        // counted `count` of its tiles; the counter starts again from 0.
        CUstreamBatchMemOpParams ops[2] = {};
        ops[0].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
        ops[0].waitValue.address = address(part.counter);
        ops[0].waitValue.value = part.count;
        ops[0].waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
        ops[1].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
        ops[1].writeValue.address = address(part.counter);
        ops[1].writeValue.value = 0;
        check(batchMemOp()(stream, 2, ops, 0), "cuStreamBatchMemOp");
        if (!captured) {
          step.counted.push_back(t.events.record(stream));
        }
      }
      if (part.from.numel() > 0) {
        const at::Tensor landing =
            place.narrow(0, part.row_offset, part.from.size(0));
        copyToPeer(
            part.from, landing, buffers_.peerAddress(landing, next), stream);
      }
    }
    CUstreamBatchMemOpParams arrived = {};
    arrived.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    arrived.writeValue.address =
        t.slot(next, Team::kRowsArrived, channel, t.me);
    arrived.writeValue.value = 1;
    check(batchMemOp()(stream, 1, &arrived, 0), "cuStreamBatchMemOp");
    steps.push_back(std::move(step));
  }
  RowPushes pushes;
  pushes.arrived = reinterpret_cast<const uint32_t*>(
      t.slot(t.me, Team::kRowsArrived, channel, 0));
  pushes.done = t.events.record(stream);
  if (!captured) {
    watch(
        pushes.done,
        [started,
         steps = std::move(steps),
         what = std::move(what),
         members,
         rank = communicator_.rank()] {
          auto finished = [](const Event& e) {
            const bool done = cudaEventQuery(e.get()) == cudaSuccess;
            (void)cudaGetLastError();
            return done;
          };
          std::string where = "waited for the work before its row pushes";
          if (finished(started)) {
            where = "its row pushes were held up";
            for (const Step& step : steps) {
              if (!finished(step.freed)) {
                where = detail::concat(
                    "waited for rank ",
                    step.to,
                    " to free its place for this rank's rows");
                break;
              }
              const bool counted = std::all_of(
                  step.counted.begin(), step.counted.end(), finished);
              if (!counted) {
                where = detail::concat(
                    "waited for this rank's kernel to finish the rows of "
                    "rank ",
                    step.to);
                break;
              }
            }
          }
          return detail::concat(
              "rank ",
              rank,
              " in ",
              *what,
              " with team ",
              hir::teamString(members),
              " on the CUDA backend: ",
              where);
        },
        t.peers(),
        run);
  }
  return pushes;
}

void CudaBackend::receiveArrivals(
    const std::vector<int64_t>& members,
    int64_t channel,
    cudaStream_t stream,
    std::shared_ptr<const std::string> what,
    uint64_t run) {
  checkChannel(channel, *what);
  Team& t = team(members);
  const bool captured = isCapturing(stream);
  Event started = captured ? nullptr : t.events.record(stream);
  std::vector<CUstreamBatchMemOpParams> ops;
  for (int64_t m = 0; m < t.size(); ++m) {
    if (m == t.me) {
      continue;
    }
    CUstreamBatchMemOpParams wait = {};
    wait.waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    wait.waitValue.address = t.slot(t.me, Team::kRowsArrived, channel, m);
    wait.waitValue.value = 1;
    // At least 1: a released flag (CudaBackend::releaser) holds more.
    wait.waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
    ops.push_back(wait);
  }
  if (!ops.empty()) {
    check(
        batchMemOp()(stream, static_cast<unsigned>(ops.size()), ops.data(), 0),
        "cuStreamBatchMemOp");
  }
  clearArrivals(members, channel, stream);
  if (captured) {
    return;
  }
  watch(
      t.events.record(stream),
      [started, what = std::move(what), members, rank = communicator_.rank()] {
        const bool began = cudaEventQuery(started.get()) == cudaSuccess;
        (void)cudaGetLastError();
        return detail::concat(
            "rank ",
            rank,
            " in ",
            *what,
            " with team ",
            hir::teamString(members),
            " on the CUDA backend: ",
            began ? "waited for the peers' rows"
                  : "waited for the work before receiving the peers' rows");
      },
      t.peers(),
      run);
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

void CudaBackend::clearArrivals(
    const std::vector<int64_t>& members, int64_t channel, cudaStream_t stream) {
  Team& t = team(members);
  std::vector<CUstreamBatchMemOpParams> ops;
  for (int64_t m = 0; m < t.size(); ++m) {
    if (m == t.me) {
      continue;
    }
    CUstreamBatchMemOpParams op = {};
    op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    op.writeValue.address = t.slot(t.me, Team::kRowsArrived, channel, m);
    op.writeValue.value = 0;
    ops.push_back(op);
  }
  if (!ops.empty()) {
    check(
        batchMemOp()(stream, static_cast<unsigned>(ops.size()), ops.data(), 0),
        "cuStreamBatchMemOp");
  }
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
    uint64_t) {
  MDF_UNREACHABLE();
}

CudaBackend::RowPushes CudaBackend::pushRows(
    const std::vector<int64_t>&,
    const std::function<std::vector<RowPush>(int64_t)>&,
    const at::Tensor&,
    int64_t,
    CUstream_st*,
    std::shared_ptr<const std::string>,
    uint64_t) {
  MDF_UNREACHABLE();
}

void CudaBackend::clearArrivals(
    const std::vector<int64_t>&, int64_t, CUstream_st*) {
  MDF_UNREACHABLE();
}

void CudaBackend::receiveArrivals(
    const std::vector<int64_t>&,
    int64_t,
    CUstream_st*,
    std::shared_ptr<const std::string>,
    uint64_t) {
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
