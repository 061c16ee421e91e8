// SPDX-License-Identifier: MIT
#pragma once

// The allgather + GEMM kernel whose own CTAs push the rows (Hopper,
// sm_90a), without torch: pointers, shapes and a stream.
//
// One launch holds two kinds of CTAs. The pushing CTAs (a few, the
// launch's first) copy this member's rows, block by block, into every
// member's gathered buffer (symmetric memory, mapped here; this member's
// own too) at this member's place, and count each block there once their
// stores are visible to the system. The GEMM's CTAs (CUTLASS's
// warp-specialized GEMM, this member's rows first) compute
// out = gathered · weight^T, the producer waiting, tile by tile, until the
// blocks the tile reads are counted. No copy engine, no stream memory
// operation, nothing before or after the kernel: one launch a call, which
// a CUDA graph replays. It is for GEMMs short enough that their tiles
// leave SMs free beside the pushing CTAs, where the copy engines'
// handshakes (kernels/allgather_gemm.h) cost more than the GEMM.
//
// Counters only grow: call c waits for c times the pushing CTAs' count of a
// block. A member pushes into a peer's gathered buffer only once the peer
// has finished its previous call (its kernel no longer reads the buffer):
// the last CTA of each call to end raises the member's count of finished
// calls, which the peers' pushing CTAs wait for. The call's number is
// that count plus one, read on the GPU: nothing of a call is known only to
// the host.

#include <cstdint>
#include <memory>
#include <string>

#include <cuda_runtime_api.h>

#include "kernels/fused_launch.h"
#include "kernels/gemm_dtype.h"
#include "kernels/tile_blocks.h"

namespace mdfuser::kernels {

// At most this many members, and blocks of a member's rows.
constexpr int kPushedMaxMembers = 16;
constexpr int kPushedMaxBlocks = 8;

// The words of each member's counters (symmetric memory, 64-bit, zero
// before the first call): the count of its calls (kernels/waits.cuh: the
// calls it has finished, which the peers read, and the CTAs of its calls
// that have ended, only it), then, at kArrivalsWord + p · blocks + b, the
// pushing CTAs of member p that have stored block b of p's rows here.
constexpr int kArrivalsWord = 2;

inline int64_t pushedCounterWords(int32_t members, int32_t blocks) {
  return kArrivalsWord + int64_t(members) * blocks;
}

// What stays from call to call of one statement: shapes, buffers, counters
// and the peers' addresses of theirs. Each call names its operands
// (FusedLaunch).
struct PushedAllgatherArgs {
  GemmDtype dtype = GemmDtype::kBFloat16;
  // This member's gathered buffer, [members · rows, k], member p's rows
  // from p · rows on (symmetric memory).
  const void* gathered = nullptr;
  // Where this member's rows go in each member's gathered buffer (mapped
  // here; [me] in its own), and each member's counters (mapped; [me] its
  // own).
  void* places[kPushedMaxMembers] = {};
  uint64_t* counters[kPushedMaxMembers] = {};
  int64_t rows = 0;
  int64_t n = 0;
  int64_t k = 0;
  int32_t members = 1;
  int32_t me = 0;
  // Blocks of rows per member (at most kPushedMaxBlocks), each of
  // blockRows() rows, the last fewer.
  int32_t blocks = 1;
  // How many CTAs push, the first of the launch: as many as asked for (0:
  // sixteen), in whole clusters of the GEMM's; at least one a block.
  int32_t ctas = 0;
  // Mapped host memory: 0, or 1 + the member the kernel gave up waiting
  // for (its rows, or the end of its previous call); its output is then
  // wrong.
  int32_t* status = nullptr;
  int64_t timeout_ns = 0;
  int device = 0;

  MDFUSER_HOST_DEVICE int64_t blockRows() const {
    return kernels::blockRows(rows, blocks);
  }
};

// Whether the kernel can compute this problem (alignment of K and N to 8
// elements, nonzero extents, 2 to kPushedMaxMembers members, 1 to
// kPushedMaxBlocks blocks each holding rows); the reason if not, empty
// otherwise.
std::string pushedAllgatherRefusal(const PushedAllgatherArgs& args);

// Whether the GEMM of `args`'s shapes runs in one wave of tiles beside
// the pushing CTAs: the shapes the kernel is for (elsewhere its pushing
// CTAs take SMs the GEMM needs, and the copy engines move the rows).
bool pushedAllgatherFitsOneWave(const PushedAllgatherArgs& args);

// Prepares the launch of `args` (as many clusters as the GPU holds at
// once, at most), with `workspace`, pushedAllgatherWorkspaceBytes(args)
// bytes of device memory that stays as long as the launch. Its calls take
// in[rows, k] (this member's rows), weight[n, k], out[members · rows, n].
// Null, with *error set, where it cannot run:
// cudaErrorInvalidConfiguration where the GPU cannot hold the pushing CTAs
// and a cluster of the GEMM's at once.
size_t pushedAllgatherWorkspaceBytes(const PushedAllgatherArgs& args);
std::unique_ptr<FusedLaunch> preparePushedAllgather(
    const PushedAllgatherArgs& args, void* workspace, cudaError_t* error);

} // namespace mdfuser::kernels
