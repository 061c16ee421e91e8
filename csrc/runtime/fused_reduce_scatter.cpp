// SPDX-License-Identifier: MIT
//
// The fused linear + reduce-scatter statement (LinearReduceScatter): the
// kernel whose owners pull the partial sums (the statement's
// kernel=sm90_pulls).
#include <algorithm>
#include <string>

#include "ir/errors.h"
#include "runtime/fused_matmul.h"
#include "runtime/fused_statements.h"

#if defined(MDFUSER_HAS_CUDA) && defined(MDFUSER_HAS_FUSED_KERNELS)
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAStream.h>

#include "kernels/gemm_reduce_scatter_pulled.h"
#endif

namespace mdfuser {

#if defined(MDFUSER_HAS_CUDA) && defined(MDFUSER_HAS_FUSED_KERNELS)

using namespace fused_detail;

namespace {

// Checks the operands of a linear + reduce-scatter over a team of `d`.
void checkShapes(
    const at::Tensor& in,
    const at::Tensor& weight,
    const at::Tensor& out,
    int64_t d,
    const std::string& what) {
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
}

// Prepares the pulled kernel's launches for the statement's shapes (the
// first run; the key fixes them): its buffers, its counters and the
// peers' addresses of theirs.
void preparePulls(
    CudaBackend& backend,
    FusedStatement& s,
    int64_t me,
    const at::Tensor& in,
    const at::Tensor& out,
    const std::string& key,
    const std::string& what) {
  const std::vector<int64_t>& team = s.team;
  const int64_t d = static_cast<int64_t>(team.size());
  const int64_t rows = out.size(0);
  const int64_t n = out.size(1);
  // The peers' parts of this member's rows are pulled block by block, each
  // once all of the peers have stored it: blocks of at least kBlockRows
  // rows, at most kPulledMaxBlocks of them, so that the pulls start early
  // in the kernel and the first of this member's tiles waits for one block.
  constexpr int64_t kBlockRows = 512;
  const int64_t blocks =
      std::clamp<int64_t>(rows / kBlockRows, 1, kernels::kPulledMaxBlocks);
  kernels::PulledReduceScatterArgs args;
  args.dtype = gemmDtype(in, what);
  args.rows = rows;
  args.n = n;
  args.k = in.size(1);
  args.members = static_cast<int32_t>(d);
  args.me = static_cast<int32_t>(me);
  args.blocks = static_cast<int32_t>(blocks);
  args.status = s.status;
  // Twice the watchdog's bound: the watchdog, which watches the kernel,
  // reports a missing peer first.
  args.timeout_ns = 2 * timeoutNs(backend);
  args.device = out.device().index();
  // Before the buffers, whose first allocation is collective.
  const std::string refusal = kernels::pulledReduceScatterRefusal(args);
  MDF_USER_CHECK(refusal.empty(), what, ": ", refusal);

  // Two halves of partial sums, by call (a peer may still read the last
  // call's while this one writes), and the counters, zero before the
  // first call, which only grow.
  s.partials = backend.buffers().get(
      key + "/pulled_partials", team, {2, d * rows, n}, out.scalar_type());
  s.counters = backend.buffers().get(
      key + "/pulled_counters", team, {d * blocks}, at::kLong, true);
  s.zeros = at::zeros({rows, n}, out.options());
  s.received = at::empty({rows, n}, out.options());
  s.summed = at::zeros({blocks}, out.options().dtype(at::kLong));
  s.calls = at::zeros({1}, out.options().dtype(at::kLong));
  args.zeros = s.zeros.data_ptr();
  args.counters = static_cast<uint64_t*>(s.counters.data_ptr());
  args.calls = static_cast<uint64_t*>(s.calls.data_ptr());
  // Where each peer holds its partial sums of this member's rows, in both
  // halves, and its counts of their blocks.
  const at::Tensor my_counts = s.counters.narrow(0, me * blocks, blocks);
  for (int64_t half = 0; half < 2; ++half) {
    const at::Tensor partials = s.partials.select(0, half);
    args.partials[half] = partials.data_ptr();
    const at::Tensor mine = partials.narrow(0, me * rows, rows);
    for (int64_t p = 0; p < d; ++p) {
      if (p != me) {
        args.pulls.sources[half][p] = backend.buffers().peerAddress(mine, p);
      }
    }
  }
  for (int64_t p = 0; p < d; ++p) {
    if (p != me) {
      args.pulls.source_counts[p] = static_cast<const uint64_t*>(
          backend.buffers().peerAddress(my_counts, p));
    }
  }
  args.pulls.received = s.received.data_ptr();
  args.pulls.summed = static_cast<uint64_t*>(s.summed.data_ptr());
  kernels::planPulledReduceScatter(args);

  s.workspace = at::empty(
      {static_cast<int64_t>(kernels::pulledReduceScatterWorkspaceBytes(args))},
      out.options().dtype(at::kByte));
  cudaError_t error = cudaSuccess;
  s.pulled = kernels::preparePulledReduceScatter(
      args,
      s.workspace.data_ptr(),
      c10::cuda::getCurrentCUDAStream(out.device().index()).stream(),
      &error);
  MDF_CHECK(
      s.pulled != nullptr,
      what,
      ": the GEMM + reduce-scatter kernel cannot be launched: ",
      error == cudaErrorInvalidConfiguration
          ? "the GPU cannot hold its pulling CTAs and the GEMM's at once"
          : cudaGetErrorString(error));
}

} // namespace

void fusedLinearReduceScatterPulled(
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
  checkShapes(in, weight, out, d, what);
  FusedStatement& s = statementOf(backend, team, key, what, Pushes::kNothing);
  makeStatus(s);
  raiseKernelError(s, backend.rank());
  if (s.pulled == nullptr) {
    preparePulls(backend, s, me, in, out, key, what);
  }
  launchWatched(
      backend,
      team,
      out,
      what,
      "GEMM + reduce-scatter",
      "waited for the peers' partial sums",
      run,
      [&](cudaStream_t stream) {
        return s.pulled->launch(
            in.data_ptr(), weight.data_ptr(), out.data_ptr(), stream);
      });
}

#else

void fusedLinearReduceScatterPulled(
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
