// SPDX-License-Identifier: MIT
#include "runtime/fused_matmul.h"

#include <map>
#include <mutex>
#include <utility>

#include "host_ir/nodes.h"
#include "ir/errors.h"
#include "runtime/cuda_backend.h"

#if defined(MDFUSER_HAS_CUDA) && defined(MDFUSER_HAS_FUSED_KERNELS)
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAStream.h>

#include "kernels/allgather_gemm.h"
#include "runtime/cuda_util.h"
#endif

namespace mdfuser {

#if defined(MDFUSER_HAS_CUDA) && defined(MDFUSER_HAS_FUSED_KERNELS)

namespace {

// What a fused statement keeps between runs: its channel of the team's
// flags, the kernel's error word and a stream for its moves.
struct FusedStatement {
  int64_t channel = 0;
  // Mapped host memory the kernel writes a missing member into.
  int32_t* status = nullptr;
  cudaStream_t moves = nullptr;
  std::vector<int64_t> team;
  std::string what;
};

// The statements of each backend, by key; channels are handed out in the
// order statements first run, which is the same on every member.
class FusedStatements {
 public:
  static FusedStatements& instance() {
    static FusedStatements* statements = new FusedStatements();
    return *statements;
  }

  FusedStatement& get(
      const CudaBackend& backend,
      const std::vector<int64_t>& team,
      const std::string& key,
      const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& of_backend = statements_[&backend];
    auto it = of_backend.find(key);
    if (it != of_backend.end()) {
      return it->second;
    }
    int64_t channel = 0;
    for (const auto& [k, s] : of_backend) {
      if (s.team == team) {
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
    FusedStatement s;
    s.channel = channel;
    s.team = team;
    s.what = what;
    void* status = nullptr;
    MDF_CUDA_CHECK(
        cudaHostAlloc(&status, sizeof(int32_t), cudaHostAllocMapped));
    s.status = static_cast<int32_t*>(status);
    *s.status = 0;
    MDF_CUDA_CHECK(cudaStreamCreateWithFlags(&s.moves, cudaStreamNonBlocking));
    return of_backend.emplace(key, std::move(s)).first->second;
  }

 private:
  std::mutex mutex_;
  std::map<const CudaBackend*, std::map<std::string, FusedStatement>>
      statements_;
};

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
  const auto me_it = std::find(team.begin(), team.end(), rank);
  MDF_CHECK(me_it != team.end(), what, ": rank ", rank, " is not in its team");
  const int64_t me = me_it - team.begin();
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
  MDF_CHECK(
      in.is_contiguous() && weight.is_contiguous() && out.is_contiguous() &&
          in.scalar_type() == weight.scalar_type() &&
          in.scalar_type() == out.scalar_type(),
      what,
      ": the fused kernel takes contiguous tensors of one dtype");

  FusedStatement& s = FusedStatements::instance().get(backend, team, key, what);
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
      in,
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
  const size_t workspace_bytes = kernels::allgatherGemmWorkspaceBytes(args);
  at::Tensor workspace;
  if (workspace_bytes > 0) {
    workspace = at::empty(
        {static_cast<int64_t>(workspace_bytes)},
        out.options().dtype(at::kByte));
  }
  const cudaError_t launched = kernels::launchAllgatherGemm(
      args, workspace_bytes > 0 ? workspace.data_ptr() : nullptr, compute);
  MDF_CHECK(
      launched == cudaSuccess,
      what,
      ": the allgather + GEMM kernel failed to launch: ",
      cudaGetErrorString(launched));
  backend.clearArrivals(team, s.channel, compute);
  // `in` is read by the moves until they end.
  MDF_CUDA_CHECK(cudaStreamWaitEvent(compute, pushes.done.get(), 0));
}

#else

bool fusedMatmulKernelsAvailable(c10::Device device) {
  return false;
}

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

#endif

} // namespace mdfuser
