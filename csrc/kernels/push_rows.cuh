// SPDX-License-Identifier: MIT
#pragma once

// The pushing CTAs of the allgather + GEMM kernel (allgather_gemm_pushed.h):
// each copies its share of one block of this member's rows from the input
// into every member's gathered buffer (a local copy into this member's own
// first, then, once every peer has finished its previous call, remote
// stores over NVLink into the peers'), and counts the block in each
// member's counters once its stores are visible to the system. The blocks
// are pushed side by side, each by a group of CTAs: every block pays the
// link's round trip (its fence and count) once, at the same time as the
// others. Included by the one .cu that builds the kernel.

#include <cstdint>

#include "kernels/allgather_gemm_pushed.h"
#include "kernels/sm90_gemm.cuh"
#include "kernels/waits.cuh"

namespace mdfuser::kernels::push {

// 16-byte packs each thread loads before it stores them: enough loads in
// flight to cover the latency of the input's memory.
constexpr int kUnroll = 4;

// Copies packs [lo, hi) of `from` to `members` destinations, each at
// `offset` bytes into its place (`me`'s own place skipped unless `own`,
// the others' skipped if `own`).
__device__ inline void storeShare(
    const PushedAllgatherArgs& args,
    const uint4* from,
    int64_t offset,
    int64_t lo,
    int64_t hi,
    bool own) {
  const int64_t stride = blockDim.x;
  for (int64_t u = lo + threadIdx.x; u < hi; u += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int i = 0; i < kUnroll; ++i) {
      if (u + i * stride < hi) {
        v[i] = __ldg(from + u + i * stride);
      }
    }
    for (int32_t m = 0; m < args.members; ++m) {
      if ((m == args.me) != own) {
        continue;
      }
      auto* to =
          reinterpret_cast<uint4*>(static_cast<char*>(args.places[m]) + offset);
#pragma unroll
      for (int i = 0; i < kUnroll; ++i) {
        if (u + i * stride < hi) {
          to[u + i * stride] = v[i];
        }
      }
    }
  }
}

// Counts block `b` of this member's rows stored in the places of `me` (if
// `own`) or of every peer, once every thread's stores are visible to the
// system (the members' GEMMs read the rows once they see the count).
__device__ inline void countShare(
    const PushedAllgatherArgs& args, int32_t b, bool own) {
  __threadfence_system();
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int32_t m = 0; m < args.members; ++m) {
      if ((m == args.me) == own) {
        atomicAdd_system(
            reinterpret_cast<unsigned long long*>(
                args.counters[m] + kArrivalsWord + args.me * args.blocks + b),
            1ull);
      }
    }
  }
}

// Pushing CTA `cta` of args.ctas, in call `call`; `flag` is a word of its
// shared memory. Its share of its block goes first into this member's own
// place (local stores, counted at once, for the GEMM's own tiles), then,
// once every peer has finished its previous call, into the peers' places
// at once.
__device__ inline void pushRows(
    const PushedAllgatherArgs& args,
    const void* in,
    int32_t cta,
    uint64_t call,
    int32_t* flag) {
  const int32_t b = cta % args.blocks;
  const int32_t part = cta / args.blocks;
  const int32_t parts = ctasOfBlock(args.ctas, args.blocks, b);
  const int64_t row_bytes = args.k * 2;
  const int64_t first_row = int64_t(b) * args.blockRows();
  const int64_t end_row = cute::min(args.rows, first_row + args.blockRows());
  // This CTA's share of the block, in 16-byte packs.
  const int64_t packs =
      cute::max(end_row - first_row, int64_t(0)) * row_bytes / 16;
  const int64_t per_part = (packs + parts - 1) / parts;
  const int64_t lo = cute::min(packs, per_part * part);
  const int64_t hi = cute::min(packs, lo + per_part);
  const int64_t offset = first_row * row_bytes;
  const auto* from =
      reinterpret_cast<const uint4*>(static_cast<const char*>(in) + offset);

  storeShare(args, from, offset, lo, hi, true);
  countShare(args, b, true);

  if (threadIdx.x == 0) {
    const uint64_t deadline = sm90::globalTimer() + uint64_t(args.timeout_ns);
    int32_t ready = 1;
    for (int32_t m = 0; m < args.members; ++m) {
      // The peer's kernel of the previous call no longer reads its
      // gathered buffer, where this call's rows go.
      if (m != args.me && !waits::waitAtLeast(
                              args.counters[m] + waits::kFinishedCallsWord,
                              call - 1,
                              deadline)) {
        waits::report(args.status, m + 1);
        ready = 0;
        break;
      }
    }
    *flag = ready;
  }
  __syncthreads();
  if (*flag == 0) {
    // The peers' GEMMs give up on these rows in turn: the host reports
    // the first that did.
    return;
  }
  storeShare(args, from, offset, lo, hi, false);
  countShare(args, b, false);
}

} // namespace mdfuser::kernels::push
