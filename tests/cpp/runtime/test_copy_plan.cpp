// SPDX-License-Identifier: MIT

#include <cstring>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "runtime/copy_plan.h"

namespace mdfuser {
namespace {

std::vector<int64_t> vec(c10::IntArrayRef values) {
  return values.vec();
}

// Runs the plan on host memory, row by row, as cudaMemcpy2DAsync would.
void runPlan(
    const std::vector<RowCopy>& plan, const at::Tensor& src, at::Tensor& dst) {
  const auto* from = static_cast<const char*>(src.data_ptr());
  auto* to = static_cast<char*>(dst.data_ptr());
  for (const RowCopy& copy : plan) {
    for (int64_t r = 0; r < copy.height; ++r) {
      std::memcpy(
          to + copy.dst_offset + r * copy.dst_pitch,
          from + copy.src_offset + r * copy.src_pitch,
          copy.width);
    }
  }
}

// Copies `src` into `dst` through the plan and checks the result against
// torch's copy_.
std::vector<RowCopy> checkCopy(const at::Tensor& src, at::Tensor dst) {
  const std::vector<RowCopy> plan = planRowCopies(
      vec(src.sizes()),
      vec(src.strides()),
      vec(dst.strides()),
      static_cast<int64_t>(src.element_size()));
  const at::Tensor expected = dst.clone().copy_(src);
  runPlan(plan, src, dst);
  EXPECT_TRUE(at::equal(dst, expected));
  return plan;
}

at::Tensor numbered(c10::IntArrayRef sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) {
    n *= s;
  }
  return at::arange(n, at::kInt).reshape(sizes);
}

TEST(RowCopies, AContiguousPairIsOneRow) {
  const auto plan =
      checkCopy(numbered({4, 6, 8}), at::zeros({4, 6, 8}, at::kInt));
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(
      plan[0], (RowCopy{0, 0, 4 * 6 * 8 * 4, 1, 4 * 6 * 8 * 4, 4 * 6 * 8 * 4}));
}

TEST(RowCopies, APartOfAMiddleAxisIsOneCopyOfRows) {
  // A ring's chunk of x [b, t, k] cut along t, into the same place of
  // another [b, t, k] buffer.
  const at::Tensor src = numbered({2, 6, 8}).narrow(1, 3, 3);
  at::Tensor dst_buffer = at::zeros({2, 6, 8}, at::kInt);
  const auto plan = checkCopy(src, dst_buffer.narrow(1, 3, 3));
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0], (RowCopy{0, 0, 3 * 8 * 4, 2, 48 * 4, 48 * 4}));
  // The view's own offset is the caller's: the plan starts at its first
  // element.
  EXPECT_TRUE(
      at::equal(dst_buffer.narrow(1, 0, 3), at::zeros({2, 3, 8}, at::kInt)));
}

TEST(RowCopies, DifferentLayoutsOnEachSide) {
  // Contiguous rows into a part of a wider buffer.
  at::Tensor wide = at::zeros({5, 10}, at::kInt);
  const auto plan = checkCopy(numbered({5, 4}), wide.narrow(1, 6, 4));
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0], (RowCopy{0, 0, 16, 5, 16, 40}));
}

TEST(RowCopies, AxesBeyondTheRowsAddCopies) {
  // [3, 4, 5, 6] cut on axes 1, 2 and 3: the last axis gives the rows'
  // width, axis 2 the rows, axes 0 and 1 one copy per index.
  const at::Tensor src =
      numbered({3, 4, 5, 6}).narrow(1, 1, 2).narrow(2, 0, 4).narrow(3, 0, 4);
  const auto plan = checkCopy(src, at::zeros({3, 2, 4, 4}, at::kInt));
  ASSERT_EQ(plan.size(), 3u * 2u);
  for (const RowCopy& copy : plan) {
    EXPECT_EQ(copy.width, 16);
    EXPECT_EQ(copy.height, 4);
  }
  EXPECT_EQ(plan[1].src_offset, 30 * 4);
  EXPECT_EQ(plan[2].src_offset, 120 * 4);
}

TEST(RowCopies, AxesLaidOutAlikeOnBothSidesMerge) {
  // Cut on axes 1 and 3 only: axes 1 and 2 follow each other on both
  // sides and give the rows together.
  const at::Tensor src = numbered({3, 4, 5, 6}).narrow(1, 1, 2).narrow(3, 0, 4);
  const auto plan = checkCopy(src, at::zeros({3, 2, 5, 4}, at::kInt));
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0].height, 10);
}

TEST(RowCopies, ATransposedSourceCopiesElementByElement) {
  const at::Tensor src = numbered({4, 3}).t();
  const auto plan = checkCopy(src, at::zeros({3, 4}, at::kInt));
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0].width, 4);
  EXPECT_EQ(plan[0].height, 4);
  EXPECT_EQ(plan[0].src_pitch, 12);
  EXPECT_EQ(plan[0].dst_pitch, 4);
}

TEST(RowCopies, AxesOfOneElementAndSingleElements) {
  checkCopy(numbered({1, 5, 1, 3}), at::zeros({1, 5, 1, 3}, at::kInt));
  const auto plan = checkCopy(numbered({1, 1}), at::zeros({1, 1}, at::kInt));
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0], (RowCopy{0, 0, 4, 1, 4, 4}));
  EXPECT_TRUE(planRowCopies({2, 0, 3}, {0, 3, 1}, {0, 3, 1}, 4).empty());
}

TEST(RowCopies, BroadcastSourcesAreRefused) {
  EXPECT_INTERNAL_ERROR(
      planRowCopies({4, 3}, {0, 1}, {3, 1}, 4),
      "a row copy needs positive strides; axis 0 of 4 elements has strides 0 "
      "and 3");
}

} // namespace
} // namespace mdfuser
