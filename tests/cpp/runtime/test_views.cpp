// SPDX-License-Identifier: MIT

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "runtime/views.h"

namespace mdfuser {
namespace {

// narrowView gives what Tensor::narrow gives: the same sizes, strides,
// address and values, and writes reach the viewed tensor.
void expectLikeNarrow(
    const at::Tensor& t, int64_t axis, int64_t start, int64_t length) {
  const at::Tensor expected = t.narrow(axis, start, length);
  at::Tensor view = narrowView(t, axis, start, length);
  EXPECT_EQ(view.sizes(), expected.sizes());
  EXPECT_EQ(view.strides(), expected.strides());
  EXPECT_EQ(view.storage_offset(), expected.storage_offset());
  EXPECT_EQ(view.data_ptr(), expected.data_ptr());
  EXPECT_EQ(view.scalar_type(), t.scalar_type());
  EXPECT_EQ(view.is_contiguous(), expected.is_contiguous());
  EXPECT_TRUE(at::equal(view, expected));
  if (length > 0) {
    view.fill_(-7);
    EXPECT_TRUE(at::equal(expected, at::full_like(expected, -7)));
  }
}

TEST(NarrowView, MatchesNarrow) {
  const at::Tensor t = at::arange(4 * 6 * 5, at::kFloat).view({4, 6, 5});
  for (int64_t axis = 0; axis < 3; ++axis) {
    for (int64_t start = 0; start <= t.size(axis); ++start) {
      for (int64_t length = 0; start + length <= t.size(axis); ++length) {
        expectLikeNarrow(t.clone(), axis, start, length);
      }
    }
  }
}

TEST(NarrowView, StridedAndOffsetInputs) {
  const at::Tensor base = at::arange(8 * 6 * 5, at::kDouble).view({8, 6, 5});
  // A permuted view with a storage offset, and a non-contiguous bf16 one.
  expectLikeNarrow(base.narrow(0, 2, 5).permute({2, 0, 1}), 1, 1, 3);
  expectLikeNarrow(base.to(at::kBFloat16).select(2, 3), 0, 4, 4);
  // Of a view of a view: offsets add up.
  const at::Tensor outer = narrowView(base, 0, 3, 4);
  expectLikeNarrow(outer, 0, 1, 2);
}

TEST(NarrowView, NeverRequiresGrad) {
  const at::Tensor t = at::ones({4, 3}).requires_grad_();
  EXPECT_FALSE(narrowView(t, 0, 1, 2).requires_grad());
}

TEST(TransposedView, MatchesT) {
  const at::Tensor base = at::arange(6 * 8, at::kFloat).view({6, 8});
  for (const at::Tensor& m :
       {base, base.narrow(0, 1, 4), base.narrow(1, 2, 5), base.t()}) {
    const at::Tensor expected = m.t();
    at::Tensor view = transposedView(m);
    EXPECT_EQ(view.sizes(), expected.sizes());
    EXPECT_EQ(view.strides(), expected.strides());
    EXPECT_EQ(view.data_ptr(), expected.data_ptr());
    EXPECT_TRUE(at::equal(view, expected));
    // As a GEMM's operand.
    const at::Tensor a = at::ones({3, view.size(0)});
    EXPECT_TRUE(at::allclose(at::mm(a, view), at::mm(a, expected)));
  }
  EXPECT_TRUE(test::throwsInternalError(
      [&] {
        transposedView(at::zeros({2, 3, 4}));
      },
      "a transpose of a matrix, not of a tensor of sizes [2, 3, 4]"));
}

TEST(NarrowView, RefusesAViewOutOfRange) {
  const at::Tensor t = at::zeros({4, 3});
  EXPECT_TRUE(test::throwsInternalError(
      [&] { narrowView(t, 0, 3, 2); },
      "a view of elements [3, 5) of axis 0 of a tensor of sizes [4, 3]"));
  EXPECT_TRUE(
      test::throwsInternalError([&] { narrowView(t, 2, 0, 1); }, "of axis 2"));
  EXPECT_TRUE(
      test::throwsInternalError([&] { narrowView(t, 1, -1, 1); }, "[-1, 0)"));
}

} // namespace
} // namespace mdfuser
