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

// The calls of a single-launch kernel, counted by the kernel itself: two
// words, the calls finished (raised by the last CTA of each call to end)
// and the CTAs of those calls that have ended. A call's number is the
// count finished before it plus one, the same for every CTA of the call:
// the count rises only once all of them have ended. Nothing of a call is
// known only to the host, so that a CUDA graph replays the launch.
constexpr int kFinishedCallsWord = 0;
constexpr int kEndedCtasWord = 1;

__device__ inline uint64_t callNumber(const uint64_t* calls) {
  return loadAcquire(calls + kFinishedCallsWord) + 1;
}

// Thread 0 of each CTA, once the CTA's work for call `call` is done and
// its memory operations are complete: counts the CTA ended, and the call
// finished if it is the call's last.
__device__ inline void endCta(uint64_t* calls, uint64_t call) {
  __threadfence();
  const uint64_t ctas = uint64_t(gridDim.x) * gridDim.y * gridDim.z;
  const unsigned long long ended = atomicAdd(
      reinterpret_cast<unsigned long long*>(calls + kEndedCtasWord), 1ull);
  if (ended + 1 == call * ctas) {
    storeRelease(calls + kFinishedCallsWord, call);
  }
}

} // namespace mdfuser::kernels::waits
