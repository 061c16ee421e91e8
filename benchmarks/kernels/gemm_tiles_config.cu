// SPDX-License-Identifier: MIT
//
// One tile shape of the fused kernels' GEMM, chosen by MDFUSER_TILE_CONFIG
// (CMake compiles this file once per shape, so that the instantiations
// build in parallel).
#include "gemm_tiles.h"

#include "kernels/sm90_gemm.cuh"

namespace mdfuser::bench {
namespace {

using namespace cute;

using kernels::sm90::Cooperative;
using kernels::sm90::Pingpong;

#if MDFUSER_TILE_CONFIG == 0
// The fused kernels' large problems today.
using Tiles = Shape<_128, _256, _64>;
using Cluster = Shape<_2, _1, _1>;
using Schedule = Cooperative;
constexpr const char* kName = "128x256x64 cluster 2x1";
#elif MDFUSER_TILE_CONFIG == 1
// The fused kernels' small problems today.
using Tiles = Shape<_128, _128, _64>;
using Cluster = Shape<_1, _1, _1>;
using Schedule = Cooperative;
constexpr const char* kName = "128x128x64 cluster 1x1";
#elif MDFUSER_TILE_CONFIG == 2
using Tiles = Shape<_256, _128, _64>;
using Cluster = Shape<_2, _1, _1>;
using Schedule = Cooperative;
constexpr const char* kName = "256x128x64 cluster 2x1";
#elif MDFUSER_TILE_CONFIG == 3
using Tiles = Shape<_256, _128, _64>;
using Cluster = Shape<_1, _2, _1>;
using Schedule = Cooperative;
constexpr const char* kName = "256x128x64 cluster 1x2";
#elif MDFUSER_TILE_CONFIG == 4
using Tiles = Shape<_128, _256, _64>;
using Cluster = Shape<_1, _2, _1>;
using Schedule = Cooperative;
constexpr const char* kName = "128x256x64 cluster 1x2";
#elif MDFUSER_TILE_CONFIG == 5
using Tiles = Shape<_256, _128, _64>;
using Cluster = Shape<_1, _1, _1>;
using Schedule = Cooperative;
constexpr const char* kName = "256x128x64 cluster 1x1";
#elif MDFUSER_TILE_CONFIG == 6
// Ping-pong: a tile a consumer warpgroup.
using Tiles = Shape<_64, _256, _64>;
using Cluster = Shape<_2, _1, _1>;
using Schedule = Pingpong;
constexpr const char* kName = "64x256x64 cluster 2x1 pp";
#elif MDFUSER_TILE_CONFIG == 7
using Tiles = Shape<_64, _256, _64>;
using Cluster = Shape<_1, _2, _1>;
using Schedule = Pingpong;
constexpr const char* kName = "64x256x64 cluster 1x2 pp";
#elif MDFUSER_TILE_CONFIG == 8
using Tiles = Shape<_128, _128, _64>;
using Cluster = Shape<_2, _1, _1>;
using Schedule = Pingpong;
constexpr const char* kName = "128x128x64 cluster 2x1 pp";
#elif MDFUSER_TILE_CONFIG == 9
using Tiles = Shape<_128, _128, _64>;
using Cluster = Shape<_1, _2, _1>;
using Schedule = Pingpong;
constexpr const char* kName = "128x128x64 cluster 1x2 pp";
#elif MDFUSER_TILE_CONFIG == 10
// cuBLAS's wide tiles are 192 columns.
using Tiles = Shape<_128, _192, _64>;
using Cluster = Shape<_2, _1, _1>;
using Schedule = Cooperative;
constexpr const char* kName = "128x192x64 cluster 2x1";
#else
#error "MDFUSER_TILE_CONFIG must be 0 .. kGemmVariants - 1"
#endif

struct NoPayload {};

// The rotated scheduler with nothing around the tiles.
class PlainTileScheduler
    : public kernels::sm90::RotatedTileScheduler<NoPayload> {
  using Base = kernels::sm90::RotatedTileScheduler<NoPayload>;

 public:
  using Base::Base;

  template <class ClusterShape>
  CUTLASS_DEVICE WorkTileInfo initial_work_tile_info(ClusterShape) {
    return current();
  }

  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo) {
    advance_to_next_work();
    return cute::make_tuple(current(), true);
  }

  template <class Pipeline, class PipelineState>
  CUTLASS_DEVICE auto fetch_next_work(
      WorkTileInfo tile, Pipeline&, PipelineState) {
    return fetch_next_work(tile);
  }
};

using Gemm = kernels::sm90::
    Gemm<cutlass::bfloat16_t, Tiles, Cluster, PlainTileScheduler, Schedule>;

typename Gemm::Adapter::Arguments argumentsOf(const TileProblem& p) {
  kernels::sm90::Problem problem{p.a, p.b, p.d, p.m, p.n, p.k, p.device};
  auto arguments = Gemm::arguments(problem, NoPayload{}, 0);
  using Raster = PlainTileScheduler::RasterOrderOptions;
  arguments.scheduler.raster_order =
      p.along_n ? Raster::AlongN : Raster::AlongM;
  arguments.scheduler.max_swizzle_size = p.swizzle;
  return arguments;
}

size_t workspaceBytes(const TileProblem& p) {
  return Gemm::workspaceBytes(argumentsOf(p));
}

cudaError_t run(const TileProblem& p, void* workspace, cudaStream_t stream) {
  return Gemm::run(argumentsOf(p), workspace, stream);
}

} // namespace

template <>
GemmVariant gemmVariant<MDFUSER_TILE_CONFIG>() {
  return {kName, &workspaceBytes, &run};
}

} // namespace mdfuser::bench
