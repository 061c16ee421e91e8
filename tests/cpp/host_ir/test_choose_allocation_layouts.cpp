// SPDX-License-Identifier: MIT
//
// ChooseAllocationLayouts allocates attention's results laid out like the
// operands the kernels copy their layout from, inferred through views.

#include <gtest/gtest.h>

#include <string>

#include "common/host_ir_outline.h"
#include "common/program_builder.h"
#include "host_ir/passes/alias_layout_ops.h"
#include "host_ir/passes/allocate_and_deallocate.h"
#include "host_ir/passes/choose_allocation_layouts.h"
#include "host_ir/verifier.h"
#include "ir/ops.h"

namespace mdfuser {
namespace {

using namespace hir;

const Allocate* allocationOf(const HostIrContainer& hic, const TensorView* tv) {
  for (const Expr* e : hic.topLevel().exprs()) {
    if (const auto* a = dynamic_cast<const Allocate*>(e);
        a != nullptr && a->buffer() == tv) {
      return a;
    }
  }
  return nullptr;
}

// Attention on a query cut out of `qkv` [seq 4, batch 2, heads 3, size 5]
// by `to_query`, then the heads merged back: o [b, h, s, e] -> permute
// [s, b, h, e] -> reshape [s, b, h * e] -> neg (the output).
struct Attention {
  std::unique_ptr<HostIrContainer> hic;
  TensorView* o = nullptr;
};

Attention attention(bool query_from_permute) {
  test::ProgramBuilder b;
  TensorView* qkv = b.input({4, 2, 3, 5});
  TensorView* k = b.input({2, 3, 4, 5});
  TensorView* v = b.input({2, 3, 4, 5});
  TensorView* q = b.tensor({2, 3, 4, 5});
  TensorView* o = b.tensor({2, 3, 4, 5});
  TensorView* lse = b.tensor({2, 3, 4});
  TensorView* seed = b.tensor({});
  TensorView* offset = b.tensor({});
  TensorView* merged = b.tensor({4, 2, 3, 5});
  TensorView* flat = b.tensor({4, 2, 15});
  TensorView* y = b.tensor({4, 2, 15});
  b.output(y);
  auto hic = b.build();
  Scope& top = hic->topLevel();
  if (query_from_permute) {
    top.pushBack(
        hic->create<PermuteOp>(q, qkv, std::vector<int64_t>{1, 2, 0, 3}));
  } else {
    // [4, 2, 3, 5] read as [2, 3, 4, 5]: a row-major query.
    top.pushBack(hic->create<ReshapeOp>(
        q, qkv, std::vector<ReshapeOp::Group>{{0, 4, 0, 4}}));
  }
  top.pushBack(hic->create<SdpaOp>(
      OpType::SdpaFwd,
      std::vector<Val*>{o, lse, seed, offset},
      std::vector<Val*>{q, k, v},
      SdpaOptions{.is_causal = true, .scale = std::nullopt}));
  top.pushBack(
      hic->create<PermuteOp>(merged, o, std::vector<int64_t>{2, 0, 1, 3}));
  top.pushBack(hic->create<ReshapeOp>(
      flat,
      merged,
      std::vector<ReshapeOp::Group>{{0, 1, 0, 1}, {1, 2, 1, 2}, {2, 4, 2, 3}}));
  top.pushBack(
      hic->create<PointwiseOp>(OpType::Neg, y, std::vector<Val*>{flat}));
  aliasLayoutOps(*hic);
  allocateAndDeallocate(*hic);
  return {std::move(hic), o};
}

TEST(ChooseAllocationLayouts, AttentionOutputFollowsAPermutedQuery) {
  Attention a = attention(/*query_from_permute=*/true);
  const Allocate* before = allocationOf(*a.hic, a.o);
  ASSERT_NE(before, nullptr);
  EXPECT_TRUE(before->strideOrder().empty());

  chooseAllocationLayouts(*a.hic);
  verify(*a.hic, {.buffers_allocated = true});
  // The query is [b, h, s, e] over memory [s, b, h, e]: ranks s 3, b 2,
  // h 1, e 0.
  EXPECT_EQ(
      allocationOf(*a.hic, a.o)->strideOrder(),
      (std::vector<int64_t>{2, 1, 3, 0}));
  EXPECT_NE(
      allocationOf(*a.hic, a.o)->toString().find("stride_order=[2, 1, 3, 0]"),
      std::string::npos)
      << allocationOf(*a.hic, a.o)->toString();
  // The log-sum-exp keeps its row-major layout.
  for (const Expr* e : a.hic->topLevel().exprs()) {
    if (const auto* alloc = dynamic_cast<const Allocate*>(e);
        alloc != nullptr && alloc->buffer() != a.o) {
      EXPECT_TRUE(alloc->strideOrder().empty()) << alloc->toString();
    }
  }
}

TEST(ChooseAllocationLayouts, RowMajorQueryLeavesTheOutputRowMajor) {
  Attention a = attention(/*query_from_permute=*/false);
  chooseAllocationLayouts(*a.hic);
  EXPECT_TRUE(allocationOf(*a.hic, a.o)->strideOrder().empty());
}

TEST(ChooseAllocationLayouts, GradientsFollowTheirOperandsThroughViews) {
  test::ProgramBuilder b;
  // q, k and v cut out of one buffer [s 4, b 2, h 3, 3 * e 15] by slices
  // and permutes, as a fused qkv projection gives them.
  TensorView* qkv = b.input({4, 2, 3, 15});
  TensorView* grad_o = b.input({2, 3, 4, 5});
  TensorView* o = b.input({2, 3, 4, 5});
  TensorView* lse = b.input({2, 3, 4});
  std::vector<TensorView*> parts;
  std::vector<TensorView*> operands;
  std::vector<TensorView*> grads;
  for (int i = 0; i < 3; ++i) {
    parts.push_back(b.tensor({4, 2, 3, 5}));
    operands.push_back(b.tensor({2, 3, 4, 5}));
    grads.push_back(b.tensor({2, 3, 4, 5}));
  }
  TensorView* sum = b.tensor({2, 3, 4, 5});
  TensorView* total = b.tensor({2, 3, 4, 5});
  b.output(total);
  auto hic = b.build();
  Scope& top = hic->topLevel();
  for (int i = 0; i < 3; ++i) {
    top.pushBack(hic->create<SliceOp>(
        parts[i],
        qkv,
        std::vector<Scalar*>{
            constant(hic->ir(), 0),
            constant(hic->ir(), 0),
            constant(hic->ir(), 0),
            constant(hic->ir(), 5 * i)}));
    top.pushBack(hic->create<PermuteOp>(
        operands[i], parts[i], std::vector<int64_t>{1, 2, 0, 3}));
  }
  top.pushBack(hic->create<SdpaOp>(
      OpType::SdpaBwd,
      std::vector<Val*>{grads[0], grads[1], grads[2]},
      std::vector<Val*>{grad_o, operands[0], operands[1], operands[2], o, lse},
      SdpaOptions{.is_causal = true, .scale = std::nullopt}));
  top.pushBack(hic->create<PointwiseOp>(
      OpType::Add, sum, std::vector<Val*>{grads[0], grads[1]}));
  top.pushBack(hic->create<PointwiseOp>(
      OpType::Add, total, std::vector<Val*>{sum, grads[2]}));
  aliasLayoutOps(*hic);
  allocateAndDeallocate(*hic);
  chooseAllocationLayouts(*hic);
  verify(*hic, {.buffers_allocated = true});
  for (TensorView* g : grads) {
    ASSERT_NE(allocationOf(*hic, g), nullptr);
    EXPECT_EQ(
        allocationOf(*hic, g)->strideOrder(),
        (std::vector<int64_t>{2, 1, 3, 0}))
        << "T" << g->name();
  }
  EXPECT_TRUE(allocationOf(*hic, sum)->strideOrder().empty());
}

} // namespace
} // namespace mdfuser
