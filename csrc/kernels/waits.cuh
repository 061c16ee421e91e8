// SPDX-License-Identifier: MIT
#pragma once

// Bounded waits of the fused kernels on words their peers (or their own
// other CTAs) raise: system-scope acquire loads, a deadline on the global
// timer, and the status word a kernel that gave up writes. Included by the
// .cu files that build the kernels.

#include <cstdint>

#include "kernels/sm90_gemm.cuh"

namespace mdfuser::kernels::waits {

__device__ inline uint64_t loadAcquire(const uint64_t* word) {
  uint64_t value = 0;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];"
               : "=l"(value)
               : "l"(word)
               : "memory");
  return value;
}

__device__ inline void storeRelease(uint64_t* word, uint64_t value) {
  asm volatile("st.release.sys.global.u64 [%0], %1;"
               :
               : "l"(word), "l"(value)
               : "memory");
}

// Writes `code` into the status unless an earlier give-up is there.
__device__ inline void report(int32_t* status, int32_t code) {
  atomicCAS_system(status, 0, code);
  __threadfence_system();
}

// Waits until `*word` reaches `value`, at most until `deadline`; false if
// it did not.
__device__ inline bool waitAtLeast(
    const uint64_t* word, uint64_t value, uint64_t deadline) {
  while (loadAcquire(word) < value) {
    if (sm90::globalTimer() > deadline) {
      return false;
    }
    __nanosleep(128);
  }
  return true;
}

} // namespace mdfuser::kernels::waits
