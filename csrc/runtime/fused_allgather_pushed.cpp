// SPDX-License-Identifier: MIT
//
// The fused allgather + linear statement (AllgatherLinear) where its
// kernel's own CTAs push the rows (kernels/allgather_gemm_pushed.h): GEMMs
// whose tiles fill less than a wave of the GPU, beside the pushing CTAs.
#include <algorithm>
#include <string>

#include "ir/errors.h"
#include "runtime/fused_matmul.h"
#include "runtime/fused_statements.h"

#if defined(MDFUSER_HAS_CUDA) && defined(MDFUSER_HAS_FUSED_KERNELS)
#include <ATen/ops/empty.h>

#include "kernels/allgather_gemm_pushed.h"

namespace mdfuser::fused_detail {

namespace {

// Blocks of at least one GEMM tile's rows, at most kPushedMaxBlocks: the
// tiles of a peer's first rows start once its first block is here.
constexpr int64_t kBlockRows = 128;

// The kernel's arguments for `rows` rows of each of `d` members (this one
// `me`), N = `n`, K = `k`, on `device`; no buffer yet.
kernels::PushedAllgatherArgs argsOf(
    int64_t rows, int64_t n, int64_t k, int64_t d, int64_t me, int device) {
  kernels::PushedAllgatherArgs args;
  args.rows = rows;
  args.n = n;
  args.k = k;
  args.members = static_cast<int32_t>(d);
  args.me = static_cast<int32_t>(me);
  args.blocks = static_cast<int32_t>(
      std::clamp<int64_t>(rows / kBlockRows, 1, kernels::kPushedMaxBlocks));
  args.device = device;
  return args;
}

// Prepares the kernel's launch for the statement's shapes (its first run;
// the key fixes them): the gathered buffer, the counters and the peers'
// addresses of theirs.
void preparePushes(
    CudaBackend& backend,
    FusedStatement& s,
    kernels::PushedAllgatherArgs args,
    const at::Tensor& in,
    const std::string& key,
    const std::string& what) {
  const std::vector<int64_t>& team = s.team;
  const int64_t d = args.members;
  const int64_t me = args.me;
  args.status = s.status;
  s.gathered = backend.buffers().get(
      key + "/pushed_gathered",
      team,
      {d * args.rows, args.k},
      in.scalar_type());
  s.counters = backend.buffers().get(
      key + "/pushed_counters",
      team,
      {kernels::pushedCounterWords(args.members, args.blocks)},
      at::kLong,
      true);
  args.gathered = s.gathered.data_ptr();
  const at::Tensor place = s.gathered.narrow(0, me * args.rows, args.rows);
  for (int64_t p = 0; p < d; ++p) {
    args.places[p] =
        p == me ? place.data_ptr() : backend.buffers().peerAddress(place, p);
    args.counters[p] = static_cast<uint64_t*>(
        p == me ? s.counters.data_ptr()
                : backend.buffers().peerAddress(s.counters, p));
  }
  s.workspace = at::empty(
      {std::max<int64_t>(
          1,
          static_cast<int64_t>(kernels::pushedAllgatherWorkspaceBytes(args)))},
      in.options().dtype(at::kByte));
  cudaError_t error = cudaSuccess;
  s.pushed =
      kernels::preparePushedAllgather(args, s.workspace.data_ptr(), &error);
  MDF_CHECK(
      s.pushed != nullptr,
      what,
      ": the allgather + GEMM kernel cannot be launched: ",
      error == cudaErrorInvalidConfiguration
          ? "the GPU cannot hold its pushing CTAs and the GEMM's at once"
          : cudaGetErrorString(error));
}

// Whether the GEMM of `rows` rows (all members'), N = `n`, K = `k`, over
// `d` members runs in one wave beside the pushing CTAs on `device` (the
// kernels being there).
bool fitsOneWave(int64_t rows, int64_t n, int64_t k, int64_t d, int device) {
  const kernels::PushedAllgatherArgs args =
      argsOf(rows / d, n, k, d, 0, device);
  return kernels::pushedAllgatherRefusal(args).empty() &&
         kernels::pushedAllgatherFitsOneWave(args);
}

} // namespace

bool pushesRows(int64_t d, const at::Tensor& in, const at::Tensor& weight) {
  // At every call: whether the device can run the kernels was asked when
  // the program was compiled.
  return fitsOneWave(
      in.size(0) * d, weight.size(0), in.size(1), d, in.device().index());
}

void pushedAllgatherLinear(
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
  FusedStatement& s = statementOf(backend, team, key, what, Pushes::kNothing);
  if (s.pushed == nullptr) {
    kernels::PushedAllgatherArgs args = argsOf(
        in.size(0), weight.size(0), in.size(1), d, me, in.device().index());
    args.dtype = gemmDtype(in, what);
    // Twice the watchdog's bound: the watchdog, which watches the kernel,
    // reports a missing peer first.
    args.timeout_ns = 2 * timeoutNs(backend);
    // Before the buffers, whose first allocation is collective.
    const std::string refusal = kernels::pushedAllgatherRefusal(args);
    MDF_USER_CHECK(refusal.empty(), what, ": ", refusal);
    preparePushes(backend, s, args, in, key, what);
  }
  launchWatched(
      backend,
      team,
      out,
      what,
      "allgather + GEMM",
      "waited for the peers' rows",
      run,
      [&](cudaStream_t stream) {
        return s.pushed->launch(
            in.data_ptr(), weight.data_ptr(), out.data_ptr(), stream);
      });
}

} // namespace mdfuser::fused_detail

namespace mdfuser {

bool pushedAllgatherFits(
    int64_t rows, int64_t n, int64_t k, int64_t d, c10::Device device) {
  return d >= 2 && rows % d == 0 && fusedMatmulKernelsAvailable(device) &&
         fused_detail::fitsOneWave(rows, n, k, d, device.index());
}

} // namespace mdfuser

#else

namespace mdfuser {

bool pushedAllgatherFits(int64_t, int64_t, int64_t, int64_t, c10::Device) {
  return false;
}

} // namespace mdfuser

#endif
