// SPDX-License-Identifier: MIT
//
// allgather + GEMM in one kernel: CUTLASS's warp-specialized persistent
// GEMM for sm_90a (TMA loads, wgmma, two consumer warpgroups), whose tile
// scheduler visits this member's rows first and makes the producer wait,
// tile by tile, for the rows a tile reads to have arrived from their
// member. The rows travel by copy engine, pushed by their member into this
// member's gathered buffer (runtime/fused_matmul.cpp), beside the tiles
// computed meanwhile.
#include "kernels/allgather_gemm.h"

#include "kernels/sm90_gemm.cuh"

namespace mdfuser::kernels {
namespace {

// Waits until member `member`'s rows have arrived, at most until
// `deadline` (globaltimer ns); false, with the status set, if they did not.
__device__ bool waitForMember(
    const RowArrivals& arrivals, int32_t member, uint64_t deadline) {
  const uint32_t* flag = arrivals.arrived + member;
  while (true) {
    uint32_t value = 0;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];"
                 : "=r"(value)
                 : "l"(flag)
                 : "memory");
    if (value != 0) {
      // The rows were written by a copy engine before the flag; the TMA
      // loads that read them go through the async proxy.
      asm volatile("fence.proxy.async.global;" ::: "memory");
      return true;
    }
    if (sm90::globalTimer() > deadline) {
      *reinterpret_cast<volatile int32_t*>(arrivals.status) = member + 1;
      __threadfence_system();
      return false;
    }
    __nanosleep(64);
  }
}

// The rotated scheduler (sm90::RotatedTileScheduler), with the tiles of
// this member's rows first and the producer warpgroup waiting for the rows
// of each tile it is given.
class ArrivalTileScheduler
    : public sm90::ArrivalWaitingScheduler<RowArrivals, ArrivalTileScheduler> {
  using Base = sm90::ArrivalWaitingScheduler<RowArrivals, ArrivalTileScheduler>;

 public:
  using Base::Base;

  // `tile`; in the producer warpgroup, once the rows it reads are here.
  CUTLASS_DEVICE WorkTileInfo arrived(WorkTileInfo tile) {
    if (!tile.is_valid() || cutlass::canonical_warp_group_idx() != 0 ||
        given_up_) {
      return tile;
    }
    const RowArrivals& a = params_.payload;
    const int64_t rows = a.rows_per_member * a.members;
    const int64_t first_row = int64_t(tile.M_idx) * params_.tile_rows;
    if (first_row >= rows) {
      // A cluster's tile past the last row: nothing to read.
      return tile;
    }
    const int64_t last_row = cute::min(first_row + params_.tile_rows, rows) - 1;
    const uint64_t deadline = sm90::globalTimer() + uint64_t(a.timeout_ns);
    for (int64_t member = first_row / a.rows_per_member;
         member <= last_row / a.rows_per_member;
         ++member) {
      if (member != a.me &&
          !waitForMember(a, static_cast<int32_t>(member), deadline)) {
        // Later tiles of this CTA do not wait again: the host reports the
        // error once the kernel ends.
        given_up_ = true;
        break;
      }
    }
    return tile;
  }

 private:
  bool given_up_ = false;
};

sm90::Problem problemOf(const AllgatherGemmArgs& args) {
  return {
      args.gathered,
      args.weight,
      args.out,
      args.m,
      args.n,
      args.k,
      args.device};
}

// This member's rows first.
int64_t firstRow(const AllgatherGemmArgs& args) {
  return args.arrivals.rows_per_member * args.arrivals.me;
}

} // namespace

std::string allgatherGemmRefusal(const AllgatherGemmArgs& args) {
  if (std::string refusal = sm90::problemRefusal(problemOf(args));
      !refusal.empty()) {
    return refusal;
  }
  if (args.arrivals.members < 1 || args.arrivals.me < 0 ||
      args.arrivals.me >= args.arrivals.members ||
      args.arrivals.rows_per_member * args.arrivals.members != args.m) {
    return "the rows must divide evenly among the members";
  }
  return "";
}

size_t allgatherGemmWorkspaceBytes(const AllgatherGemmArgs& args) {
  return sm90::workspaceBytes<ArrivalTileScheduler>(
      args.dtype, problemOf(args), args.arrivals, firstRow(args));
}

cudaError_t launchAllgatherGemm(
    const AllgatherGemmArgs& args, void* workspace, cudaStream_t stream) {
  return sm90::launch<ArrivalTileScheduler>(
      args.dtype,
      problemOf(args),
      args.arrivals,
      firstRow(args),
      workspace,
      stream);
}

} // namespace mdfuser::kernels
