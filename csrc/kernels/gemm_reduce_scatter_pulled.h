// SPDX-License-Identifier: MIT
#pragma once

// The GEMM + reduce-scatter kernel whose members sum each other's partial
// sums (Hopper, sm_90a), without torch: pointers, shapes and a stream.
//
// One launch holds two kinds of CTAs. The GEMM's (CUTLASS's ptr-array
// cooperative kernel, one batch a member's rows) compute this member's
// partial sums of every member's rows: the peers' first, each stored to
// where the host placed it (`sends`) and counted block by block as its
// tiles are stored (`counts`); this member's own rows last, straight into
// `out`, adding in their epilogue (as C) the sum of what the peers computed
// for them. The summing CTAs (a few, beside the GEMM's) make that sum: for
// each block of this member's rows, once every peer's count says the block
// is stored, they bring it from where the peers stored it (`Pulls`) by
// bulk copies, add them up, and store the sum into `received`, counting
// the block done there, which the epilogue of the block's tiles waits for.
// No copy engine, no stream waits, no pass after the kernel: the sends run
// beside the GEMM's tiles and the owner's rows are final when the kernel
// ends.
//
// Where the partial sums lie is the host's choice, made by the pointers
// alone: in the memory of the member that computed them,
// the owner reading them over the links, or in the owner's, the epilogue
// storing them over the links and the owner reading its own memory.
//
// Counters only grow: call c of a statement waits for c times a block's
// count, so nothing is cleared between calls. The partial sums alternate
// between two halves by call, so that a call never writes what a member
// may still read from the call before. The kernel counts its calls itself
// (kernels/waits.cuh) and each CTA writes the call's pointer arrays for
// CUTLASS: one launch a call, nothing of a call known only to the host, so
// that a CUDA graph replays it, and the launch is prepared once for all of
// a statement's calls (preparePulledReduceScatter).

#include <cstdint>
#include <memory>
#include <string>

#include <cuda_runtime_api.h>

#include "kernels/fused_launch.h"
#include "kernels/gemm_dtype.h"
#include "kernels/tile_blocks.h"

namespace mdfuser::kernels {

// At most this many members, and blocks of a member's rows.
constexpr int kPulledMaxMembers = 16;
constexpr int kPulledMaxBlocks = 8;

// What the summing CTAs read and write.
struct Pulls {
  // Member p's partial sums of this member's rows, [rows, n], in each of
  // the two halves (this member's memory or p's, mapped here); unused at
  // `me`.
  const void* sources[2][kPulledMaxMembers] = {};
  // Member p's counts of those rows' blocks (this member's memory or p's):
  // block b's at [b].
  const uint64_t* source_counts[kPulledMaxMembers] = {};
  // The sum of the peers' partial sums of this member's rows, [rows, n].
  void* received = nullptr;
  // Per block of this member's rows: the summing CTAs that have stored
  // their share of it (this member's memory), and the count each peer's
  // counter reaches in a call.
  uint64_t* summed = nullptr;
  uint32_t block_tiles[kPulledMaxBlocks] = {};
  // How many CTAs sum, the first of the launch: as many as asked for (0:
  // eight a peer, at most sixteen), in whole clusters of the GEMM's.
  int32_t ctas = 0;
};

// What stays from call to call of one statement: the shapes, buffers and
// counters. Each call names its operands (FusedLaunch).
struct PulledReduceScatterArgs {
  GemmDtype dtype = GemmDtype::kBFloat16;
  // Where this member's partial sums of member p's rows go, [rows, n], in
  // each half (call c writes half c % 2): its own memory or p's (mapped
  // here); unused at `me`, whose rows go to `out`.
  void* sends[2][kPulledMaxMembers] = {};
  // Zeros, [rows, n]: what the peers' rows add in their epilogue.
  const void* zeros = nullptr;
  // Where this member counts the blocks of member p's rows it has stored,
  // block b's at [p][b] (symmetric memory, zero before the first call;
  // this member's or p's, mapped here); unused at `me`.
  uint64_t* counts[kPulledMaxMembers] = {};
  Pulls pulls;
  // Whether summing CTAs add the peers' partial sums up (`pulls`); if not
  // (two members only), the epilogue of this member's rows adds the one
  // peer's partial sums (pulls.sources, which should then lie in this
  // member's memory) once its counts (pulls.source_counts) say they are
  // stored: no summing CTA, no copy.
  bool sums = true;
  int64_t rows = 0;
  int64_t n = 0;
  int64_t k = 0;
  int32_t members = 1;
  int32_t me = 0;
  // Blocks of rows per member (at most kPulledMaxBlocks), each of
  // blockRows() rows, the last fewer.
  int32_t blocks = 1;
  // The count of the statement's calls, two words (kernels/waits.cuh;
  // device memory, zero before the first call).
  uint64_t* calls = nullptr;
  // Mapped host memory: 0, or what the kernel gave up waiting for (see
  // below); its output is then wrong.
  int32_t* status = nullptr;
  int64_t timeout_ns = 0;
  int device = 0;

  MDFUSER_HOST_DEVICE int64_t blockRows() const {
    return kernels::blockRows(rows, blocks);
  }
};

// What `status` holds after a kernel that gave up: 1 + the member whose
// partial sums did not come, or kPullsLate when this member's own pulls
// did not finish (the GEMM's epilogue waited for them).
constexpr int32_t kPullsLate = -1;

// Whether the kernel can compute this problem (alignment of K and N to 8
// elements, nonzero extents, at most kPulledMaxMembers members and
// kPulledMaxBlocks blocks, each holding rows); the reason if not, empty
// otherwise.
std::string pulledReduceScatterRefusal(const PulledReduceScatterArgs& args);

// Whether the GEMM of every member's rows runs in one wave of 128 × 128
// tiles, one an SM, with no summing CTA beside them: the short GEMMs whose
// tiles all end at about the same time, so that nothing of the partial
// sums' way overlaps the GEMM but the way itself.
bool pulledReduceScatterFitsOneWave(const PulledReduceScatterArgs& args);

// The count each peer's counter of a block reaches in one call, into
// args.pulls.block_tiles.
void planPulledReduceScatter(PulledReduceScatterArgs& args);

// Prepares the launch of `args` (planned by planPulledReduceScatter;
// CUTLASS's parameters, as many clusters as the GPU holds at once), with
// `workspace`, pulledReduceScatterWorkspaceBytes(args) bytes of device
// memory that stays as long as the launch. Its calls take in[members ·
// rows, k] (member p's rows from p · rows on), weight[n, k], out[rows, n].
// Null, with *error
// set, where they cannot run: cudaErrorInvalidConfiguration where the GPU
// cannot hold the summing CTAs and a cluster of the GEMM's at once.
size_t pulledReduceScatterWorkspaceBytes(const PulledReduceScatterArgs& args);
std::unique_ptr<FusedLaunch> preparePulledReduceScatter(
    const PulledReduceScatterArgs& args,
    void* workspace,
    cudaStream_t stream,
    cudaError_t* error);

} // namespace mdfuser::kernels
