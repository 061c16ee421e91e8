// SPDX-License-Identifier: MIT
#pragma once

// Packs of eight BFloat16 or Half elements (16 bytes, one vector load or
// store) to and from fp32, for the kernels that add partial sums up.

#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace mdfuser::kernels {

// sum[i] += the i-th element of `in`, of type T.
template <class T>
__device__ inline void addPack(const uint4& in, float (&sum)[8]) {
  const T* e = reinterpret_cast<const T*>(&in);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      sum[i] += __bfloat162float(e[i]);
    } else {
      sum[i] += __half2float(e[i]);
    }
  }
}

// The eight sums, each rounded once to T.
template <class T>
__device__ inline uint4 packOf(const float (&sum)[8]) {
  uint4 out;
  T* e = reinterpret_cast<T*>(&out);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      e[i] = __float2bfloat16_rn(sum[i]);
    } else {
      e[i] = __float2half_rn(sum[i]);
    }
  }
  return out;
}

} // namespace mdfuser::kernels
