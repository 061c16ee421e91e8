// SPDX-License-Identifier: MIT
#pragma once

// The pulling CTAs of the GEMM + reduce-scatter kernel
// (gemm_reduce_scatter_pulled.h): for each block of this member's rows, in
// order, each CTA waits until every peer has counted the block stored, then
// brings its share of the block from every peer into shared memory by
// bulk copies (cp.async.bulk from the peers' mapped memory, completing on
// an mbarrier), adds the peers' parts up in fp32 (one peer: nothing to
// add), stores the sum into `received` by a bulk copy, and, once its
// stores are complete, counts its share done in `summed`. Included by the
// one .cu that builds the kernel.

#include <cstdint>

#include <cutlass/arch/barrier.h>
#include <cute/arch/copy_sm90_tma.hpp>

#include "kernels/gemm_reduce_scatter_pulled.h"
#include "kernels/packs.cuh"
#include "kernels/sm90_gemm.cuh"
#include "kernels/waits.cuh"

namespace mdfuser::kernels::pull {

using waits::report;
using waits::waitAtLeast;

// The most bytes a stage of the pipeline takes from one peer, and the most
// stages: as many as the shared memory holds (at least two), so that many
// bulk copies are in flight.
constexpr int32_t kMaxPiece = 16 * 1024;
constexpr int32_t kMaxStages = 14;
// Stores that may still be reading their stages while new loads go out.
constexpr int kLag = 4;

// Pulling CTA `cta` of args.pulls.ctas in call `call`, with `smem_bytes`
// of shared memory at `smem` (16-byte aligned). `T` is the element type.
//
// Thread 0 issues every copy: the loads of the next pieces run ahead of
// the piece being stored, each on its stage's mbarrier, and the stores of
// the last few pieces go on reading their stages meanwhile; a stage is
// loaded again once its store has read it. Where several peers' pieces
// must be added, every thread adds, into the first peer's piece, between
// the load and the store.
template <class T>
__device__ void pullPartials(
    const PulledReduceScatterArgs& args,
    int32_t cta,
    uint64_t call,
    char* smem,
    int32_t smem_bytes) {
  const Pulls& p = args.pulls;
  const int32_t sources = args.members - 1;
  auto* bars = reinterpret_cast<uint64_t*>(smem);
  char* data = smem + 128;
  const int32_t piece = cute::min(
      int32_t(kMaxPiece), (smem_bytes - 128) / (2 * sources) / 16 * 16);
  const int32_t stages =
      cute::min(int32_t(kMaxStages), (smem_bytes - 128) / (sources * piece));
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      cutlass::arch::ClusterTransactionBarrier::init(&bars[s], 1);
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();
  // Stores left in flight when a stage is loaded again, and loads in
  // flight.
  const int32_t lag = stages > 2 * kLag ? kLag : 0;
  const int32_t loads = stages - 1 - lag;
  auto buffer = [&](uint32_t stage, int32_t i) {
    return data + (int64_t(stage) * sources + i) * piece;
  };
  // Only thread 0 takes part where there is nothing to add.
  const bool adds = sources > 1;
  const bool takes_part = adds || threadIdx.x == 0;

  const int64_t row_bytes = args.n * 2;
  // The peers' partial sums of this call are in their half call % 2.
  const void* const* from = p.sources[call % 2];
  const uint64_t deadline = sm90::globalTimer() + uint64_t(args.timeout_ns);
  bool given_up = false;
  // Pieces issued and stored over all blocks, for the stages' phases.
  uint32_t issued = 0;
  uint32_t stored = 0;
  for (int32_t b = 0; b < args.blocks; ++b) {
    const int64_t first_row = int64_t(b) * args.blockRows();
    const int64_t end_row = cute::min(args.rows, first_row + args.blockRows());
    // This CTA's share of the block's bytes, in 16-byte units.
    const int64_t units =
        cute::max(end_row - first_row, int64_t(0)) * row_bytes / 16;
    const int64_t per_cta = (units + p.ctas - 1) / p.ctas;
    const int64_t lo =
        cute::min(units, per_cta * cta) * 16 + first_row * row_bytes;
    const int64_t hi =
        cute::min(units, per_cta * (cta + 1)) * 16 + first_row * row_bytes;
    if (threadIdx.x == 0 && !given_up) {
      for (int32_t m = 0; m < args.members; ++m) {
        if (m != args.me &&
            !waitAtLeast(
                p.source_counts[m] + b, call * p.block_tiles[b], deadline)) {
          report(args.status, m + 1);
          given_up = true;
          break;
        }
      }
      // The peers stored through the async proxy; so do these loads.
      asm volatile("fence.proxy.async.global;" ::: "memory");
    }
    __syncthreads();
    const uint32_t pieces = uint32_t((hi - lo + piece - 1) / piece);
    auto bytesOf = [&](uint32_t j) {
      return int32_t(cute::min(int64_t(piece), hi - lo - int64_t(j) * piece));
    };
    auto issue = [&](uint32_t j) {
      const uint32_t stage = issued % stages;
      const int32_t bytes = bytesOf(j);
      cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(
          &bars[stage], uint32_t(bytes * sources));
      int32_t i = 0;
      for (int32_t m = 0; m < args.members; ++m) {
        if (m != args.me) {
          cute::SM90_BULK_COPY_G2S::copy(
              static_cast<const char*>(from[m]) + lo + int64_t(j) * piece,
              &bars[stage],
              buffer(stage, i++),
              bytes);
        }
      }
      ++issued;
    };
    if (threadIdx.x == 0) {
      for (uint32_t j = 0; j < cute::min(pieces, uint32_t(loads)); ++j) {
        issue(j);
      }
    }
    for (uint32_t j = 0; takes_part && j < pieces; ++j) {
      const uint32_t stage = stored % stages;
      const uint32_t phase = (stored / stages) % 2;
      const int32_t bytes = bytesOf(j);
      cutlass::arch::ClusterTransactionBarrier::wait(&bars[stage], phase);
      if (adds) {
        // Every thread adds up 16-byte packs of the peers' pieces into the
        // first's.
        auto* sum = reinterpret_cast<uint4*>(buffer(stage, 0));
        for (int32_t u = threadIdx.x; u < bytes / 16; u += blockDim.x) {
          float acc[8] = {};
          for (int32_t i = 0; i < sources; ++i) {
            addPack<T>(
                reinterpret_cast<const uint4*>(buffer(stage, i))[u], acc);
          }
          sum[u] = packOf<T>(acc);
        }
        // The bulk store reads through the async proxy.
        cute::tma_store_fence();
        __syncthreads();
      }
      if (threadIdx.x == 0) {
        cute::SM90_BULK_COPY_S2G::copy(
            buffer(stage, 0),
            static_cast<char*>(p.received) + lo + int64_t(j) * piece,
            bytes);
        cute::tma_store_arrive();
        if (j + loads < pieces) {
          // The stage of piece j + loads - stages, free once its store has
          // read it: every store but the last `lag`.
          if (lag == kLag) {
            cute::tma_store_wait<kLag>();
          } else {
            cute::tma_store_wait<0>();
          }
          issue(j + loads);
        }
      }
      ++stored;
    }
    if (threadIdx.x == 0) {
      // This CTA's share is in `received`; the epilogue's TMA loads read it.
      asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
      asm volatile("fence.proxy.async.global;" ::: "memory");
      __threadfence();
      atomicAdd(reinterpret_cast<unsigned long long*>(p.summed + b), 1ull);
    }
    __syncthreads();
  }
}

} // namespace mdfuser::kernels::pull
