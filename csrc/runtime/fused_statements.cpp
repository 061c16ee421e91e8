// SPDX-License-Identifier: MIT
#include "runtime/fused_statements.h"

#if defined(MDFUSER_HAS_CUDA) && defined(MDFUSER_HAS_FUSED_KERNELS)

#include <algorithm>
#include <chrono>

#include "kernels/gemm_reduce_scatter_pulled.h"

namespace mdfuser::fused_detail {

namespace {

// The word of mapped host memory the statement's kernel reports into, made
// once.
void makeStatus(FusedStatement& s) {
  if (s.status == nullptr) {
    void* status = nullptr;
    MDF_CUDA_CHECK(
        cudaHostAlloc(&status, sizeof(int32_t), cudaHostAllocMapped));
    s.status = static_cast<int32_t*>(status);
    *s.status = 0;
  }
}

} // namespace

FusedStatement& statementOf(
    CudaBackend& backend,
    const std::vector<int64_t>& team,
    const std::string& key,
    const std::string& what,
    Pushes pushes) {
  std::shared_ptr<FusedStatements>& statements = backend.fusedStatements();
  if (statements == nullptr) {
    statements = std::make_shared<FusedStatements>();
  }
  FusedStatement& s = statements->get(team, key, what, pushes);
  makeStatus(s);
  raiseKernelError(s, backend.rank());
  return s;
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

int64_t timeoutNs(const CudaBackend& backend) {
  return static_cast<int64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(backend.timeout())
          .count());
}

void raiseKernelError(FusedStatement& s, int64_t rank) {
  const int32_t missing = *reinterpret_cast<volatile int32_t*>(s.status);
  if (missing == 0) {
    return;
  }
  *s.status = 0;
  const std::string waited =
      missing == kernels::kPullsLate
          ? "this rank's pulls of its peers' partial sums did not finish"
          : detail::concat(
                "the ",
                s.pulled != nullptr ? "partial sums" : "rows",
                " of rank ",
                s.team.at(missing - 1),
                " did not arrive");
  MDF_USER_ERROR(
      "rank ",
      rank,
      " in ",
      s.what,
      " with team ",
      hir::teamString(s.team),
      ": ",
      waited,
      " within the communicator's timeout; the kernel gave up waiting and "
      "its output is wrong");
}

} // namespace mdfuser::fused_detail

#endif
