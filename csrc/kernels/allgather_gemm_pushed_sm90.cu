// SPDX-License-Identifier: MIT
//
// allgather + GEMM in one launch, the rows pushed by the kernel's own CTAs
// (allgather_gemm_pushed.h): the first CTAs push (push_rows.cuh), the
// others run CUTLASS's warp-specialized GEMM for sm_90a with a tile
// scheduler that visits this member's rows first and makes the producer
// wait, tile by tile, until the blocks of rows the tile reads are counted;
// the last CTA of the call to end counts the call finished.
#include "kernels/allgather_gemm_pushed.h"

#include <climits>
#include <memory>

#include "kernels/push_rows.cuh"
#include "kernels/sm90_gemm.cuh"
#include "kernels/waits.cuh"

namespace mdfuser::kernels {
namespace {

// What the GEMM's tile scheduler waits for.
struct PushedArrivals {
  // This member's counters (allgather_gemm_pushed.h).
  const uint64_t* counters = nullptr;
  int64_t rows = 0;
  int64_t block_rows = 0;
  int32_t members = 1;
  int32_t blocks = 1;
  // The pushing CTAs, some of which push each block
  // (ctasOfBlock): what the block's count reaches in one call.
  int32_t push_ctas = 0;
  int32_t* status = nullptr;
  int64_t timeout_ns = 0;
};

// The rotated scheduler (this member's rows first), the producer warpgroup
// waiting, before each tile, until every member has pushed the blocks of
// its rows that the tile reads in this call.
class PushedTileScheduler
    : public sm90::
          ArrivalWaitingScheduler<PushedArrivals, PushedTileScheduler> {
  using Base =
      sm90::ArrivalWaitingScheduler<PushedArrivals, PushedTileScheduler>;

 public:
  CUTLASS_HOST_DEVICE PushedTileScheduler() {}

  CUTLASS_DEVICE explicit PushedTileScheduler(Params const& params)
      : Base(params),
        // The calls finished so far do not change before every CTA of this
        // one has ended.
        call_(waits::callNumber(params.payload.counters)) {}

  // `tile`; in the producer warpgroup, once the rows it reads are here.
  CUTLASS_DEVICE WorkTileInfo arrived(WorkTileInfo tile) {
    if (!tile.is_valid() || cutlass::canonical_warp_group_idx() != 0 ||
        given_up_) {
      return tile;
    }
    const PushedArrivals& a = params_.payload;
    const int64_t all_rows = a.rows * a.members;
    const int64_t first_row = int64_t(tile.M_idx) * params_.tile_rows;
    if (first_row >= all_rows) {
      // A cluster's tile past the last row: nothing to read.
      return tile;
    }
    const int64_t last_row =
        cute::min(first_row + params_.tile_rows, all_rows) - 1;
    const uint64_t deadline = sm90::globalTimer() + uint64_t(a.timeout_ns);
    for (int64_t member = first_row / a.rows; member <= last_row / a.rows;
         ++member) {
      const int64_t lo = cute::max(first_row - member * a.rows, int64_t(0));
      const int64_t hi = cute::min(last_row - member * a.rows, a.rows - 1);
      const uint64_t* arrivals = a.counters + kArrivalsWord + member * a.blocks;
      for (int64_t b = lo / a.block_rows; b <= hi / a.block_rows; ++b) {
        const uint64_t count =
            call_ * uint64_t(ctasOfBlock(a.push_ctas, a.blocks, int32_t(b)));
        if (!waits::waitAtLeast(arrivals + b, count, deadline)) {
          // Later tiles of this CTA do not wait again: the host reports the
          // error once the kernel ends.
          waits::report(a.status, static_cast<int32_t>(member) + 1);
          given_up_ = true;
          return tile;
        }
      }
    }
    // The rows were stored through the generic proxy; the TMA loads that
    // read them go through the async proxy.
    asm volatile("fence.proxy.async.global;" ::: "memory");
    return tile;
  }

 private:
  uint64_t call_ = 0;
  bool given_up_ = false;
};

// The pushing CTAs, then CUTLASS's kernel on the others; the last CTA of
// the call to end counts the call finished.
template <class Kernel>
__global__ void __launch_bounds__(
    Kernel::MaxThreadsPerBlock, Kernel::MinBlocksPerMultiprocessor)
    pushedGemm(
        CUTLASS_GRID_CONSTANT typename Kernel::Params const params,
        CUTLASS_GRID_CONSTANT PushedAllgatherArgs const args,
        const void* in) {
  extern __shared__ char smem[];
  uint64_t* counters = args.counters[args.me];
  const uint64_t call = waits::callNumber(counters);
  const int32_t cta = int32_t(blockIdx.x + blockIdx.y * gridDim.x);
  if (cta < args.ctas) {
    push::pushRows(args, in, cta, call, reinterpret_cast<int32_t*>(smem));
  } else {
    Kernel kernel;
    kernel(params, smem);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    // This CTA's reads of the gathered buffer are complete (its consumers
    // waited for every load).
    waits::endCta(counters, call);
  }
}

sm90::Problem problemOf(
    const PushedAllgatherArgs& args,
    const void* weight = nullptr,
    void* out = nullptr) {
  return {
      args.gathered,
      weight,
      out,
      args.rows * args.members,
      args.n,
      args.k,
      args.device};
}

// The pushing CTAs, whole clusters of `cluster_rows` CTAs: the launch's
// first grid rows. Sixteen where the caller asks for none.
constexpr int32_t kDefaultPushCtas = 16;
int32_t pushCtasOf(const PushedAllgatherArgs& args, int cluster_rows) {
  const int32_t asked = args.ctas > 0 ? args.ctas : kDefaultPushCtas;
  return (asked + cluster_rows - 1) / cluster_rows * cluster_rows;
}

PushedArrivals arrivalsOf(const PushedAllgatherArgs& args, int cluster_rows) {
  PushedArrivals a;
  a.counters = args.counters[args.me];
  a.rows = args.rows;
  a.block_rows = args.blockRows();
  a.members = args.members;
  a.blocks = args.blocks;
  a.push_ctas = pushCtasOf(args, cluster_rows);
  a.status = args.status;
  a.timeout_ns = args.timeout_ns;
  return a;
}

// This member's rows first.
int64_t firstRow(const PushedAllgatherArgs& args) {
  return args.rows * args.me;
}

// The launch of one statement, for the GEMM's type `Gemm`.
template <class Gemm>
class PreparedLaunch final : public FusedLaunch {
  using Kernel = typename Gemm::Kernel;

 public:
  PreparedLaunch(const PushedAllgatherArgs& args, void* workspace)
      : args_(args), workspace_(workspace) {}

  cudaError_t prepare() {
    // Every CTA of the launch must run at once (the GEMM waits for the
    // pushes, which wait for the peers' previous calls): as many clusters
    // as the GPU holds, the pushing ones among them.
    if (const cudaError_t error =
            launch_.template prepare<Kernel>(kernel(), Gemm::kClusterRows);
        error != cudaSuccess) {
      return error;
    }
    const int clusters = launch_.clusters;
    const int32_t push_ctas = pushCtasOf(args_, Gemm::kClusterRows);
    push_rows_ = push_ctas / Gemm::kClusterRows;
    if (clusters <= push_rows_) {
      return cudaErrorInvalidConfiguration;
    }
    gemm_clusters_ = clusters - push_rows_;
    const auto arguments = argumentsOf(nullptr, nullptr);
    typename Gemm::Adapter adapter;
    if (adapter.can_implement(arguments) != cutlass::Status::kSuccess) {
      return cudaErrorInvalidValue;
    }
    launch_.config.gridDim = Gemm::Adapter::get_grid_shape(arguments);
    launch_.config.gridDim.y += push_rows_;
    args_.ctas = push_ctas;
    return cudaSuccess;
  }

  cudaError_t launch(
      const void* in,
      const void* weight,
      void* out,
      cudaStream_t stream) const override {
    // The operands' TMA descriptors are the call's.
    typename Gemm::Adapter adapter;
    if (adapter.initialize(argumentsOf(weight, out), workspace_, stream) !=
        cutlass::Status::kSuccess) {
      return cudaErrorInvalidValue;
    }
    return launch_.launch(kernel(), stream, adapter.params(), args_, in);
  }

 private:
  static auto kernel() {
    return &pushedGemm<Kernel>;
  }

  typename Gemm::Adapter::Arguments argumentsOf(
      const void* weight, void* out) const {
    return Gemm::arguments(
        problemOf(args_, weight, out),
        arrivalsOf(args_, Gemm::kClusterRows),
        firstRow(args_),
        gemm_clusters_,
        pushCtasOf(args_, Gemm::kClusterRows));
  }

  PushedAllgatherArgs args_;
  void* workspace_;
  int32_t push_rows_ = 0;
  int gemm_clusters_ = 0;
  sm90::CoResidentLaunch launch_;
};

} // namespace

std::string pushedAllgatherRefusal(const PushedAllgatherArgs& args) {
  if (std::string refusal = teamAndBlocksRefusal(
          args.members,
          args.me,
          args.rows,
          args.blocks,
          kPushedMaxMembers,
          kPushedMaxBlocks);
      !refusal.empty()) {
    return refusal;
  }
  if (std::string refusal = sm90::problemRefusal(problemOf(args));
      !refusal.empty()) {
    return refusal;
  }
  if (args.ctas < 0 || args.ctas > 32) {
    return "0 to 32 pushing CTAs";
  }
  if (args.blocks > (args.ctas > 0 ? args.ctas : kDefaultPushCtas)) {
    return "each block needs a pushing CTA";
  }
  return "";
}

bool pushedAllgatherFitsOneWave(const PushedAllgatherArgs& args) {
  return sm90::smallTilesInOneWave(problemOf(args), pushCtasOf(args, 1));
}

size_t pushedAllgatherWorkspaceBytes(const PushedAllgatherArgs& args) {
  return sm90::withGemm<PushedTileScheduler>(
      args.dtype, problemOf(args), [&](auto gemm) {
        using Gemm = decltype(gemm);
        return Gemm::workspaceBytes(Gemm::arguments(
            problemOf(args),
            arrivalsOf(args, Gemm::kClusterRows),
            firstRow(args)));
      });
}

std::unique_ptr<FusedLaunch> preparePushedAllgather(
    const PushedAllgatherArgs& args, void* workspace, cudaError_t* error) {
  return sm90::withGemm<PushedTileScheduler>(
      args.dtype,
      problemOf(args),
      [&](auto gemm) -> std::unique_ptr<FusedLaunch> {
        auto launch =
            std::make_unique<PreparedLaunch<decltype(gemm)>>(args, workspace);
        *error = launch->prepare();
        if (*error != cudaSuccess) {
          return nullptr;
        }
        return launch;
      });
}

} // namespace mdfuser::kernels
