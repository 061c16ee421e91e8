// SPDX-License-Identifier: MIT
//
// GEMM + reduce-scatter in one launch, the partial sums brought together
// by the members that own them (gemm_reduce_scatter_pulled.h): the first
// CTAs sum (pull_partials.cuh), the others run CUTLASS's ptr-array cooperative
// GEMM for sm_90a, one batch a member's rows, with a tile scheduler that
// counts the peers' blocks stored and makes the epilogue of this member's
// own rows wait for the peers' sum (its C).
#include "kernels/gemm_reduce_scatter_pulled.h"

#include <climits>
#include <memory>
#include <vector>

#include "kernels/pull_partials.cuh"
#include "kernels/sm90_gemm.cuh"

namespace mdfuser::kernels {
namespace {

// What the GEMM's tile scheduler looks up by member or by block, in device
// memory (the workspace, written once by the launch's preparation): kept in
// the scheduler's parameters, which every thread copies, arrays indexed at
// run time would put that copy on each thread's stack (576 bytes).
struct PulledTable {
  // Where this member counts the blocks of member p's rows ([p][b]).
  uint64_t* counts[kPulledMaxMembers];
  // What block b's counter (PulledSteps::ready) reaches in a call.
  uint32_t ready_counts[kPulledMaxBlocks];
};

// What the GEMM's tile scheduler counts and waits for.
struct PulledSteps {
  const PulledTable* table = nullptr;
  // What the epilogue of this member's own rows waits for, per block of
  // them: block b's counter at ready[b] reaching table->ready_counts[b] a
  // call (the summing CTAs' count of the peers' sum, or, where there are
  // none, the peer's count of its partial sums), and what it reports if it
  // gives up.
  const uint64_t* ready = nullptr;
  int32_t late = kPullsLate;
  int64_t rows = 0;
  int64_t block_rows = 0;
  int32_t members = 1;
  int32_t me = 0;
  int32_t blocks = 1;
  // The count of the statement's calls (kernels/waits.cuh).
  const uint64_t* calls = nullptr;
  int32_t* status = nullptr;
  int64_t timeout_ns = 0;
};

// The rotated scheduler (not rotated: batch l holds member me + 1 + l's
// rows, this member's own last), with
//  - the warp that issues the epilogue's stores counting, per block of a
//    peer's rows, the tiles whose stores are complete, into this member's
//    counts, which the peers' summing CTAs read;
//  - the epilogue's loading warp waiting, before it reads the C of a tile
//    of this member's own rows, until the summing CTAs have stored the sum
//    of the peers' parts of the tile's blocks (or, with no summing CTA,
//    until the one peer has counted its part of them stored here).
class PulledTileScheduler : public sm90::RotatedTileScheduler<PulledSteps> {
  using Base = sm90::RotatedTileScheduler<PulledSteps>;

 public:
  using Base::Base;

  template <class ClusterShape>
  CUTLASS_DEVICE WorkTileInfo initial_work_tile_info(ClusterShape) {
    return current();
  }

  // The ptr-array kernel's C-loading warp fetches the next tile before it
  // loads the current one's C: that warp waits here for the tile it is
  // about to load (`current_tile`), never for the next.
  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo current_tile) {
    waitForSum(current_tile);
    advance_to_next_work();
    const WorkTileInfo next = current();
    if (storesTiles()) {
      count(current_tile, next);
    }
    return cute::make_tuple(next, true);
  }

  template <class Pipeline, class PipelineState>
  CUTLASS_DEVICE auto fetch_next_work(
      WorkTileInfo current_tile, Pipeline&, PipelineState) {
    return fetch_next_work(current_tile);
  }

 private:
  // The warp whose lanes issue the epilogue's TMA stores: the first of the
  // consumer warpgroups (CUTLASS's cooperative epilogue).
  CUTLASS_DEVICE static bool storesTiles() {
    return cutlass::canonical_warp_group_idx() == 1 &&
           cutlass::canonical_warp_idx_sync() % 4 == 0;
  }

  // The producer warp that loads the epilogue's C (CUTLASS's
  // ProducerWarpRole::Epilogue).
  CUTLASS_DEVICE static bool loadsC() {
    return cutlass::canonical_warp_group_idx() == 0 &&
           cutlass::canonical_warp_idx_sync() % 4 == 2;
  }

  CUTLASS_DEVICE bool own(const WorkTileInfo& tile) const {
    return tile.L_idx == params_.payload.members - 1;
  }

  // The blocks of its member's rows that a tile of a batch holds.
  CUTLASS_DEVICE Blocks blocksOf(const WorkTileInfo& tile) const {
    const PulledSteps& s = params_.payload;
    return blocksOfTile(
        int64_t(tile.M_idx) * params_.tile_rows,
        params_.tile_rows,
        s.rows,
        s.block_rows);
  }

  CUTLASS_DEVICE void waitForSum(const WorkTileInfo& tile) {
    if (!tile.is_valid() || !loadsC() || given_up_ || !own(tile)) {
      return;
    }
    const PulledSteps& s = params_.payload;
    const Blocks held = blocksOf(tile);
    // Longer than the pulls' own bound, so that a missing peer is what
    // they report; the watchdog's bound is shorter still.
    const uint64_t deadline = sm90::globalTimer() + 2 * uint64_t(s.timeout_ns);
    const uint64_t call = waits::callNumber(s.calls);
    for (int32_t b = held.lo; b <= held.hi; ++b) {
      if (!waits::waitAtLeast(
              s.ready + b,
              call * uint64_t(s.table->ready_counts[b]),
              deadline)) {
        waits::report(s.status, s.late);
        given_up_ = true;
        return;
      }
    }
    // The sum (or the peer's partial sums) was stored through the async
    // proxy; C's TMA loads read it.
    asm volatile("fence.proxy.async.global;" ::: "memory");
  }

  // After the epilogue of `finished` (its stores issued), before `next`:
  // tiles of one peer's blocks are counted together, when the next tile
  // holds others (or there is none).
  CUTLASS_DEVICE void count(
      const WorkTileInfo& finished, const WorkTileInfo& next) {
    if (finished.is_valid() && !own(finished)) {
      const Blocks done = blocksOf(finished);
      if (done.lo <= done.hi) {
        if (pending_ > 0 &&
            (finished.L_idx != pending_batch_ || !(done == pending_blocks_))) {
          flush();
        }
        pending_batch_ = finished.L_idx;
        pending_blocks_ = done;
        ++pending_;
      }
    }
    if (pending_ > 0 && (!next.is_valid() || next.L_idx != pending_batch_ ||
                         !(blocksOf(next) == pending_blocks_))) {
      flush();
    }
  }

  // Waits for this warp's stores to complete and adds the pending tiles to
  // the counts of their blocks (this member's memory or the owner's).
  CUTLASS_DEVICE void flush() {
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    __syncwarp();
    if (cute::elect_one_sync()) {
      // The stores went through the async proxy, to memory the owner reads
      // once it sees the count.
      asm volatile("fence.proxy.async.global;" ::: "memory");
      __threadfence_system();
      const PulledSteps& s = params_.payload;
      const int32_t member = (s.me + 1 + pending_batch_) % s.members;
      for (int32_t b = pending_blocks_.lo; b <= pending_blocks_.hi; ++b) {
        atomicAdd_system(
            reinterpret_cast<unsigned long long*>(s.table->counts[member] + b),
            static_cast<unsigned long long>(pending_));
      }
    }
    __syncwarp();
    pending_ = 0;
  }

  int32_t pending_batch_ = -1;
  Blocks pending_blocks_;
  int32_t pending_ = 0;
  bool given_up_ = false;
};

} // namespace
} // namespace mdfuser::kernels

namespace cutlass::gemm::kernel::detail {
// The ptr-array kernel's default scheduler for the tiles and clusters this
// file uses (sm90::ArrayGemm checks that it took): the pulled
// reduce-scatter's. No other file instantiates the ptr-array kernel.
template <>
struct TileSchedulerSelector<
    void,
    arch::Sm90,
    mdfuser::kernels::sm90::LargeTiles,
    mdfuser::kernels::sm90::PairsAlongM,
    8,
    void> {
  using Scheduler = mdfuser::kernels::PulledTileScheduler;
};
template <>
struct TileSchedulerSelector<
    void,
    arch::Sm90,
    mdfuser::kernels::sm90::SmallTiles,
    mdfuser::kernels::sm90::Alone,
    8,
    void> {
  using Scheduler = mdfuser::kernels::PulledTileScheduler;
};
} // namespace cutlass::gemm::kernel::detail

namespace mdfuser::kernels {
namespace {

// 128 × 256 tiles in clusters of two along M where they fill the GPU,
// 128 × 128 tiles alone where they do not (as sm90::withGemm chooses for
// the other kernels: at M = N = K = 1024 CUTLASS's 128 × 256 tiles took
// 1.32× cuBLAS's time, its 128 × 128 0.85×, benchmarks/kernels/gemm_tiles
// on one H200). The pulling CTAs and the GEMM's share one launch of the
// GEMM's cluster shape.
template <class Element, bool kLarge>
using PulledGemm = sm90::ArrayGemm<
    Element,
    std::conditional_t<kLarge, sm90::LargeTiles, sm90::SmallTiles>,
    std::conditional_t<kLarge, sm90::PairsAlongM, sm90::Alone>,
    PulledTileScheduler>;
// The summing CTAs, whole clusters of `cluster_rows` CTAs: the launch's
// first grid rows. Where the caller asks for none, eight a peer and at most
// sixteen, the fastest of 4, 8 and 16 at k = 2048 with two and four members
// on one H200 (benchmarks/kernels/gemm_tiles: each CTA pulls about 25
// GB/s). None where the epilogue adds the one peer's partial sums itself.
int32_t pullCtasOf(const PulledReduceScatterArgs& args, int cluster_rows) {
  if (!args.sums) {
    return 0;
  }
  const int32_t asked = args.pulls.ctas > 0
                            ? args.pulls.ctas
                            : cute::min(16, 8 * (args.members - 1));
  return (asked + cluster_rows - 1) / cluster_rows * cluster_rows;
}

// The four pointer arrays, kPulledMaxMembers each, at the start of the
// workspace, then the scheduler's table; CUTLASS's own workspace after
// them.
constexpr size_t kPointerArrayBytes = kPulledMaxMembers * sizeof(void*);
constexpr size_t kTableOffset = 4 * kPointerArrayBytes;
constexpr size_t kPointerBytes =
    (kTableOffset + sizeof(PulledTable) + 127) / 128 * 128;

// What the batches of a call read and write, passed by value to the
// kernel, which writes the arrays (the operands' addresses change from
// call to call, the partial sums' half with the call's number).
struct BatchPointers {
  const void* a[kPulledMaxMembers];
  const void* c[2][kPulledMaxMembers];
  void* d[2][kPulledMaxMembers];
  const void* b;
  int batches;
};

// Writes the batches' pointers of call `call`, whose partial sums go to
// half call % 2. Every CTA writes them (the same values) before its GEMM
// reads them: no launch before the kernel.
__device__ inline void writePointers(
    const BatchPointers& p, void** arrays, uint64_t call) {
  const int i = threadIdx.x;
  if (i < p.batches) {
    arrays[i] = const_cast<void*>(p.a[i]);
    arrays[kPulledMaxMembers + i] = const_cast<void*>(p.b);
    arrays[2 * kPulledMaxMembers + i] = const_cast<void*>(p.c[call % 2][i]);
    arrays[3 * kPulledMaxMembers + i] = p.d[call % 2][i];
  }
  __syncthreads();
}

// The summing CTAs, then CUTLASS's kernel on the others; the last CTA of
// the call to end counts the call finished.
template <class Kernel, class T>
__global__ void __launch_bounds__(
    Kernel::MaxThreadsPerBlock, Kernel::MinBlocksPerMultiprocessor)
    pulledGemm(
        CUTLASS_GRID_CONSTANT typename Kernel::Params const params,
        CUTLASS_GRID_CONSTANT PulledReduceScatterArgs const args,
        CUTLASS_GRID_CONSTANT BatchPointers const pointers,
        void** arrays) {
  extern __shared__ char smem[];
  const uint64_t call = waits::callNumber(args.calls);
  writePointers(pointers, arrays, call);
  const int32_t cta = int32_t(blockIdx.x + blockIdx.y * gridDim.x);
  if (cta < args.pulls.ctas) {
    pull::pullPartials<T>(args, cta, call, smem, Kernel::SharedStorageSize);
  } else {
    Kernel kernel;
    kernel(params, smem);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    // This CTA's stores are complete (the epilogue waited for them) and
    // nothing of it reads the partial sums any more.
    waits::endCta(args.calls, call);
  }
}

// The shape of one batch (its pointers are the arrays').
sm90::Problem problemOf(const PulledReduceScatterArgs& args) {
  return {nullptr, nullptr, nullptr, args.rows, args.n, args.k, args.device};
}

PulledTable tableOf(const PulledReduceScatterArgs& args, int cluster_rows) {
  PulledTable t{};
  for (int32_t p = 0; p < args.members; ++p) {
    t.counts[p] = args.counts[p];
  }
  for (int32_t b = 0; b < args.blocks; ++b) {
    t.ready_counts[b] = args.sums ? uint32_t(pullCtasOf(args, cluster_rows))
                                  : args.pulls.block_tiles[b];
  }
  return t;
}

PulledSteps stepsOf(
    const PulledReduceScatterArgs& args, const PulledTable* table) {
  PulledSteps s;
  s.table = table;
  if (args.sums) {
    s.ready = args.pulls.summed;
  } else {
    // The one peer's count of its partial sums of this member's rows.
    const int32_t peer = 1 - args.me;
    s.ready = args.pulls.source_counts[peer];
    s.late = peer + 1;
  }
  s.rows = args.rows;
  s.block_rows = args.blockRows();
  s.members = args.members;
  s.me = args.me;
  s.blocks = args.blocks;
  s.calls = args.calls;
  s.status = args.status;
  s.timeout_ns = args.timeout_ns;
  return s;
}

// Batch l: member me + 1 + l's rows, to where their partial sums go with
// zeros added, or, the last, this member's own into `out`, adding the
// peers' sum (or the one peer's partial sums, where nothing sums them).
BatchPointers batchPointersOf(
    const PulledReduceScatterArgs& args,
    const void* in,
    const void* weight,
    void* out) {
  constexpr int64_t kElement = 2; // BFloat16 and Half
  BatchPointers p{};
  p.b = weight;
  p.batches = args.members;
  for (int32_t l = 0; l < args.members; ++l) {
    const int64_t member = (args.me + 1 + l) % args.members;
    const int64_t row = member * args.rows;
    p.a[l] = static_cast<const char*>(in) + row * args.k * kElement;
    const bool own = l + 1 == args.members;
    for (int half = 0; half < 2; ++half) {
      p.d[half][l] = own ? out : args.sends[half][member];
      const int32_t peer = (args.me + 1) % args.members;
      p.c[half][l] = !own        ? args.zeros
                     : args.sums ? args.pulls.received
                                 : args.pulls.sources[half][peer];
    }
  }
  return p;
}

template <class Gemm>
typename Gemm::Pointers pointersIn(void* workspace) {
  using E =
      std::remove_pointer_t<std::remove_pointer_t<decltype(Gemm::Pointers::d)>>;
  char* base = static_cast<char*>(workspace);
  typename Gemm::Pointers p;
  p.a = reinterpret_cast<const E**>(base);
  p.b = reinterpret_cast<const E**>(base + kPointerArrayBytes);
  p.c = reinterpret_cast<const E**>(base + 2 * kPointerArrayBytes);
  p.d = reinterpret_cast<E**>(base + 3 * kPointerArrayBytes);
  return p;
}

// Calls fn with the GEMM of the problem's dtype and tiles (an empty object
// of its type) and the element type the pulls add.
template <class Fn>
auto withPulledGemm(const PulledReduceScatterArgs& args, Fn&& fn) {
  sm90::Problem all = problemOf(args);
  all.m = args.rows * args.members;
  const bool large = sm90::largeTiles(all);
  if (args.dtype == GemmDtype::kBFloat16) {
    return large
               ? fn(PulledGemm<cutlass::bfloat16_t, true>{}, __nv_bfloat16{})
               : fn(PulledGemm<cutlass::bfloat16_t, false>{}, __nv_bfloat16{});
  }
  return large ? fn(PulledGemm<cutlass::half_t, true>{}, __half{})
               : fn(PulledGemm<cutlass::half_t, false>{}, __half{});
}

} // namespace

std::string pulledReduceScatterRefusal(const PulledReduceScatterArgs& args) {
  if (std::string refusal = teamAndBlocksRefusal(
          args.members,
          args.me,
          args.rows,
          args.blocks,
          kPulledMaxMembers,
          kPulledMaxBlocks);
      !refusal.empty()) {
    return refusal;
  }
  if (std::string refusal = sm90::problemRefusal(problemOf(args));
      !refusal.empty()) {
    return refusal;
  }
  if (args.rows * args.members > INT32_MAX) {
    return "the kernel indexes extents with 32 bits";
  }
  if (args.pulls.ctas < 0 || args.pulls.ctas > 32) {
    return "0 to 32 pulling CTAs";
  }
  if (!args.sums && args.members != 2) {
    return "the epilogue adds the partial sums of one peer, not of " +
           std::to_string(args.members - 1);
  }
  return "";
}

bool pulledReduceScatterFitsOneWave(const PulledReduceScatterArgs& args) {
  sm90::Problem all = problemOf(args);
  all.m = args.rows * args.members;
  return sm90::smallTilesInOneWave(all, 0);
}

void planPulledReduceScatter(PulledReduceScatterArgs& args) {
  withPulledGemm(args, [&](auto gemm, auto) {
    using Gemm = decltype(gemm);
    const std::vector<uint32_t> tiles = tilesOfBlocks(
        args.rows, args.blocks, args.n, Gemm::kTileRows, Gemm::kTileCols);
    for (int32_t b = 0; b < kPulledMaxBlocks; ++b) {
      args.pulls.block_tiles[b] = b < args.blocks ? tiles[b] : 0;
    }
  });
}

size_t pulledReduceScatterWorkspaceBytes(const PulledReduceScatterArgs& args) {
  return withPulledGemm(args, [&](auto gemm, auto) {
    using Gemm = decltype(gemm);
    return kPointerBytes + Gemm::workspaceBytes(Gemm::arguments(
                               problemOf(args),
                               args.members,
                               typename Gemm::Pointers{},
                               stepsOf(args, nullptr)));
  });
}

namespace {

// The launches of one statement, for the GEMM's type `Gemm` and the
// pulls' element type `T`.
template <class Gemm, class T>
class PreparedLaunch final : public FusedLaunch {
  using Kernel = typename Gemm::Kernel;

 public:
  PreparedLaunch(const PulledReduceScatterArgs& args, void* workspace)
      : args_(args), arrays_(static_cast<void**>(workspace)) {}

  cudaError_t prepare(cudaStream_t stream) {
    // Every CTA of the launch must run at once (the GEMM's wait for the
    // pulls, which wait for the peers' GEMMs): as many clusters as the GPU
    // holds, the pulling ones among them.
    if (const cudaError_t error =
            launch_.template prepare<Kernel>(kernel(), Gemm::kClusterRows);
        error != cudaSuccess) {
      return error;
    }
    const int clusters = launch_.clusters;
    const int32_t pull_ctas = pullCtasOf(args_, Gemm::kClusterRows);
    const int pull_rows = pull_ctas / Gemm::kClusterRows;
    if (clusters <= pull_rows) {
      return cudaErrorInvalidConfiguration;
    }
    auto* table = reinterpret_cast<PulledTable*>(
        reinterpret_cast<char*>(arrays_) + kTableOffset);
    // Copied from a member, which lives as long as the launch.
    table_ = tableOf(args_, Gemm::kClusterRows);
    if (const cudaError_t error = cudaMemcpyAsync(
            table, &table_, sizeof(table_), cudaMemcpyHostToDevice, stream);
        error != cudaSuccess) {
      return error;
    }
    const auto arguments = Gemm::arguments(
        problemOf(args_),
        args_.members,
        pointersIn<Gemm>(arrays_),
        stepsOf(args_, table),
        clusters - pull_rows,
        pull_ctas);
    typename Gemm::Adapter adapter;
    if (adapter.can_implement(arguments) != cutlass::Status::kSuccess ||
        adapter.initialize(
            arguments,
            reinterpret_cast<char*>(arrays_) + kPointerBytes,
            stream) != cutlass::Status::kSuccess) {
      return cudaErrorInvalidValue;
    }
    params_ = adapter.params();
    launch_.config.gridDim = Kernel::get_grid_shape(params_);
    launch_.config.gridDim.y += pull_rows;
    args_.pulls.ctas = pull_ctas;
    return cudaSuccess;
  }

  cudaError_t launch(
      const void* in,
      const void* weight,
      void* out,
      cudaStream_t stream) const override {
    return launch_.launch(
        kernel(),
        stream,
        params_,
        args_,
        batchPointersOf(args_, in, weight, out),
        arrays_);
  }

 private:
  static auto kernel() {
    return &pulledGemm<Kernel, T>;
  }

  PulledReduceScatterArgs args_;
  void** arrays_;
  PulledTable table_{};
  typename Kernel::Params params_{};
  sm90::CoResidentLaunch launch_;
};

} // namespace

std::unique_ptr<FusedLaunch> preparePulledReduceScatter(
    const PulledReduceScatterArgs& args,
    void* workspace,
    cudaStream_t stream,
    cudaError_t* error) {
  return withPulledGemm(
      args, [&](auto gemm, auto element) -> std::unique_ptr<FusedLaunch> {
        auto launch =
            std::make_unique<PreparedLaunch<decltype(gemm), decltype(element)>>(
                args, workspace);
        *error = launch->prepare(stream);
        if (*error != cudaSuccess) {
          return nullptr;
        }
        return launch;
      });
}

} // namespace mdfuser::kernels
