// SPDX-License-Identifier: MIT
#pragma once

// The GEMM the fused kernels are built on: CUTLASS's warp-specialized
// persistent GEMM for sm_90a (TMA loads, wgmma, two consumer warpgroups
// sharing each tile, or each on a tile of its own: `Cooperative` and
// `Pingpong` below), with a tile scheduler of the kernel's own that says
// in which order tiles are computed and what happens around each one.
// a[M, K] (row-major) times b[N, K] (row-major, so a K-major B) into
// d[M, N] row-major, fp32 accumulation. Included by one .cu per kernel.

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include <cutlass/cutlass.h>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cute/tensor.hpp>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/group_array_problem_shape.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/gemm/kernel/tile_scheduler.hpp>
#include <cutlass/util/packed_stride.hpp>

#include "kernels/gemm_dtype.h"

namespace mdfuser::kernels::sm90 {

using namespace cute;

// The kernel's problem, in the scheduler's terms.
struct Problem {
  const void* a = nullptr;
  const void* b = nullptr;
  void* d = nullptr;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  int device = 0;
};

// Why the kernels cannot compute `p` (an empty product, K or N not a
// multiple of 8 elements for TMA, extents past 32 bits), or empty.
inline std::string problemRefusal(const Problem& p) {
  if (p.m <= 0 || p.n <= 0 || p.k <= 0) {
    return "the kernel computes no empty product (M, N and K must be > 0)";
  }
  if (p.k % 8 != 0 || p.n % 8 != 0) {
    return "the kernel's TMA loads and stores need K and N to be multiples "
           "of 8 elements";
  }
  if (p.m > INT32_MAX || p.n > INT32_MAX || p.k > INT32_MAX) {
    return "the kernel indexes extents with 32 bits";
  }
  return "";
}

// CUTLASS's persistent tile scheduler with the tiles' rows rotated: the
// tile holding row `first_row` (rounded down to a cluster's first) comes
// first, the others after it in order, wrapping around. `Payload` is what
// a kernel's own scheduler, derived from this one, adds to the arguments
// (its waits or its counts); it gives each tile through current().
template <class P>
class RotatedTileScheduler
    : public cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90 {
  using Base = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90;

 public:
  using Payload = P;

  // The GEMM's CTAs may be a range of the grid's, [first_cta, first_cta +
  // ctas) in the order CUTLASS numbers them (other CTAs of the launch do
  // other work); ctas = 0: the whole grid.
  struct Arguments : Base::Arguments {
    Payload payload;
    int32_t tile_rows = 0;
    int64_t first_row = 0;
    int32_t first_cta = 0;
    int32_t ctas = 0;
  };
  struct Params : Base::Params {
    Payload payload;
    int32_t tile_rows = 0;
    // Tiles along M (a whole number of clusters), and how far they are
    // rotated.
    int32_t tiles_m = 0;
    int32_t rotation = 0;
    int32_t first_cta = 0;
    int32_t ctas = 0;
  };

  template <class ProblemShapeMNKL, class TileShape, class ClusterShape>
  static Params to_underlying_arguments(
      ProblemShapeMNKL problem_shape_mnkl,
      TileShape tile_shape,
      ClusterShape cluster_shape,
      cutlass::KernelHardwareInfo const& hw_info,
      Arguments const& arguments,
      void* workspace = nullptr,
      const uint32_t epilogue_subtile = 1,
      uint32_t ktile_start_alignment_count = 1u) {
    Params params;
    typename Base::Params& base = params;
    base = Base::to_underlying_arguments(
        problem_shape_mnkl,
        tile_shape,
        cluster_shape,
        hw_info,
        arguments,
        workspace,
        epilogue_subtile,
        ktile_start_alignment_count);
    params.payload = arguments.payload;
    params.tile_rows = arguments.tile_rows;
    const auto cluster_m = static_cast<int32_t>(cute::size<0>(cluster_shape));
    params.tiles_m = static_cast<int32_t>(params.problem_tiles_m_) * cluster_m;
    const auto first_tile =
        static_cast<int32_t>(arguments.first_row / arguments.tile_rows);
    params.rotation = first_tile / cluster_m * cluster_m;
    params.first_cta = arguments.first_cta;
    params.ctas = arguments.ctas;
    return params;
  }

  CUTLASS_HOST_DEVICE RotatedTileScheduler() {}

  // The base's walk over the tiles (a linear index from the CTA's, a
  // stride of the grid's size), over this scheduler's range of CTAs.
  CUTLASS_DEVICE explicit RotatedTileScheduler(Params const& params)
      : Base(params), params_(params) {
    const uint64_t cta =
        params.raster_order_ == RasterOrder::AlongN
            ? uint64_t(blockIdx.x) + uint64_t(blockIdx.y) * uint64_t(gridDim.x)
            : uint64_t(blockIdx.x) * uint64_t(gridDim.y) + uint64_t(blockIdx.y);
    linear_ = cta - uint64_t(params.first_cta);
    stride_ = params.ctas > 0 ? uint64_t(params.ctas)
                              : uint64_t(gridDim.x) * uint64_t(gridDim.y) *
                                    uint64_t(gridDim.z);
  }

  // The tile this CTA computes now, its rows rotated. It hides the base's:
  // the ping-pong kernel asks for it directly.
  CUTLASS_DEVICE WorkTileInfo get_current_work() const {
    WorkTileInfo tile = Base::get_current_work_for_linear_idx(linear_);
    if (tile.is_valid()) {
      tile.M_idx = (tile.M_idx + params_.rotation) % params_.tiles_m;
    }
    return tile;
  }

  CUTLASS_DEVICE void advance_to_next_work(uint32_t advance_count = 1) {
    linear_ += stride_ * uint64_t(advance_count);
  }

  CUTLASS_DEVICE bool is_last_tile(
      WorkTileInfo&, uint32_t advance_count = 1) const {
    return !Base::get_current_work_for_linear_idx(
                linear_ + stride_ * uint64_t(advance_count))
                .is_valid();
  }

 protected:
  CUTLASS_DEVICE WorkTileInfo current() const {
    return get_current_work();
  }

  Params params_;

 private:
  uint64_t linear_ = 0;
  uint64_t stride_ = 1;
};

// The rotated scheduler whose producer warpgroup waits, before each tile it
// is given, until the rows the tile reads are here: `Derived` (the
// allgather kernels' schedulers) says so in `arrived(tile)`, which returns
// the tile once they are (or once it gave up waiting).
template <class P, class Derived>
class ArrivalWaitingScheduler : public RotatedTileScheduler<P> {
  using Base = RotatedTileScheduler<P>;

 public:
  using Base::Base;
  using typename Base::WorkTileInfo;

  template <class ClusterShape>
  CUTLASS_DEVICE WorkTileInfo initial_work_tile_info(ClusterShape) {
    return self().arrived(this->current());
  }

  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo) {
    this->advance_to_next_work();
    return cute::make_tuple(self().arrived(this->current()), true);
  }

  template <class Pipeline, class PipelineState>
  CUTLASS_DEVICE auto fetch_next_work(
      WorkTileInfo work_tile_info, Pipeline&, PipelineState) {
    return fetch_next_work(work_tile_info);
  }

 private:
  CUTLASS_DEVICE Derived& self() {
    return static_cast<Derived&>(*this);
  }
};

// The tag that has CUTLASS's kernel take `Scheduler` (a RotatedTileScheduler)
// as its tile scheduler.
template <class Scheduler>
struct Use {};

} // namespace mdfuser::kernels::sm90

namespace cutlass::gemm::kernel::detail {
template <class S, class TileShape, class ClusterShape, uint32_t Stages>
struct TileSchedulerSelector<
    mdfuser::kernels::sm90::Use<S>,
    arch::Sm90,
    TileShape,
    ClusterShape,
    Stages> {
  using Scheduler = S;
};
} // namespace cutlass::gemm::kernel::detail

namespace mdfuser::kernels::sm90 {

// The GPU the kernel runs on, for CUTLASS: its SMs, and at most
// `max_clusters` clusters at once (0: as many as CUTLASS reckons fit).
inline cutlass::KernelHardwareInfo hardwareOf(
    int device, int max_clusters = 0) {
  cutlass::KernelHardwareInfo hw_info;
  hw_info.device_id = device;
  hw_info.sm_count =
      cutlass::KernelHardwareInfo::query_device_multiprocessor_count(device);
  hw_info.max_active_clusters = max_clusters;
  return hw_info;
}

// How the two consumer warpgroups share the tiles. Cooperative: both work on
// each tile, half of its rows each, and write it out together. Ping-pong:
// each works on a tile of its own, the two taking turns on the tensor
// cores, so that one's epilogue runs beside the other's mainloop (a tile
// of 64 or 128 rows a warpgroup).
struct Cooperative {
  using Kernel = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using Epilogue = cutlass::epilogue::TmaWarpSpecializedCooperative;
};
struct Pingpong {
  using Kernel = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
  using Epilogue = cutlass::epilogue::TmaWarpSpecialized;
};

// The GEMM whose tile scheduler is `Scheduler`, a RotatedTileScheduler
// (complete where this is instantiated). Large problems take 128 × 256 tiles in
// clusters of two along M (which share each B tile by multicast), problems of
// fewer tiles than SMs 128 × 128 tiles alone, which keep more SMs busy.
template <
    class Element,
    class TileShape,
    class ClusterShape,
    class Scheduler,
    class Schedule = Cooperative>
struct Gemm {
  using LayoutA = cutlass::layout::RowMajor;
  using LayoutB = cutlass::layout::ColumnMajor;
  using LayoutD = cutlass::layout::RowMajor;
  static constexpr int kAlignment = 16 / sizeof(Element);
  static constexpr int kTileRows = size<0>(TileShape{});
  static constexpr int kTileCols = size<1>(TileShape{});
  static constexpr int kClusterRows = size<0>(ClusterShape{});

  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90,
      cutlass::arch::OpClassTensorOp,
      TileShape,
      ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto,
      float,
      float,
      void,
      LayoutD,
      kAlignment,
      Element,
      LayoutD,
      kAlignment,
      typename Schedule::Epilogue>::CollectiveOp;

  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90,
      cutlass::arch::OpClassTensorOp,
      Element,
      LayoutA,
      kAlignment,
      Element,
      LayoutB,
      kAlignment,
      float,
      TileShape,
      ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      typename Schedule::Kernel>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<
      Shape<int, int, int, int>,
      Mainloop,
      Epilogue,
      Use<Scheduler>>;
  static_assert(
      std::is_same_v<typename Kernel::TileScheduler, Scheduler>,
      "CUTLASS's kernel must take the scheduler that Use names");
  using Adapter = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  // The arguments of `problem`, whose tiles the scheduler visits from the
  // one holding `first_row` on, with `payload`; on at most `max_clusters`
  // clusters (0: as many as the GPU holds) starting at CTA `first_cta` of
  // the launch, where other CTAs of the launch do other work.
  static typename Adapter::Arguments arguments(
      const Problem& problem,
      const typename Scheduler::Payload& payload,
      int64_t first_row,
      int max_clusters = 0,
      int first_cta = 0) {
    const int m = static_cast<int>(problem.m);
    const int n = static_cast<int>(problem.n);
    const int k = static_cast<int>(problem.k);
    using StrideA = typename Kernel::StrideA;
    using StrideB = typename Kernel::StrideB;
    using StrideD = typename Kernel::StrideD;
    typename Adapter::Arguments arguments{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {m, n, k, 1},
        {static_cast<const Element*>(problem.a),
         cutlass::make_cute_packed_stride(StrideA{}, {m, k, 1}),
         static_cast<const Element*>(problem.b),
         cutlass::make_cute_packed_stride(StrideB{}, {n, k, 1})},
        {{1.0f, 0.0f},
         nullptr,
         cutlass::make_cute_packed_stride(StrideD{}, {m, n, 1}),
         static_cast<Element*>(problem.d),
         cutlass::make_cute_packed_stride(StrideD{}, {m, n, 1})},
        hardwareOf(problem.device, max_clusters)};
    if (max_clusters > 0) {
      // CUTLASS sizes the grid of clusters of one CTA by the SMs alone.
      arguments.hw_info.sm_count = std::min(
          arguments.hw_info.sm_count,
          max_clusters * static_cast<int>(size(ClusterShape{})));
    }
    auto& scheduler = arguments.scheduler;
    // Along N: a CTA's consecutive tiles share rows, which arrive (or are
    // finished and sent) member by member.
    scheduler.raster_order = Scheduler::RasterOrderOptions::AlongN;
    scheduler.max_swizzle_size = 1;
    scheduler.payload = payload;
    scheduler.tile_rows = kTileRows;
    scheduler.first_row = first_row;
    if (max_clusters > 0 || first_cta > 0) {
      // The scheduler walks the CTAs CUTLASS would launch.
      scheduler.first_cta = first_cta;
      const dim3 grid = Adapter::get_grid_shape(arguments);
      scheduler.ctas = static_cast<int32_t>(grid.x * grid.y * grid.z);
    }
    return arguments;
  }

  static size_t workspaceBytes(const typename Adapter::Arguments& arguments) {
    return Adapter::get_workspace_size(arguments);
  }

  static cudaError_t run(
      const typename Adapter::Arguments& arguments,
      void* workspace,
      cudaStream_t stream) {
    Adapter gemm;
    if (gemm.can_implement(arguments) != cutlass::Status::kSuccess) {
      return cudaErrorInvalidValue;
    }
    if (gemm.initialize(arguments, workspace, stream) !=
        cutlass::Status::kSuccess) {
      return cudaErrorInvalidValue;
    }
    if (gemm.run(stream) != cutlass::Status::kSuccess) {
      const cudaError_t error = cudaGetLastError();
      return error == cudaSuccess ? cudaErrorLaunchFailure : error;
    }
    return cudaSuccess;
  }
};

// The same GEMM over `batches` problems of one shape, each with its own
// A, C and D (CUTLASS's ptr-array kernel, which updates its TMA descriptors
// in the kernel when a tile of another batch comes): D_l = A_l · B^T + C_l.
// The pointers live in device memory; each batch's rows, columns and depth
// are the problem's m, n and k. Its tiles come batch after batch.
template <class Element, class TileShape, class ClusterShape, class Scheduler>
struct ArrayGemm {
  using Layout = cutlass::layout::RowMajor;
  using LayoutB = cutlass::layout::ColumnMajor;
  static constexpr int kAlignment = 16 / sizeof(Element);
  static constexpr int kTileRows = size<0>(TileShape{});
  static constexpr int kTileCols = size<1>(TileShape{});
  static constexpr int kClusterRows = size<0>(ClusterShape{});

  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90,
      cutlass::arch::OpClassTensorOp,
      TileShape,
      ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto,
      float,
      float,
      Element,
      Layout,
      kAlignment,
      Element,
      Layout,
      kAlignment,
      cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>::CollectiveOp;

  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90,
      cutlass::arch::OpClassTensorOp,
      Element,
      Layout,
      kAlignment,
      Element,
      LayoutB,
      kAlignment,
      float,
      TileShape,
      ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative>::CollectiveOp;

  // CUTLASS's ptr-array kernel takes no scheduler but its default (void):
  // the one file that instantiates this makes `Scheduler` the default for
  // its tile and cluster shapes (a TileSchedulerSelector of void for sm_90,
  // 8 stages and no problem shape), which this checks.
  using Kernel = cutlass::gemm::kernel::GemmUniversal<
      cutlass::gemm::ArrayProblemShape<Shape<int, int, int, int>>,
      Mainloop,
      Epilogue,
      void>;
  static_assert(
      std::is_same_v<typename Kernel::TileScheduler, Scheduler>,
      "CUTLASS's ptr-array kernel must take Scheduler as its default");
  using Adapter = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  // The pointer arrays: `batches` of each, in device memory.
  struct Pointers {
    const Element** a = nullptr;
    const Element** b = nullptr;
    const Element** c = nullptr;
    Element** d = nullptr;
  };

  // The arguments of `batches` problems of `problem`'s shape (its pointers
  // unused: `pointers` holds them), with `payload`, on at most
  // `max_clusters` clusters (0: as many as the GPU holds) starting at CTA
  // `first_cta` of the launch.
  static typename Adapter::Arguments arguments(
      const Problem& problem,
      int batches,
      const Pointers& pointers,
      const typename Scheduler::Payload& payload,
      int max_clusters = 0,
      int first_cta = 0) {
    const int m = static_cast<int>(problem.m);
    const int n = static_cast<int>(problem.n);
    const int k = static_cast<int>(problem.k);
    using StrideA = typename Kernel::StrideA;
    using StrideB = typename Kernel::StrideB;
    using StrideC = typename Kernel::StrideC;
    using StrideD = typename Kernel::StrideD;
    typename Adapter::Arguments arguments{
        cutlass::gemm::GemmUniversalMode::kArray,
        {{m, n, k, batches}},
        {pointers.a,
         cutlass::make_cute_packed_stride(StrideA{}, {m, k, 1}),
         pointers.b,
         cutlass::make_cute_packed_stride(StrideB{}, {n, k, 1})},
        {{1.0f, 1.0f},
         pointers.c,
         cutlass::make_cute_packed_stride(StrideC{}, {m, n, 1}),
         pointers.d,
         cutlass::make_cute_packed_stride(StrideD{}, {m, n, 1})},
        hardwareOf(problem.device, max_clusters)};
    if (max_clusters > 0) {
      // CUTLASS sizes the grid of clusters of one CTA by the SMs alone.
      arguments.hw_info.sm_count = std::min(
          arguments.hw_info.sm_count,
          max_clusters * static_cast<int>(size(ClusterShape{})));
    }
    auto& scheduler = arguments.scheduler;
    // Along N: a CTA's consecutive tiles share rows, so that it crosses
    // from one block of rows to the next as few times as it can.
    scheduler.raster_order = Scheduler::RasterOrderOptions::AlongN;
    scheduler.max_swizzle_size = 1;
    scheduler.payload = payload;
    scheduler.tile_rows = kTileRows;
    scheduler.first_row = 0;
    scheduler.first_cta = first_cta;
    // The scheduler walks the CTAs CUTLASS would launch.
    const dim3 grid = Adapter::get_grid_shape(arguments);
    scheduler.ctas = static_cast<int32_t>(grid.x * grid.y * grid.z);
    return arguments;
  }

  static size_t workspaceBytes(const typename Adapter::Arguments& arguments) {
    return Adapter::get_workspace_size(arguments);
  }
};

using SmallTiles = Shape<_128, _128, _64>;
using LargeTiles = Shape<_128, _256, _64>;
using Alone = Shape<_1, _1, _1>;
using PairsAlongM = Shape<_2, _1, _1>;

// Whether the problem fills the GPU with 128 × 256 tiles.
inline bool largeTiles(const Problem& problem) {
  const int sms =
      cutlass::KernelHardwareInfo::query_device_multiprocessor_count(
          problem.device);
  return ((problem.m + 127) / 128) * ((problem.n + 255) / 256) >= sms;
}

// Whether the problem takes 128 × 128 tiles (not largeTiles) and they run
// in one wave, one an SM, beside `other_ctas` CTAs of the same launch.
inline bool smallTilesInOneWave(const Problem& problem, int64_t other_ctas) {
  if (largeTiles(problem)) {
    return false;
  }
  const int sms =
      cutlass::KernelHardwareInfo::query_device_multiprocessor_count(
          problem.device);
  const int64_t tiles = ((problem.m + 127) / 128) * ((problem.n + 127) / 128);
  return tiles + other_ctas <= sms;
}

// Calls fn with the GEMM of the problem's dtype and tile shape (an empty
// object of its type).
template <class Scheduler, class Fn>
auto withGemm(GemmDtype dtype, const Problem& problem, Fn&& fn) {
  const bool large = largeTiles(problem);
  if (dtype == GemmDtype::kBFloat16) {
    using E = cutlass::bfloat16_t;
    return large ? fn(Gemm<E, LargeTiles, PairsAlongM, Scheduler>{})
                 : fn(Gemm<E, SmallTiles, Alone, Scheduler>{});
  }
  using E = cutlass::half_t;
  return large ? fn(Gemm<E, LargeTiles, PairsAlongM, Scheduler>{})
               : fn(Gemm<E, SmallTiles, Alone, Scheduler>{});
}

// The workspace the GEMM of `Scheduler` takes for `problem`, and its
// launch on `stream` (arguments as Gemm::arguments).
template <class Scheduler>
size_t workspaceBytes(
    GemmDtype dtype,
    const Problem& problem,
    const typename Scheduler::Payload& payload,
    int64_t first_row) {
  return withGemm<Scheduler>(dtype, problem, [&](auto gemm) {
    using G = decltype(gemm);
    return G::workspaceBytes(G::arguments(problem, payload, first_row));
  });
}

template <class Scheduler>
cudaError_t launch(
    GemmDtype dtype,
    const Problem& problem,
    const typename Scheduler::Payload& payload,
    int64_t first_row,
    void* workspace,
    cudaStream_t stream) {
  return withGemm<Scheduler>(dtype, problem, [&](auto gemm) {
    using G = decltype(gemm);
    return G::run(G::arguments(problem, payload, first_row), workspace, stream);
  });
}

// The launch of a kernel of `Kernel`'s block and shared memory in clusters
// of `cluster_rows` CTAs along the grid's x, whose CTAs must all run at
// once (they wait for each other): `clusters` is as many clusters as the
// GPU holds of it, which the grid must not exceed. Prepared once;
// `config.attrs` points at `cluster`, so a copy must point its own copy
// there before launching.
struct CoResidentLaunch {
  cudaLaunchConfig_t config{};
  cudaLaunchAttribute cluster{};
  int clusters = 0;

  template <class Kernel, class Fn>
  cudaError_t prepare(Fn* kernel, int cluster_rows) {
    const int smem = Kernel::SharedStorageSize;
    if (const cudaError_t error = cudaFuncSetAttribute(
            kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        error != cudaSuccess) {
      return error;
    }
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = cluster_rows;
    cluster.val.clusterDim.y = 1;
    cluster.val.clusterDim.z = 1;
    config.gridDim = dim3(cluster_rows, 1, 1);
    config.blockDim = Kernel::get_block_shape();
    config.dynamicSmemBytes = smem;
    config.numAttrs = 1;
    config.attrs = &cluster;
    return cudaOccupancyMaxActiveClusters(
        &clusters, reinterpret_cast<const void*>(kernel), &config);
  }

  // Launches `kernel` with `args` on `stream`.
  template <class Fn, class... Args>
  cudaError_t launch(Fn* kernel, cudaStream_t stream, Args&&... args) const {
    cudaLaunchAttribute attribute = cluster;
    cudaLaunchConfig_t c = config;
    c.stream = stream;
    c.attrs = &attribute;
    return cudaLaunchKernelEx(&c, kernel, std::forward<Args>(args)...);
  }
};

// The global timer, in nanoseconds.
__device__ inline uint64_t globalTimer() {
  uint64_t now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}

} // namespace mdfuser::kernels::sm90
