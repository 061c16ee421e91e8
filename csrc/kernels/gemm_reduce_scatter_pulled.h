// SPDX-License-Identifier: MIT
#pragma once

// The GEMM + reduce-scatter kernel whose members pull each other's partial
// sums (Hopper, sm_90a), without torch: pointers, shapes and a stream.
//
// One launch holds two kinds of CTAs. The GEMM's (CUTLASS's ptr-array
// cooperative kernel, one batch a member's rows) compute this member's
// partial sums of every member's rows: the peers' first, each into this
// member's `partials` (symmetric memory), counting each block of rows as
// its tiles are stored; this member's own rows last, straight into `out`,
// adding in their epilogue (as C) the sum of what the peers computed for
// them. The pulling CTAs (a few, beside the GEMM's) make that sum: for each
// block of this member's rows, once every peer's count says the block is
// stored, they read it from the peers' `partials` (mapped) by bulk copies,
// add them up, and store the sum into `received`, counting the block done
// there, which the epilogue of the block's tiles waits for. No copy engine,
// no stream waits, no pass after the kernel: the sends run beside the
// GEMM's tiles and the owner's rows are final when the kernel ends.
//
// Counters only grow: call c of a statement waits for c times a block's
// count, so nothing is cleared between calls. `partials` alternates
// between two halves by call, so that a call never writes what a peer may
// still read from the call before. The call's number is in device memory,
// raised by a small kernel before each launch: nothing of a call is known
// only to the host, so that a CUDA graph can replay the launches, and the
// launch is prepared once for all of a statement's calls
// (preparePulledReduceScatter).

#include <cstdint>
#include <memory>
#include <string>

#include <cuda_runtime_api.h>

#include "kernels/gemm_dtype.h"
#include "kernels/tile_blocks.h"

namespace mdfuser::kernels {

// At most this many members, and blocks of a member's rows.
constexpr int kPulledMaxMembers = 16;
constexpr int kPulledMaxBlocks = 8;

// What the pulling CTAs read and write.
struct Pulls {
  // Member p's partial sums of this member's rows, [rows, n], in each of
  // its two halves of `partials` (mapped here); unused at `me`.
  const void* sources[2][kPulledMaxMembers] = {};
  // Member p's counters of this member's blocks (mapped here): block b's
  // at [b].
  const uint64_t* source_counts[kPulledMaxMembers] = {};
  // The sum of the peers' partial sums of this member's rows, [rows, n].
  void* received = nullptr;
  // Per block of this member's rows: the pulling CTAs that have stored
  // their share of it (this member's memory), and the count each peer's
  // counter reaches in a call.
  uint64_t* summed = nullptr;
  uint32_t block_tiles[kPulledMaxBlocks] = {};
  // How many CTAs pull, the first of the launch: as many as asked for (0:
  // eight a peer, at most sixteen), in whole clusters of the GEMM's.
  int32_t ctas = 0;
};

// What stays from call to call of one statement: the shapes, buffers and
// counters. Each call names its operands (PulledReduceScatterLaunch).
struct PulledReduceScatterArgs {
  GemmDtype dtype = GemmDtype::kBFloat16;
  // This member's partial sums of every member's rows, [members · rows, n]
  // (its own rows' part unused), in two halves, call c writing half c % 2;
  // symmetric memory.
  void* partials[2] = {};
  // Zeros, [rows, n]: what the peers' rows add in their epilogue.
  const void* zeros = nullptr;
  // This member's counters, one per (member, block) at member · blocks +
  // block; symmetric memory, zero before the first call.
  uint64_t* counters = nullptr;
  Pulls pulls;
  int64_t rows = 0;
  int64_t n = 0;
  int64_t k = 0;
  int32_t members = 1;
  int32_t me = 0;
  // Blocks of rows per member (at most kPulledMaxBlocks), each of
  // blockRows() rows, the last fewer.
  int32_t blocks = 1;
  // The statement's calls so far, this one included once it runs (device
  // memory, zero before the first call): each launch raises it before the
  // kernel.
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

// The count each peer's counter of a block reaches in one call, into
// args.pulls.block_tiles.
void planPulledReduceScatter(PulledReduceScatterArgs& args);

// The launches of one statement, prepared once: CUTLASS's parameters, the
// grid (as many clusters as the GPU holds at once), the kernel's
// attributes. What is left for a call is two launches.
class PulledReduceScatterLaunch {
 public:
  virtual ~PulledReduceScatterLaunch() = default;

  // Posts the next call on `stream`: a one-block kernel that raises the
  // calls' count and writes the GEMM's pointers, then the kernel.
  // in[members · rows, k] (member p's rows from p · rows on), weight[n, k],
  // out[rows, n], all row-major.
  virtual cudaError_t launch(
      const void* in,
      const void* weight,
      void* out,
      cudaStream_t stream) const = 0;
};

// Prepares the launches of `args` (planned by planPulledReduceScatter),
// with `workspace`, pulledReduceScatterWorkspaceBytes(args) bytes of
// device memory that stays as long as the launches. Null, with *error
// set, where they cannot run: cudaErrorInvalidConfiguration where the GPU
// cannot hold the pulling CTAs and a cluster of the GEMM's at once.
size_t pulledReduceScatterWorkspaceBytes(const PulledReduceScatterArgs& args);
std::unique_ptr<PulledReduceScatterLaunch> preparePulledReduceScatter(
    const PulledReduceScatterArgs& args,
    void* workspace,
    cudaStream_t stream,
    cudaError_t* error);

} // namespace mdfuser::kernels
