// SPDX-License-Identifier: MIT
//
// GEMM + reduce-scatter in one kernel: CUTLASS's warp-specialized
// persistent GEMM for sm_90a, whose tile scheduler visits the peers' rows
// first, peer after peer, this member's own last, and counts, for each
// block of a peer's rows, the tiles whose stores are complete. A copy
// engine waits on each count (runtime/fused_reduce_scatter.cpp) and sends the
// peer the block while the kernel computes the next; each member then sums the
// partial rows it received with its own (launchSumOfParts).
#include "kernels/gemm_reduce_scatter.h"

#include <climits>

#include "kernels/packs.cuh"
#include "kernels/sm90_gemm.cuh"

namespace mdfuser::kernels {
namespace {

// The rotated scheduler (sm90::RotatedTileScheduler), with the next
// member's rows first and this member's last, and the warp
// that issues the epilogue's stores counting the finished tiles of each
// block of the peers' rows: when the next tile holds other blocks' rows
// than the tiles finished since the last count (or there is none), it
// waits for its stores to complete and adds those tiles to the blocks'
// counters.
class CountingTileScheduler : public sm90::RotatedTileScheduler<TileCounts> {
  using Base = sm90::RotatedTileScheduler<TileCounts>;

 public:
  using Base::Base;

  template <class ClusterShape>
  CUTLASS_DEVICE WorkTileInfo initial_work_tile_info(ClusterShape) {
    return current();
  }

  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo finished) {
    advance_to_next_work();
    const WorkTileInfo next = current();
    if (storesTiles()) {
      count(finished, next);
    }
    return cute::make_tuple(next, true);
  }

  template <class Pipeline, class PipelineState>
  CUTLASS_DEVICE auto fetch_next_work(
      WorkTileInfo finished, Pipeline&, PipelineState) {
    return fetch_next_work(finished);
  }

 private:
  // The warp whose lanes issue the epilogue's TMA stores: the first of the
  // consumer warpgroups (CUTLASS's cooperative epilogue).
  CUTLASS_DEVICE static bool storesTiles() {
    return cutlass::canonical_warp_group_idx() == 1 &&
           cutlass::canonical_warp_idx_sync() % 4 == 0;
  }

  CUTLASS_DEVICE Blocks blocksOf(const WorkTileInfo& tile) const {
    return blocksOfTile(
        int64_t(tile.M_idx) * params_.tile_rows,
        params_.tile_rows,
        params_.payload);
  }

  // After the epilogue of `finished` (its stores issued), before `next`.
  CUTLASS_DEVICE void count(
      const WorkTileInfo& finished, const WorkTileInfo& next) {
    const Blocks done = blocksOf(finished);
    if (done.lo <= done.hi) {
      if (pending_ > 0 && !(done == pending_blocks_)) {
        flush();
      }
      pending_blocks_ = done;
      ++pending_;
    }
    if (pending_ > 0 &&
        (!next.is_valid() || !(blocksOf(next) == pending_blocks_))) {
      flush();
    }
  }

  // Waits for this warp's stores to complete and adds the pending tiles to
  // the counters of the peers whose rows they hold.
  CUTLASS_DEVICE void flush() {
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    __syncwarp();
    if (cute::elect_one_sync()) {
      // The stores went through the async proxy; the copy engine reads
      // after it sees the count.
      asm volatile("fence.proxy.async.global;" ::: "memory");
      __threadfence_system();
      const TileCounts& c = params_.payload;
      for (int32_t b = pending_blocks_.lo; b <= pending_blocks_.hi; ++b) {
        if (b / c.parts != c.me) {
          atomicAdd_system(c.counters + b, static_cast<uint32_t>(pending_));
        }
      }
    }
    __syncwarp();
    pending_ = 0;
  }

  Blocks pending_blocks_;
  int32_t pending_ = 0;
};

sm90::Problem problemOf(const GemmReduceScatterArgs& args) {
  return {
      args.in, args.weight, args.partials, args.m, args.n, args.k, args.device};
}

// The next member's rows first, this member's own last.
int64_t firstRow(const GemmReduceScatterArgs& args) {
  const TileCounts& c = args.counts;
  return c.rows_per_member * ((c.me + 1) % c.members);
}

struct Parts {
  const uint4* at[kMaxParts];
  int count;
};

// One pack of eight elements a thread, as many blocks as the packs need:
// 3.8 TB/s on an H200 for two parts of 4096 x 8192, where a grid-stride
// loop over 8 blocks an SM reached 3.6 (benchmarks/kernels/gemm_tiles).
template <class T>
__global__ void sumOfParts(Parts parts, uint4* out, int64_t packs) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= packs) {
    return;
  }
  float sum[8] = {};
  for (int p = 0; p < parts.count; ++p) {
    addPack<T>(parts.at[p][i], sum);
  }
  out[i] = packOf<T>(sum);
}

} // namespace

std::string gemmReduceScatterRefusal(const GemmReduceScatterArgs& args) {
  if (std::string refusal = sm90::problemRefusal(problemOf(args));
      !refusal.empty()) {
    return refusal;
  }
  const TileCounts& c = args.counts;
  if (c.members < 1 || c.members > kMaxParts || c.me < 0 || c.me >= c.members ||
      c.rows_per_member * c.members != args.m) {
    return "the rows must divide evenly among at most 16 members";
  }
  if (!c.blocksFilled()) {
    return "each member's rows must fill every one of its blocks";
  }
  return "";
}

std::vector<uint32_t> gemmReduceScatterTileCounts(
    const GemmReduceScatterArgs& args) {
  return sm90::withGemm<CountingTileScheduler>(
      args.dtype, problemOf(args), [&](auto gemm) {
        using Gemm = decltype(gemm);
        return tileCountsOfBlocks(
            args.n, Gemm::kTileRows, Gemm::kTileCols, args.counts);
      });
}

size_t gemmReduceScatterWorkspaceBytes(const GemmReduceScatterArgs& args) {
  return sm90::workspaceBytes<CountingTileScheduler>(
      args.dtype, problemOf(args), args.counts, firstRow(args));
}

cudaError_t launchGemmReduceScatter(
    const GemmReduceScatterArgs& args, void* workspace, cudaStream_t stream) {
  return sm90::launch<CountingTileScheduler>(
      args.dtype,
      problemOf(args),
      args.counts,
      firstRow(args),
      workspace,
      stream);
}

cudaError_t launchSumOfParts(
    GemmDtype dtype,
    const std::vector<const void*>& parts,
    void* out,
    int64_t elements,
    cudaStream_t stream) {
  if (parts.empty() || parts.size() > kMaxParts || elements % 8 != 0) {
    return cudaErrorInvalidValue;
  }
  auto aligned = [](const void* ptr) {
    return reinterpret_cast<uintptr_t>(ptr) % sizeof(uint4) == 0;
  };
  if (!aligned(out)) {
    return cudaErrorMisalignedAddress;
  }
  Parts p{};
  p.count = static_cast<int>(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!aligned(parts[i])) {
      return cudaErrorMisalignedAddress;
    }
    p.at[i] = static_cast<const uint4*>(parts[i]);
  }
  const int64_t packs = elements / 8;
  if (packs == 0) {
    return cudaSuccess;
  }
  constexpr int kThreads = 256;
  const int64_t blocks = (packs + kThreads - 1) / kThreads;
  if (blocks > INT32_MAX) {
    return cudaErrorInvalidValue;
  }
  if (dtype == GemmDtype::kBFloat16) {
    sumOfParts<__nv_bfloat16>
        <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
            p, static_cast<uint4*>(out), packs);
  } else {
    sumOfParts<__half><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        p, static_cast<uint4*>(out), packs);
  }
  return cudaGetLastError();
}

} // namespace mdfuser::kernels
