// SPDX-License-Identifier: MIT
#include "runtime/fused_matmul.h"

#include <string>

#include "host_ir/nodes.h"
#include "ir/errors.h"
#include "runtime/cuda_backend.h"
#include "runtime/fused_statements.h"

#if defined(MDFUSER_HAS_CUDA) && defined(MDFUSER_HAS_FUSED_KERNELS)
#include <c10/cuda/CUDAStream.h>

#include "kernels/allgather_gemm.h"
#endif

namespace mdfuser {

#if defined(MDFUSER_HAS_CUDA) && defined(MDFUSER_HAS_FUSED_KERNELS)

using namespace fused_detail;

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
  if (pushesRows(d, in, weight)) {
    pushedAllgatherLinear(backend, team, in, weight, out, key, what, run);
    return;
  }

  FusedStatement& s = statementOf(backend, team, key, what, Pushes::kRows);

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
  args.arrivals.timeout_ns = timeoutNs(backend);
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

#endif

} // namespace mdfuser
