// SPDX-License-Identifier: MIT
#pragma once

// The fused kernels' CUTLASS GEMM (csrc/kernels/sm90_gemm.cuh) in several
// tile shapes and cluster shapes, each built in a translation unit of its
// own (gemm_tiles_config.cu, one CUTLASS instantiation each), for
// gemm_tiles.cpp to time against cuBLAS. No torch, no CUTLASS here.

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace mdfuser::bench {

// d[M, N] = a[M, K] · b[N, K]^T, row-major BFloat16, visited by the
// fused kernels' rotated tile scheduler (without their waits or counts)
// along N or along M, CUTLASS's swizzle `swizzle`.
struct TileProblem {
  const void* a = nullptr;
  const void* b = nullptr;
  void* d = nullptr;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  int device = 0;
  bool along_n = true;
  int swizzle = 1;
};

struct GemmVariant {
  // "128x256x64 cluster 2x1"; " pp" ends the ping-pong kernel's.
  const char* name;
  size_t (*workspace_bytes)(const TileProblem&);
  cudaError_t (*run)(const TileProblem&, void* workspace, cudaStream_t);
};

// Variant I of kGemmVariants (gemm_tiles_config.cu, compiled with
// MDFUSER_TILE_CONFIG=I).
constexpr int kGemmVariants = 11;
template <int I>
GemmVariant gemmVariant();

} // namespace mdfuser::bench
