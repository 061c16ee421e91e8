// SPDX-License-Identifier: MIT
#pragma once

// What the fused matmul statements (fused_matmul.cpp,
// fused_reduce_scatter.cpp) keep between runs, and the helpers their runs
// share. Only in builds with the fused kernels.

#if defined(MDFUSER_HAS_CUDA) && defined(MDFUSER_HAS_FUSED_KERNELS)

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include "host_ir/nodes.h"
#include "ir/errors.h"
#include "kernels/allgather_gemm_pushed.h"
#include "kernels/gemm_dtype.h"
#include "kernels/gemm_reduce_scatter_pulled.h"
#include "runtime/cuda_backend.h"
#include "runtime/cuda_util.h"

namespace mdfuser {

// What a fused statement keeps between runs: for an allgather + GEMM, its
// channel of the team's flags and a stream for its moves of rows; and what
// its kind of kernel keeps.
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

  // Statements that push rows (Pushes::kRows) only.
  int64_t channel = 0;
  cudaStream_t moves = nullptr;
  std::vector<int64_t> team;
  std::string what;
  // Mapped host memory the kernel writes what it gave up waiting for into
  // (made by the first run).
  int32_t* status = nullptr;
  // GEMM + reduce-scatter (made by the first run; the statement's key fixes
  // the shapes): the kernel's partial sums and its counters, both
  // symmetric, the counters only growing; its prepared launch and the
  // workspace it keeps, the count of its calls in device memory (the same
  // on every member), the zeros its peers' rows add, and, where summing
  // CTAs add the peers' partial sums up, their sum of this member's rows
  // and their counts of its blocks.
  at::Tensor partials;
  at::Tensor counters;
  std::unique_ptr<kernels::FusedLaunch> pulled;
  at::Tensor workspace;
  at::Tensor calls;
  at::Tensor zeros;
  at::Tensor received;
  at::Tensor summed;
  // Allgather + GEMM whose kernel pushes the rows (made by the first run):
  // its prepared launch and its gathered buffer (symmetric; the counters
  // and the workspace above are its too).
  std::unique_ptr<kernels::FusedLaunch> pushed;
  at::Tensor gathered;
};

// Whether a fused statement moves rows to its peers with copy engines (the
// allgather + GEMM), or its kernel does all its communication (the GEMM +
// reduce-scatter, whose kernel pulls).
enum class Pushes { kRows, kNothing };

// The fused statements of one backend, by key, kept as long as the backend
// (CudaBackend::fusedStatements). Channels go to the statements that push
// rows, in the order they first run, which is the same on every member.
class FusedStatements {
 public:
  FusedStatement& get(
      const std::vector<int64_t>& team,
      const std::string& key,
      const std::string& what,
      Pushes pushes) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = statements_.find(key);
    if (it != statements_.end()) {
      return *it->second;
    }
    auto s = std::make_unique<FusedStatement>();
    s->team = team;
    s->what = what;
    if (pushes == Pushes::kRows) {
      s->channel = pushingOver(team);
      MDF_CUDA_CHECK(
          cudaStreamCreateWithFlags(&s->moves, cudaStreamNonBlocking));
    }
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
  // How many statements over `team` push rows so far: the channel of the
  // next.
  int64_t pushingOver(const std::vector<int64_t>& team) const {
    int64_t channel = 0;
    for (const auto& [k, s] : statements_) {
      if (s->team == team && s->moves != nullptr) {
        ++channel;
      }
    }
    MDF_USER_CHECK(
        channel < CudaBackend::kChannels,
        "a program runs more than ",
        CudaBackend::kChannels,
        " fused allgather + GEMM statements over team ",
        hir::teamString(team),
        "; disable them with "
        "_disable_options=[\"fused_matmul_communication\"]");
    return channel;
  }

  std::mutex mutex_;
  std::map<std::string, std::unique_ptr<FusedStatement>> statements_;
};

namespace fused_detail {

// The statement of `key` of `backend`, made by its first run with the word
// its kernel reports into; raises, once, the error a previous run's kernel
// left there.
FusedStatement& statementOf(
    CudaBackend& backend,
    const std::vector<int64_t>& team,
    const std::string& key,
    const std::string& what,
    Pushes pushes);

// The kernels' element type of `t` (BFloat16 or Half; a ValueError naming
// `what` otherwise).
kernels::GemmDtype gemmDtype(const at::Tensor& t, const std::string& what);

// This rank's place in `team`.
int64_t memberIndex(
    const std::vector<int64_t>& team, int64_t rank, const std::string& what);

// Checks that the operands are contiguous and of one dtype.
void checkOperands(
    const at::Tensor& in,
    const at::Tensor& weight,
    const at::Tensor& out,
    const std::string& what);

// Raises the error a previous run's kernel left in `s.status`, once.
void raiseKernelError(FusedStatement& s, int64_t rank);

// The communicator's timeout in nanoseconds, which bounds the kernels'
// waits (the kernels that the watchdog watches wait twice as long, so that
// it reports a missing peer first).
int64_t timeoutNs(const CudaBackend& backend);

// Raises the error of a kernel's launch that failed, naming `what` and
// the `kernel` ("the allgather + GEMM kernel failed to launch: ...").
inline void checkLaunched(
    cudaError_t launched, const std::string& what, const char* kernel) {
  MDF_CHECK(
      launched == cudaSuccess,
      what,
      ": the ",
      kernel,
      " kernel failed to launch: ",
      cudaGetErrorString(launched));
}

// Posts a statement's prepared kernel, `launch(stream)` on the current
// stream of `out`'s device, and has the watchdog watch it, reporting
// `waited` if it does not end ("the allgather + GEMM" names `kernel` in
// the launch's error).
template <class Launch>
void launchWatched(
    CudaBackend& backend,
    const std::vector<int64_t>& team,
    const at::Tensor& out,
    const std::string& what,
    const char* kernel,
    std::string waited,
    uint64_t run,
    Launch&& launch) {
  cudaStream_t compute =
      c10::cuda::getCurrentCUDAStream(out.device().index()).stream();
  const cudaError_t launched = launch(compute);
  checkLaunched(launched, what, kernel);
  backend.watchKernel(
      team,
      compute,
      std::make_shared<const std::string>(what),
      std::move(waited),
      run);
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
  checkLaunched(launched, what, kernel);
}

// Whether the allgather + linear of `in` [rows, K] (this member's rows)
// and `weight` [N, K] over a team of `d` runs the kernel whose CTAs push
// the rows (pushedAllgatherFits); the copy-engine kernel otherwise.
bool pushesRows(int64_t d, const at::Tensor& in, const at::Tensor& weight);

// fusedAllgatherLinear (runtime/fused_matmul.h) with the pushing kernel.
void pushedAllgatherLinear(
    CudaBackend& backend,
    const std::vector<int64_t>& team,
    const at::Tensor& in,
    const at::Tensor& weight,
    const at::Tensor& out,
    const std::string& key,
    const std::string& what,
    uint64_t run);

} // namespace fused_detail

} // namespace mdfuser

#endif
