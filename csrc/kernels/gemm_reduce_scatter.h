// SPDX-License-Identifier: MIT
#pragma once

// The GEMM + reduce-scatter kernel (Hopper, sm_90a), without torch:
// pointers, shapes and a stream. runtime/fused_reduce_scatter.cpp sends the
// rows it finishes and sums what arrives.

#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "kernels/gemm_dtype.h"
#include "kernels/tile_blocks.h"

namespace mdfuser::kernels {

// partials[M, N] = in[M, K] · weight[N, K]^T, row-major, M = members ×
// rows_per_member. The tiles of member me + 1's rows come first, then
// those of me + 2 and so on, this member's own last.
struct GemmReduceScatterArgs {
  GemmDtype dtype = GemmDtype::kBFloat16;
  const void* in = nullptr;
  const void* weight = nullptr;
  void* partials = nullptr;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  TileCounts counts;
  int device = 0;
};

// Whether the kernel can compute this problem (alignment of K and N to 8
// elements, nonzero extents, rows divided evenly, each block at least one
// row); the reason if not, empty otherwise.
std::string gemmReduceScatterRefusal(const GemmReduceScatterArgs& args);

// What each counter reaches once its block's rows are finished: the tiles
// that hold any of them (0 for `me`'s blocks), by counter.
std::vector<uint32_t> gemmReduceScatterTileCounts(
    const GemmReduceScatterArgs& args);

// Launches the kernel on `stream`. `workspace` must hold
// gemmReduceScatterWorkspaceBytes(args) bytes of device memory.
size_t gemmReduceScatterWorkspaceBytes(const GemmReduceScatterArgs& args);
cudaError_t launchGemmReduceScatter(
    const GemmReduceScatterArgs& args, void* workspace, cudaStream_t stream);

// out[i] = Σ_p parts[p][i] for i < elements, summed in fp32 and rounded
// once; every pointer 16-byte aligned, elements a multiple of 8, at most
// kMaxParts parts.
constexpr int kMaxParts = 16;
cudaError_t launchSumOfParts(
    GemmDtype dtype,
    const std::vector<const void*>& parts,
    void* out,
    int64_t elements,
    cudaStream_t stream);

} // namespace mdfuser::kernels
