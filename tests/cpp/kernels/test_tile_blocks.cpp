// SPDX-License-Identifier: MIT
//
// The blocks of a member's rows that the GEMM + reduce-scatter kernel
// counts tiles of and waits for, against blocks and counts made row by row.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "kernels/tile_blocks.h"

namespace mdfuser::kernels {
namespace {

struct Case {
  int64_t rows;
  int32_t blocks;
};

const Case kCases[] = {
    {128, 1},
    {200, 1},
    {8, 1},
    {1300, 2},
    {4104, 8},
    {10, 4},
};

// The block of `row`, from the rows each block holds.
int32_t blockOfRow(int64_t row, const Case& k) {
  return static_cast<int32_t>(row / blockRows(k.rows, k.blocks));
}

TEST(TileBlocks, BlocksCutTheRowsInOrder) {
  for (const Case& k : kCases) {
    ASSERT_TRUE(everyBlockHoldsRows(k.rows, k.blocks))
        << k.rows << " rows in " << k.blocks;
    const int64_t block_rows = blockRows(k.rows, k.blocks);
    std::set<int32_t> seen;
    int32_t previous = 0;
    for (int64_t row = 0; row < k.rows; ++row) {
      // A tile of one row holds that row's block.
      const Blocks one = blocksOfTile(row, 1, k.rows, block_rows);
      EXPECT_EQ(one.lo, one.hi) << "row " << row;
      EXPECT_GE(one.lo, previous) << "row " << row;
      EXPECT_LT(one.lo, k.blocks) << "row " << row;
      previous = one.lo;
      seen.insert(one.lo);
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(k.blocks))
        << "every block holds rows";
  }
}

TEST(TileBlocks, CountsAreTheTilesHoldingEachBlock) {
  constexpr int64_t kTileRows = 128;
  constexpr int64_t kTileCols = 128;
  constexpr int64_t kN = 136; // two tiles along N
  for (const Case& k : kCases) {
    std::vector<uint32_t> expected(k.blocks, 0);
    for (int64_t first = 0; first < k.rows; first += kTileRows) {
      std::set<int32_t> held;
      for (int64_t row = first; row < std::min(first + kTileRows, k.rows);
           ++row) {
        held.insert(blockOfRow(row, k));
      }
      for (int32_t block : held) {
        expected[block] += 2;
      }
      const Blocks range =
          blocksOfTile(first, kTileRows, k.rows, blockRows(k.rows, k.blocks));
      EXPECT_EQ(range.lo, *held.begin());
      EXPECT_EQ(range.hi, *held.rbegin());
    }
    EXPECT_EQ(
        tilesOfBlocks(k.rows, k.blocks, kN, kTileRows, kTileCols), expected)
        << k.rows << " rows, " << k.blocks << " blocks";
  }
}

TEST(TileBlocks, ATilePastTheRowsHoldsNoBlock) {
  const Blocks none = blocksOfTile(256, 128, 200, 100);
  EXPECT_GT(none.lo, none.hi);
  // A tile that ends past the rows holds the last block.
  const Blocks last = blocksOfTile(128, 128, 200, 100);
  EXPECT_EQ(last.lo, 1);
  EXPECT_EQ(last.hi, 1);
}

TEST(TileBlocks, EveryBlockMustHoldARow) {
  EXPECT_TRUE(everyBlockHoldsRows(10, 4)); // 3, 3, 3, 1
  EXPECT_FALSE(everyBlockHoldsRows(9, 6)); // 2 × 5 rows cover 9
  EXPECT_FALSE(everyBlockHoldsRows(4, 5));
  EXPECT_FALSE(everyBlockHoldsRows(4, 0));
}

TEST(TileBlocks, TeamsAndBlocksAKernelTakes) {
  EXPECT_EQ(teamAndBlocksRefusal(2, 1, 1024, 8, 16, 8), "");
  EXPECT_EQ(
      teamAndBlocksRefusal(1, 0, 1024, 1, 16, 8),
      "the kernel takes teams of 2 to 16 members");
  EXPECT_EQ(
      teamAndBlocksRefusal(17, 0, 1024, 1, 16, 8),
      "the kernel takes teams of 2 to 16 members");
  EXPECT_EQ(
      teamAndBlocksRefusal(4, 4, 1024, 1, 16, 8),
      "the kernel takes teams of 2 to 16 members");
  EXPECT_EQ(
      teamAndBlocksRefusal(2, 0, 1024, 9, 16, 8),
      "each member's rows must fill 1 to 8 blocks");
  // 2 × 5 rows cover 9: the last block would hold none.
  EXPECT_EQ(
      teamAndBlocksRefusal(2, 0, 9, 6, 16, 8),
      "each member's rows must fill 1 to 8 blocks");
}

TEST(TileBlocks, CtasSharedAmongBlocks) {
  // CTA c works on block c % blocks: every CTA counted once, the first
  // blocks taking the one CTA more.
  for (int32_t ctas : {1, 8, 16, 17, 32}) {
    for (int32_t blocks = 1; blocks <= std::min(ctas, 8); ++blocks) {
      std::vector<int32_t> counted(blocks, 0);
      for (int32_t c = 0; c < ctas; ++c) {
        ++counted[c % blocks];
      }
      for (int32_t b = 0; b < blocks; ++b) {
        EXPECT_EQ(ctasOfBlock(ctas, blocks, b), counted[b])
            << ctas << " CTAs, block " << b << " of " << blocks;
      }
    }
  }
  EXPECT_EQ(ctasOfBlock(16, 4, 0), 4);
  EXPECT_EQ(ctasOfBlock(17, 4, 0), 5);
  EXPECT_EQ(ctasOfBlock(17, 4, 3), 4);
}

} // namespace
} // namespace mdfuser::kernels
