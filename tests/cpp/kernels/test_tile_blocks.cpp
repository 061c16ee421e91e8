// SPDX-License-Identifier: MIT
//
// The blocks of the members' rows that the GEMM + reduce-scatter kernel
// counts tiles of, against counts made row by row.
#include <gtest/gtest.h>

#include <set>

#include "kernels/tile_blocks.h"

namespace mdfuser::kernels {
namespace {

TileCounts countsOf(int64_t rows, int32_t members, int32_t me, int32_t parts) {
  TileCounts c;
  c.rows_per_member = rows;
  c.members = members;
  c.me = me;
  c.parts = parts;
  return c;
}

struct Case {
  int64_t rows;
  int32_t members;
  int32_t parts;
};

const Case kCases[] = {
    {128, 2, 1},
    {200, 2, 1},
    {8, 2, 1},
    {1300, 2, 2},
    {4104, 2, 8},
    {1300, 4, 2},
    {10, 3, 4},
};

TEST(TileBlocks, BlocksCutEachMembersRowsInOrder) {
  for (const Case& k : kCases) {
    const TileCounts c = countsOf(k.rows, k.members, 0, k.parts);
    ASSERT_TRUE(c.blocksFilled()) << k.rows << " rows in " << k.parts;
    std::set<int32_t> seen;
    int32_t previous = 0;
    for (int64_t row = 0; row < k.rows * k.members; ++row) {
      const int32_t block = blockOfRow(row, c);
      const int64_t member = row / k.rows;
      EXPECT_EQ(block / k.parts, member) << "row " << row;
      EXPECT_GE(block, previous) << "row " << row;
      // Rows of one block are consecutive, partRows() of them at most.
      EXPECT_EQ(block % k.parts, (row - member * k.rows) / c.partRows())
          << "row " << row;
      previous = block;
      seen.insert(block);
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(k.members * k.parts))
        << "every block holds rows";
  }
}

TEST(TileBlocks, CountsAreTheTilesHoldingEachPeerBlock) {
  constexpr int64_t kTileRows = 128;
  constexpr int64_t kTileCols = 128;
  constexpr int64_t kN = 136; // two tiles along N
  for (const Case& k : kCases) {
    for (int32_t me = 0; me < k.members; ++me) {
      const TileCounts c = countsOf(k.rows, k.members, me, k.parts);
      std::vector<uint32_t> expected(k.members * k.parts, 0);
      const int64_t rows = k.rows * k.members;
      for (int64_t first = 0; first < rows; first += kTileRows) {
        std::set<int32_t> held;
        for (int64_t row = first; row < std::min(first + kTileRows, rows);
             ++row) {
          held.insert(blockOfRow(row, c));
        }
        for (int32_t block : held) {
          if (block / k.parts != me) {
            expected[block] += 2;
          }
        }
        const Blocks range = blocksOfTile(first, kTileRows, c);
        EXPECT_EQ(range.lo, *held.begin());
        EXPECT_EQ(range.hi, *held.rbegin());
      }
      EXPECT_EQ(tileCountsOfBlocks(kN, kTileRows, kTileCols, c), expected)
          << k.rows << " rows a member, " << k.members << " members, "
          << k.parts << " blocks, member " << me;
    }
  }
}

TEST(TileBlocks, ATilePastTheRowsHoldsNoBlock) {
  const TileCounts c = countsOf(100, 2, 0, 1);
  const Blocks none = blocksOfTile(256, 128, c);
  EXPECT_GT(none.lo, none.hi);
  // A tile that ends past the rows holds the last block.
  const Blocks last = blocksOfTile(128, 128, c);
  EXPECT_EQ(last.lo, 1);
  EXPECT_EQ(last.hi, 1);
}

TEST(TileBlocks, EveryBlockMustHoldARow) {
  EXPECT_TRUE(countsOf(10, 2, 0, 4).blocksFilled()); // 3, 3, 3, 1
  EXPECT_FALSE(countsOf(9, 2, 0, 6).blocksFilled()); // 2 × 5 rows cover 9
  EXPECT_FALSE(countsOf(4, 2, 0, 5).blocksFilled());
  EXPECT_FALSE(countsOf(4, 2, 0, 0).blocksFilled());
}

} // namespace
} // namespace mdfuser::kernels
