// SPDX-License-Identifier: MIT
#pragma once

// The allgather + GEMM kernel (Hopper, sm_90a), without torch: pointers,
// shapes and a stream. runtime/fused_matmul.cpp brings the rows in and calls
// it.

#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>

#include "kernels/gemm_dtype.h"

namespace mdfuser::kernels {

// Where the rows of the gathered operand come from, and how long to wait
// for them.
struct RowArrivals {
  // arrived[p] != 0 once member p's rows are in `gathered` (member `me`'s
  // are there before the kernel starts); this member's memory, written by
  // peers' stream memory operations.
  const uint32_t* arrived = nullptr;
  // Mapped host memory: 0, or 1 + the first member whose rows did not
  // arrive within `timeout_ns` (the kernel then computes on what is there,
  // and the host reports the error).
  int32_t* status = nullptr;
  int64_t rows_per_member = 0;
  int32_t members = 1;
  int32_t me = 0;
  int64_t timeout_ns = 0;
};

// out[M, N] = gathered[M, K] · weight[N, K]^T, row-major, M = members ×
// rows_per_member. The tiles of `me`'s rows come first, then those of the
// following members in order; a tile waits in the kernel until the rows it
// reads have arrived.
struct AllgatherGemmArgs {
  GemmDtype dtype = GemmDtype::kBFloat16;
  const void* gathered = nullptr;
  const void* weight = nullptr;
  void* out = nullptr;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  RowArrivals arrivals;
  int device = 0;
};

// Whether the kernel can compute this problem (alignment of K and N to 8
// elements, nonzero extents); the reason if not, empty otherwise.
std::string allgatherGemmRefusal(const AllgatherGemmArgs& args);

// Launches the kernel on `stream`. `workspace` must hold
// allgatherGemmWorkspaceBytes(args) bytes of device memory.
size_t allgatherGemmWorkspaceBytes(const AllgatherGemmArgs& args);
cudaError_t launchAllgatherGemm(
    const AllgatherGemmArgs& args, void* workspace, cudaStream_t stream);

} // namespace mdfuser::kernels
