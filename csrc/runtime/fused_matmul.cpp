// SPDX-License-Identifier: MIT
#include "runtime/fused_matmul.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include "host_ir/nodes.h"
#include "ir/errors.h"
#include "runtime/cuda_backend.h"

#if defined(MDFUSER_HAS_CUDA) && defined(MDFUSER_HAS_FUSED_KERNELS)
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAStream.h>

#include "kernels/allgather_gemm.h"
#include "kernels/gemm_reduce_scatter.h"
#include "runtime/cuda_util.h"
#endif

namespace mdfuser {

#if defined(MDFUSER_HAS_CUDA) && defined(MDFUSER_HAS_FUSED_KERNELS)

// What a fused statement keeps between runs: its channel of the team's
// flags, a stream for its moves, and what its kind of kernel keeps.
struct FusedStatement {
  FusedStatement() = default;
  FusedStatement(const FusedStatement&) = delete;
  FusedStatement& operator=(const FusedStatement&) = delete;
  ~FusedStatement() {
    // Work still queued on the stream completes first.
    if (moves != nullptr) {
      (void)cudaStreamDestroy(moves);
    }
    if (status != nullptr) {
      (void)cudaFreeHost(status);
    }
    (void)cudaGetLastError();
  }

  int64_t channel = 0;
  cudaStream_t moves = nullptr;
  std::vector<int64_t> team;
  std::string what;
  // Allgather + GEMM: mapped host memory the kernel writes a missing member
  // into (made by the first run).
  int32_t* status = nullptr;
  // GEMM + reduce-scatter (made by the first run; the statement's key fixes
  // the shapes): the kernel's partial sums, which the moves read until the
  // next run's kernel, its tile counters (zero between runs), and the count
  // each counter reaches.
  at::Tensor partials;
  at::Tensor counters;
  std::vector<uint32_t> tile_counts;
};

// The fused statements of one backend, by key, kept as long as the backend
// (CudaBackend::fusedStatements). Channels are handed out in the order
// statements first run, which is the same on every member.
class FusedStatements {
 public:
  FusedStatement& get(
      const std::vector<int64_t>& team,
      const std::string& key,
      const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = statements_.find(key);
    if (it != statements_.end()) {
      return *it->second;
    }
    int64_t channel = 0;
    for (const auto& [k, s] : statements_) {
      if (s->team == team) {
        ++channel;
      }
    }
    MDF_USER_CHECK(
        channel < CudaBackend::kChannels,
        "a program runs more than ",
        CudaBackend::kChannels,
        " fused matmul statements over team ",
        hir::teamString(team),
        "; disable them with "
        "_disable_options=[\"fused_matmul_communication\"]");
    auto s = std::make_unique<FusedStatement>();
    s->channel = channel;
    s->team = team;
    s->what = what;
    MDF_CUDA_CHECK(cudaStreamCreateWithFlags(&s->moves, cudaStreamNonBlocking));
    return *statements_.emplace(key, std::move(s)).first->second;
  }

  template <class Visit>
  void forEach(Visit&& visit) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [key, s] : statements_) {
      visit(*s);
    }
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::unique_ptr<FusedStatement>> statements_;
};

namespace {

FusedStatement& statementOf(
    CudaBackend& backend,
    const std::vector<int64_t>& team,
    const std::string& key,
    const std::string& what) {
  std::shared_ptr<FusedStatements>& statements = backend.fusedStatements();
  if (statements == nullptr) {
    statements = std::make_shared<FusedStatements>();
  }
  return statements->get(team, key, what);
}

kernels::GemmDtype gemmDtype(const at::Tensor& t, const std::string& what) {
  switch (t.scalar_type()) {
    case at::kBFloat16:
      return kernels::GemmDtype::kBFloat16;
    case at::kHalf:
      return kernels::GemmDtype::kHalf;
    default:
      MDF_USER_ERROR(
          what,
          ": the fused kernel multiplies BFloat16 or Half tensors, not ",
          t.dtype().name());
  }
}

// This rank's place in `team`.
int64_t memberIndex(
    const std::vector<int64_t>& team, int64_t rank, const std::string& what) {
  const auto it = std::find(team.begin(), team.end(), rank);
  MDF_CHECK(it != team.end(), what, ": rank ", rank, " is not in its team");
  return it - team.begin();
}

void checkOperands(
    const at::Tensor& in,
    const at::Tensor& weight,
    const at::Tensor& out,
    const std::string& what) {
  MDF_CHECK(
      in.is_contiguous() && weight.is_contiguous() && out.is_contiguous() &&
          in.scalar_type() == weight.scalar_type() &&
          in.scalar_type() == out.scalar_type(),
      what,
      ": the fused kernel takes contiguous tensors of one dtype");
}

// Launches a kernel through `launch(workspace)` with a workspace of
// `workspace_bytes` on `like`'s device (from the caching allocator, on the
// current stream, which the kernel runs on).
template <class Launch>
void launchKernel(
    Launch&& launch,
    size_t workspace_bytes,
    const at::Tensor& like,
    const std::string& what,
    const char* kernel) {
  at::Tensor workspace;
  if (workspace_bytes > 0) {
    workspace = at::empty(
        {static_cast<int64_t>(workspace_bytes)},
        like.options().dtype(at::kByte));
  }
  const cudaError_t launched =
      launch(workspace_bytes > 0 ? workspace.data_ptr() : nullptr);
  MDF_CHECK(
      launched == cudaSuccess,
      what,
      ": the ",
      kernel,
      " kernel failed to launch: ",
      cudaGetErrorString(launched));
}

// Raises the error a previous run's kernel left in `s.status`, once.
void raiseKernelError(FusedStatement& s, int64_t rank) {
  const int32_t missing = *reinterpret_cast<volatile int32_t*>(s.status);
  if (missing == 0) {
    return;
  }
  *s.status = 0;
  MDF_USER_ERROR(
      "rank ",
      rank,
      " in ",
      s.what,
      " with team ",
      hir::teamString(s.team),
      ": the rows of rank ",
      s.team.at(missing - 1),
      " did not arrive within the communicator's timeout; the kernel gave "
      "up waiting and its output is wrong");
}

} // namespace

bool fusedMatmulKernelsAvailable(c10::Device device) {
  return fusedMatmulKernelsUnavailableReason(device).empty();
}

void raiseFusedKernelErrors(CudaBackend& backend) {
  const std::shared_ptr<FusedStatements>& statements =
      backend.fusedStatements();
  if (statements == nullptr) {
    return;
  }
  statements->forEach([&](FusedStatement& s) {
    if (s.status != nullptr) {
      raiseKernelError(s, backend.rank());
    }
  });
}

std::string fusedMatmulKernelsUnavailableReason(c10::Device device) {
  if (!device.is_cuda()) {
    return "the fused matmul kernels run on CUDA tensors";
  }
  cudaDeviceProp props{};
  if (cudaGetDeviceProperties(&props, device.index()) != cudaSuccess) {
    (void)cudaGetLastError();
    return "the CUDA device cannot be queried";
  }
  if (props.major != 9 || props.minor != 0) {
    return detail::concat(
        "the fused matmul kernels are built for sm_90a (Hopper); this GPU is "
        "sm_",
        props.major,
        props.minor);
  }
  return "";
}

void fusedAllgatherLinear(
    CudaBackend& backend,
    const std::vector<int64_t>& team,
    const at::Tensor& in,
    const at::Tensor& weight,
    const at::Tensor& out,
    const std::string& key,
    const std::string& what,
    uint64_t run) {
  const int64_t d = static_cast<int64_t>(team.size());
  const int64_t rank = backend.rank();
  const int64_t me = memberIndex(team, rank, what);
  MDF_CHECK(
      in.dim() == 2 && weight.dim() == 2 && out.dim() == 2 &&
          in.size(1) == weight.size(1) && out.size(0) == in.size(0) * d &&
          out.size(1) == weight.size(0),
      what,
      ": shapes ",
      in.sizes(),
      " (rows of one member of ",
      d,
      "), ",
      weight.sizes(),
      " and ",
      out.sizes(),
      " do not make an allgather + linear");
  checkOperands(in, weight, out, what);

  FusedStatement& s = statementOf(backend, team, key, what);
  if (s.status == nullptr) {
    void* status = nullptr;
    MDF_CUDA_CHECK(
        cudaHostAlloc(&status, sizeof(int32_t), cudaHostAllocMapped));
    s.status = static_cast<int32_t*>(status);
    *s.status = 0;
  }
  raiseKernelError(s, rank);

  const int64_t rows = in.size(0);
  const int64_t k = in.size(1);
  const at::Tensor gathered = backend.buffers().get(
      key + "/gathered", team, {rows * d, k}, in.scalar_type());
  const at::Tensor place = gathered.narrow(0, me * rows, rows);

  kernels::AllgatherGemmArgs args;
  args.dtype = gemmDtype(in, what);
  args.gathered = gathered.data_ptr();
  args.weight = weight.data_ptr();
  args.out = out.data_ptr();
  args.m = rows * d;
  args.n = weight.size(0);
  args.k = k;
  args.device = out.device().index();
  args.arrivals.status = s.status;
  args.arrivals.rows_per_member = rows;
  args.arrivals.members = static_cast<int32_t>(d);
  args.arrivals.me = static_cast<int32_t>(me);
  args.arrivals.timeout_ns = static_cast<int64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(backend.timeout())
          .count());
  const std::string refusal = kernels::allgatherGemmRefusal(args);
  MDF_USER_CHECK(refusal.empty(), what, ": ", refusal);

  cudaStream_t compute =
      c10::cuda::getCurrentCUDAStream(out.device().index()).stream();
  // The moves start after what came before on this stream: the input is
  // ready, and the previous run's kernel has read the places peers write.
  Event before = recordEvent(compute);
  MDF_CUDA_CHECK(cudaStreamWaitEvent(s.moves, before.get(), 0));
  const CudaBackend::RowPushes pushes = backend.pushRows(
      team,
      [&](int64_t) {
        return std::vector<CudaBackend::RowPush>{CudaBackend::RowPush{in}};
      },
      place,
      s.channel,
      s.moves,
      std::make_shared<const std::string>(what),
      run);
  args.arrivals.arrived = pushes.arrived;

  // This member's rows, then the kernel.
  MDF_CUDA_CHECK(cudaMemcpyAsync(
      place.data_ptr(),
      in.data_ptr(),
      in.nbytes(),
      cudaMemcpyDeviceToDevice,
      compute));
  launchKernel(
      [&](void* workspace) {
        return kernels::launchAllgatherGemm(args, workspace, compute);
      },
      kernels::allgatherGemmWorkspaceBytes(args),
      out,
      what,
      "allgather + GEMM");
  backend.clearArrivals(team, s.channel, compute);
  // `in` is read by the moves until they end.
  MDF_CUDA_CHECK(cudaStreamWaitEvent(compute, pushes.done.get(), 0));
}

void fusedLinearReduceScatter(
    CudaBackend& backend,
    const std::vector<int64_t>& team,
    const at::Tensor& in,
    const at::Tensor& weight,
    const at::Tensor& out,
    const std::string& key,
    const std::string& what,
    uint64_t run) {
  const int64_t d = static_cast<int64_t>(team.size());
  const int64_t me = memberIndex(team, backend.rank(), what);
  MDF_CHECK(
      in.dim() == 2 && weight.dim() == 2 && out.dim() == 2 &&
          in.size(1) == weight.size(1) && in.size(0) == out.size(0) * d &&
          out.size(1) == weight.size(0),
      what,
      ": shapes ",
      in.sizes(),
      ", ",
      weight.sizes(),
      " and ",
      out.sizes(),
      " (rows of one member of ",
      d,
      ") do not make a linear + reduce-scatter");
  checkOperands(in, weight, out, what);

  FusedStatement& s = statementOf(backend, team, key, what);
  const int64_t rows = out.size(0);
  const int64_t n = out.size(1);
  // Each peer's rows can go in blocks, each sent once the kernel has
  // finished it, of at least kBlockRows rows and at most kMaxBlocks of
  // them, so that the first copy starts before all of the peer's rows are
  // done. One block: four were correct but 3-6 % slower at k = 2048 on
  // H200s (doc/fused_kernels.md).
  constexpr int64_t kBlockRows = 512;
  constexpr int64_t kMaxBlocks = 1;
  const int64_t parts = std::clamp<int64_t>(rows / kBlockRows, 1, kMaxBlocks);
  if (!s.partials.defined()) {
    s.partials = at::empty({rows * d, n}, out.options());
    s.counters = at::zeros({d * parts}, out.options().dtype(at::kInt));
  }
  // Slot p: member p's partial sums of this member's rows.
  const at::Tensor received = backend.buffers().get(
      key + "/received", team, {d, rows, n}, out.scalar_type());

  kernels::GemmReduceScatterArgs args;
  args.dtype = gemmDtype(in, what);
  args.in = in.data_ptr();
  args.weight = weight.data_ptr();
  args.partials = s.partials.data_ptr();
  args.m = rows * d;
  args.n = n;
  args.k = in.size(1);
  args.device = out.device().index();
  args.counts.counters = static_cast<uint32_t*>(s.counters.data_ptr());
  args.counts.rows_per_member = rows;
  args.counts.members = static_cast<int32_t>(d);
  args.counts.me = static_cast<int32_t>(me);
  args.counts.parts = static_cast<int32_t>(parts);
  const std::string refusal = kernels::gemmReduceScatterRefusal(args);
  MDF_USER_CHECK(refusal.empty(), what, ": ", refusal);
  if (s.tile_counts.empty()) {
    s.tile_counts = kernels::gemmReduceScatterTileCounts(args);
  }
  const std::vector<uint32_t>& counts = s.tile_counts;

  cudaStream_t compute =
      c10::cuda::getCurrentCUDAStream(out.device().index()).stream();
  // The moves start after what came before on this stream: the previous
  // run's sum has read what peers sent.
  Event before = recordEvent(compute);
  // The kernel goes first: the moves wait for its counts, and where the
  // two streams share one of the GPU's hardware queues (more streams than
  // CUDA_DEVICE_MAX_CONNECTIONS), a wait posted ahead of the kernel would
  // hold it back for ever.
  launchKernel(
      [&](void* workspace) {
        return kernels::launchGemmReduceScatter(args, workspace, compute);
      },
      kernels::gemmReduceScatterWorkspaceBytes(args),
      out,
      what,
      "GEMM + reduce-scatter");
  MDF_CUDA_CHECK(cudaStreamWaitEvent(s.moves, before.get(), 0));
  auto* counters = static_cast<uint32_t*>(s.counters.data_ptr());
  // Named in the watchdog's reports of both the moves and the receipt.
  const auto named = std::make_shared<const std::string>(what);
  const CudaBackend::RowPushes pushes = backend.pushRows(
      team,
      [&](int64_t to) {
        std::vector<CudaBackend::RowPush> blocks;
        const int64_t part_rows = args.counts.partRows();
        for (int64_t b = 0; b < parts; ++b) {
          const int64_t first = b * part_rows;
          const int64_t block = to * parts + b;
          blocks.push_back(CudaBackend::RowPush{
              s.partials.narrow(
                  0, to * rows + first, std::min(part_rows, rows - first)),
              first,
              counters + block,
              counts[block]});
        }
        return blocks;
      },
      received.select(0, me),
      s.channel,
      s.moves,
      named,
      run);
  backend.receiveArrivals(team, s.channel, compute, named, run);
  std::vector<const void*> terms = {
      s.partials.narrow(0, me * rows, rows).data_ptr()};
  for (int64_t p = 0; p < d; ++p) {
    if (p != me) {
      terms.push_back(received.select(0, p).data_ptr());
    }
  }
  const cudaError_t summed = kernels::launchSumOfParts(
      args.dtype, terms, out.data_ptr(), out.numel(), compute);
  MDF_CHECK(
      summed == cudaSuccess,
      what,
      ": the sum of the partial rows failed to launch: ",
      cudaGetErrorString(summed));
  // The partial sums are read by the moves until they end.
  MDF_CUDA_CHECK(cudaStreamWaitEvent(compute, pushes.done.get(), 0));
}

#else

bool fusedMatmulKernelsAvailable(c10::Device device) {
  return false;
}

void raiseFusedKernelErrors(CudaBackend&) {}

std::string fusedMatmulKernelsUnavailableReason(c10::Device device) {
#ifdef MDFUSER_HAS_CUDA
  return "this build of mdfuser has no fused matmul kernels (they need nvcc "
         "and the nvidia-cutlass package at build time: pip install "
         "--no-deps -r requirements-gpu.txt)";
#else
  return "this build of mdfuser has no CUDA";
#endif
}

void fusedAllgatherLinear(
    CudaBackend&,
    const std::vector<int64_t>&,
    const at::Tensor&,
    const at::Tensor&,
    const at::Tensor&,
    const std::string&,
    const std::string& what,
    uint64_t) {
  MDF_USER_ERROR(
      what, ": ", fusedMatmulKernelsUnavailableReason(c10::Device(c10::kCPU)));
}

void fusedLinearReduceScatter(
    CudaBackend&,
    const std::vector<int64_t>&,
    const at::Tensor&,
    const at::Tensor&,
    const at::Tensor&,
    const std::string&,
    const std::string& what,
    uint64_t) {
  MDF_USER_ERROR(
      what, ": ", fusedMatmulKernelsUnavailableReason(c10::Device(c10::kCPU)));
}

#endif

} // namespace mdfuser
