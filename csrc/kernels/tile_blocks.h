// SPDX-License-Identifier: MIT
#pragma once

// Which blocks of the members' rows the tiles of a GEMM hold: the
// arithmetic that the GEMM + reduce-scatter kernel (device) and its
// launcher (host) share. Plain C++: no CUDA header, tested on the CPU.

#include <cstdint>
#include <vector>

#if defined(__CUDACC__)
#define MDFUSER_HOST_DEVICE __host__ __device__
#else
#define MDFUSER_HOST_DEVICE
#endif

namespace mdfuser::kernels {

// The members' rows of the product, each member's in `parts` consecutive
// blocks, and where the kernel counts the tiles it has finished of each
// block: block b of member p holds the rows from p · rows_per_member + b ·
// partRows() on, partRows() of them (the last block fewer).
struct TileCounts {
  // counters[p · parts + b] (device memory, one uint32 per block): the
  // kernel adds the tiles of block b of member p's rows once they are in
  // its output and visible to the copy engines. Not this member's own
  // (`me`), which stay here.
  uint32_t* counters = nullptr;
  int64_t rows_per_member = 0;
  int32_t members = 1;
  int32_t me = 0;
  int32_t parts = 1;

  MDFUSER_HOST_DEVICE int64_t partRows() const {
    return (rows_per_member + parts - 1) / parts;
  }
  // Whether every block holds at least one row.
  bool blocksFilled() const {
    return parts >= 1 && parts <= rows_per_member &&
           (parts - 1) * partRows() < rows_per_member;
  }
};

// The blocks whose rows a tile holds, [lo, hi]; lo > hi for a tile past
// the last row.
struct Blocks {
  int32_t lo = 0;
  int32_t hi = -1;
  MDFUSER_HOST_DEVICE bool operator==(const Blocks& o) const {
    return lo == o.lo && hi == o.hi;
  }
};

MDFUSER_HOST_DEVICE inline int32_t blockOfRow(
    int64_t row, const TileCounts& c) {
  const int64_t member = row / c.rows_per_member;
  const int64_t part = (row - member * c.rows_per_member) / c.partRows();
  return static_cast<int32_t>(member * c.parts + part);
}

// The blocks of a tile of `tile_rows` rows from `first_row`.
MDFUSER_HOST_DEVICE inline Blocks blocksOfTile(
    int64_t first_row, int64_t tile_rows, const TileCounts& c) {
  const int64_t rows = c.rows_per_member * c.members;
  if (first_row >= rows) {
    return {};
  }
  const int64_t end =
      first_row + tile_rows < rows ? first_row + tile_rows : rows;
  return {blockOfRow(first_row, c), blockOfRow(end - 1, c)};
}

// What each counter reaches once its block's rows are finished, in a GEMM
// of tiles `tile_rows` × `tile_cols` over `n` columns: the tiles that hold
// any of its rows (0 for `me`'s blocks).
inline std::vector<uint32_t> tileCountsOfBlocks(
    int64_t n, int64_t tile_rows, int64_t tile_cols, const TileCounts& c) {
  std::vector<uint32_t> counts(c.members * c.parts, 0);
  const int64_t tiles_n = (n + tile_cols - 1) / tile_cols;
  const int64_t rows = c.rows_per_member * c.members;
  for (int64_t first = 0; first < rows; first += tile_rows) {
    const Blocks held = blocksOfTile(first, tile_rows, c);
    for (int32_t b = held.lo; b <= held.hi; ++b) {
      if (b / c.parts != c.me) {
        counts[b] += static_cast<uint32_t>(tiles_n);
      }
    }
  }
  return counts;
}

} // namespace mdfuser::kernels
