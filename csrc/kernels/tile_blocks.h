// SPDX-License-Identifier: MIT
#pragma once

// Which blocks of a member's rows the tiles of a GEMM hold, and which CTAs
// work on each: the arithmetic that the fused kernels (device: their
// counts and waits per block) and their launchers (host: what each count
// reaches) share. Plain C++: no CUDA header, tested on the CPU.

#include <cstdint>
#include <string>
#include <vector>

#if defined(__CUDACC__)
#define MDFUSER_HOST_DEVICE __host__ __device__
#else
#define MDFUSER_HOST_DEVICE
#endif

namespace mdfuser::kernels {

// The rows of each block when `rows` rows are cut into `blocks` blocks:
// block b holds the rows from b · blockRows on, the last block fewer.
MDFUSER_HOST_DEVICE inline int64_t blockRows(int64_t rows, int32_t blocks) {
  return (rows + blocks - 1) / blocks;
}

// Whether `blocks` blocks of `rows` rows each hold at least one row.
inline bool everyBlockHoldsRows(int64_t rows, int32_t blocks) {
  return blocks >= 1 && blocks <= rows &&
         (blocks - 1) * blockRows(rows, blocks) < rows;
}

// Why a team of `members` (this one `me`), each of `rows` rows cut into
// `blocks` blocks, does not suit a kernel of at most `max_members` members
// and `max_blocks` blocks; empty if it does.
inline std::string teamAndBlocksRefusal(
    int32_t members,
    int32_t me,
    int64_t rows,
    int32_t blocks,
    int32_t max_members,
    int32_t max_blocks) {
  if (members < 2 || members > max_members || me < 0 || me >= members) {
    return "the kernel takes teams of 2 to " + std::to_string(max_members) +
           " members";
  }
  if (blocks > max_blocks || !everyBlockHoldsRows(rows, blocks)) {
    return "each member's rows must fill 1 to " + std::to_string(max_blocks) +
           " blocks";
  }
  return "";
}

// How many of `ctas` CTAs work on block `b` of `blocks` when CTA c works
// on block c % blocks (the pushing CTAs of the allgather + GEMM kernel,
// which push the blocks side by side): what the block's count reaches.
MDFUSER_HOST_DEVICE inline int32_t ctasOfBlock(
    int32_t ctas, int32_t blocks, int32_t b) {
  return (ctas - 1 - b) / blocks + 1;
}

// The blocks whose rows a tile holds, [lo, hi]; lo > hi for a tile past
// the last row.
struct Blocks {
  int32_t lo = 0;
  int32_t hi = -1;
  MDFUSER_HOST_DEVICE bool operator==(const Blocks& o) const {
    return lo == o.lo && hi == o.hi;
  }
};

// The blocks of `block_rows` rows each that a tile of `tile_rows` rows from
// `first_row` holds, among `rows` rows.
MDFUSER_HOST_DEVICE inline Blocks blocksOfTile(
    int64_t first_row, int64_t tile_rows, int64_t rows, int64_t block_rows) {
  if (first_row >= rows) {
    return {};
  }
  const int64_t end =
      first_row + tile_rows < rows ? first_row + tile_rows : rows;
  return {
      static_cast<int32_t>(first_row / block_rows),
      static_cast<int32_t>((end - 1) / block_rows)};
}

// How many tiles, `tile_rows` × `tile_cols` over `n` columns, hold rows of
// each of the `blocks` blocks of `rows` rows: what a block's counter
// reaches once the tiles of its rows are stored.
inline std::vector<uint32_t> tilesOfBlocks(
    int64_t rows,
    int32_t blocks,
    int64_t n,
    int64_t tile_rows,
    int64_t tile_cols) {
  std::vector<uint32_t> counts(blocks, 0);
  const auto tiles_n = static_cast<uint32_t>((n + tile_cols - 1) / tile_cols);
  const int64_t block_rows = blockRows(rows, blocks);
  for (int64_t first = 0; first < rows; first += tile_rows) {
    const Blocks held = blocksOfTile(first, tile_rows, rows, block_rows);
    for (int32_t b = held.lo; b <= held.hi; ++b) {
      counts[b] += tiles_n;
    }
  }
  return counts;
}

} // namespace mdfuser::kernels
