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

// Where the partial sums lie between the GEMM that computes them and the
// member that owns them (kernels/gemm_reduce_scatter_pulled.h).
enum class PartialsPlace {
  // In the memory of the member that computed them: the owner's summing
  // CTAs read them over the links.
  kSender,
  // In the owner's: the epilogue stores them over the links, the owner
  // reads its own memory (with one peer, its epilogue adds them itself).
  kOwner,
};

// With one peer, where the GEMM runs in one wave (the reference's 1024³),
// the owner's: its epilogue then adds the peer's partial sums as they are,
// without the summing CTAs' wait, copy and count, 22 µs a call against 27
// (two H200s, 2026-11-30). Elsewhere the sender's: at k = 2048 the
// epilogue's stores over the link slow the GEMM (0.546 ms against 0.487).
PartialsPlace placeOf(const kernels::PulledReduceScatterArgs& args) {
  return args.members == 2 && kernels::pulledReduceScatterFitsOneWave(args)
             ? PartialsPlace::kOwner
             : PartialsPlace::kSender;
}

// Prepares the kernel's launch for the statement's shapes (the
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
  s.calls = at::zeros({2}, out.options().dtype(at::kLong));
  args.zeros = s.zeros.data_ptr();
  args.calls = static_cast<uint64_t*>(s.calls.data_ptr());
  // Slot p of a buffer (this member's, or member `holder`'s mapped here).
  auto slot = [&](const at::Tensor& buffer, int64_t p, int64_t holder) {
    const int64_t size = buffer.size(0) / d;
    const at::Tensor part = buffer.narrow(0, p * size, size);
    return holder == me ? part.data_ptr()
                        : backend.buffers().peerAddress(part, holder);
  };
  // Slot p of the sender's buffers holds its partial sums of member p's
  // rows (kSender), or slot p of the owner's holds member p's partial sums
  // of the owner's rows (kOwner); the counts likewise. Every member
  // places them alike: the place follows from the shapes and the GPU.
  const bool owner = placeOf(args) == PartialsPlace::kOwner;
  for (int64_t p = 0; p < d; ++p) {
    if (p == me) {
      continue;
    }
    for (int64_t half = 0; half < 2; ++half) {
      const at::Tensor partials = s.partials.select(0, half);
      args.sends[half][p] =
          owner ? slot(partials, me, p) : slot(partials, p, me);
      args.pulls.sources[half][p] =
          owner ? slot(partials, p, me) : slot(partials, me, p);
    }
    args.counts[p] = static_cast<uint64_t*>(
        owner ? slot(s.counters, me, p) : slot(s.counters, p, me));
    args.pulls.source_counts[p] = static_cast<const uint64_t*>(
        owner ? slot(s.counters, p, me) : slot(s.counters, me, p));
  }
  // With one peer whose partial sums lie here, the epilogue adds them
  // itself; otherwise summing CTAs add the peers' up into `received`.
  args.sums = !(owner && d == 2);
  if (args.sums) {
    s.received = at::empty({rows, n}, out.options());
    s.summed = at::zeros({blocks}, out.options().dtype(at::kLong));
    args.pulls.received = s.received.data_ptr();
    args.pulls.summed = static_cast<uint64_t*>(s.summed.data_ptr());
  }
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
