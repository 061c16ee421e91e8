// SPDX-License-Identifier: MIT
//
// AliasLayoutOps turns layout operations into views of their input, except
// where they produce a program output or write a chunk of a tensor that
// outlives its loop.

#include <gtest/gtest.h>

#include "common/host_ir_outline.h"
#include "common/program_builder.h"
#include "host_ir/passes/alias_layout_ops.h"
#include "host_ir/passes/allocate_and_deallocate.h"
#include "host_ir/verifier.h"
#include "ir/ops.h"

namespace mdfuser {
namespace {

using namespace hir;

TEST(AliasLayoutOps, IntermediatesBecomeViewsAndGetNoBuffer) {
  test::ProgramBuilder b;
  TensorView* t0 = b.input({4, 6});
  TensorView* t1 = b.tensor({6, 4});
  TensorView* t2 = b.tensor({6, 4});
  TensorView* t3 = b.tensor({4, 6});
  b.output(t2);
  b.output(t3);
  auto hic = b.build();
  // t1 = permute(t0); t2 = neg(t1); t3 = permute(t1) (an output).
  hic->topLevel().pushBack(
      hic->create<PermuteOp>(t1, t0, std::vector<int64_t>{1, 0}));
  hic->topLevel().pushBack(
      hic->create<PointwiseOp>(OpType::Neg, t2, std::vector<Val*>{t1}));
  hic->topLevel().pushBack(
      hic->create<PermuteOp>(t3, t1, std::vector<int64_t>{1, 0}));

  aliasLayoutOps(*hic);
  allocateAndDeallocate(*hic);
  verify(*hic, {.buffers_allocated = true});
  EXPECT_EQ(test::outline(*hic), R"(View(permute) T1 of T0
Allocate T2
T2 = neg(T1)
Allocate T3
T3 = permute(T1)
)") << "the output stays a copy; the view needs no buffer, and its source "
       "is an input, so nothing is freed";
}

TEST(AliasLayoutOps, AViewKeepsItsSourceAlive) {
  test::ProgramBuilder b;
  TensorView* t0 = b.input({4});
  TensorView* t1 = b.tensor({4});
  TensorView* t2 = b.tensor({1, 4});
  TensorView* t3 = b.tensor({1, 4});
  b.output(t3);
  auto hic = b.build();
  hic->topLevel().pushBack(
      hic->create<PointwiseOp>(OpType::Neg, t1, std::vector<Val*>{t0}));
  hic->topLevel().pushBack(
      hic->create<BroadcastOp>(t2, t1, std::vector<bool>{true, false}));
  hic->topLevel().pushBack(
      hic->create<PointwiseOp>(OpType::Abs, t3, std::vector<Val*>{t2}));

  aliasLayoutOps(*hic);
  allocateAndDeallocate(*hic);
  verify(*hic, {.buffers_allocated = true});
  EXPECT_EQ(test::outline(*hic), R"(Allocate T1
T1 = neg(T0)
View(broadcast) T2 of T1
Allocate T3
T3 = abs(T2)
Deallocate T1
)") << "T1 is freed after the view's last use";
}

} // namespace
} // namespace mdfuser
