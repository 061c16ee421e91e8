// SPDX-License-Identifier: MIT
//
// Reductions keep the reduced axes as reduction axes of their output, so
// that a reduction over a sharded axis can become a local reduction and a
// collective; keepdim adds a broadcast. mean and var_mean are built from
// the primitives.

#include <gtest/gtest.h>

#include "common/axis_map.h"
#include "common/expect_error.h"
#include "ir/fusion.h"
#include "ir/ops.h"

namespace mdfuser {
namespace {

using test::AxisPairs;
using test::definitionOf;
using test::extents;
using test::pairs;

TEST(Reduction, ReducedAxesBecomeReductionAxes) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({-1, 3, 4}, {}, DataType::Float);
  TensorView* y = reduce(OpType::Sum, x, {-1, 0});
  EXPECT_EQ(extents(y->logical()), "ri0 3 r4");
  EXPECT_EQ(extents(y->logicalNoReductions()), "3");
  auto* op = dynamic_cast<ReductionOp*>(y->definition());
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->in(), x);
  EXPECT_EQ(op->reducedDims(), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(
      op->toString(),
      "T1_g_float[rS3{i0}, iS4{3}, rS5{4}]\n"
      "   = sum(T0_g_float[iS0{i0}, iS1{3}, iS2{4}])");
  // Every input axis maps, the reduced ones to the reduction axes.
  EXPECT_EQ(
      pairs(op->mapProducerToConsumer(x)),
      (AxisPairs{
          {x->logical()[0], y->logical()[0]},
          {x->logical()[1], y->logical()[1]},
          {x->logical()[2], y->logical()[2]}}));
}

TEST(Reduction, NoDimsReducesEveryAxis) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({2, 3}, {}, DataType::Float);
  EXPECT_EQ(extents(reduce(OpType::Max, x, {})->logical()), "r2 r3");
}

TEST(Reduction, KeepdimAddsABroadcastOfExtentOne) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({2, 3, 4}, {}, DataType::Float);
  TensorView* y = reduce(OpType::Min, x, {1}, /*keepdim=*/true);
  EXPECT_EQ(extents(y->logical()), "2 b1 4");
  auto* broadcast = dynamic_cast<BroadcastOp*>(y->definition());
  ASSERT_NE(broadcast, nullptr);
  EXPECT_EQ(broadcast->isNew(), (std::vector<bool>{false, true, false}));
  EXPECT_EQ(extents(broadcast->in()->logical()), "2 r3 4");
}

TEST(Reduction, DtypesAreTorchs) {
  Fusion fusion;
  TensorView* i32 = fusion.defineTensor({4}, {}, DataType::Int32);
  TensorView* b = fusion.defineTensor({4}, {}, DataType::Bool);
  TensorView* bf = fusion.defineTensor({4}, {}, DataType::BFloat16);
  EXPECT_EQ(reduce(OpType::Sum, i32, {})->dtype(), DataType::Int);
  EXPECT_EQ(reduce(OpType::Sum, b, {})->dtype(), DataType::Int);
  EXPECT_EQ(reduce(OpType::Sum, bf, {})->dtype(), DataType::BFloat16);
  EXPECT_EQ(reduce(OpType::Max, b, {})->dtype(), DataType::Bool);
  EXPECT_EQ(reduce(OpType::Min, i32, {})->dtype(), DataType::Int32);
  EXPECT_EQ(
      reduce(OpType::Sum, bf, {}, false, DataType::Float)->dtype(),
      DataType::Float);
  EXPECT_TYPE_ERROR(
      reduce(OpType::Max, bf, {}, false, DataType::Float),
      "max keeps the input's dtype; only sum takes a dtype");
}

TEST(Reduction, AnExpandedAxisReducesOverItsExpandedExtent) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({1, 4}, {}, DataType::Float);
  TensorView* e =
      broadcastInDim(x, {constant(&fusion, 6), constant(&fusion, 4)}, {0, 1});
  EXPECT_EQ(extents(reduce(OpType::Sum, e, {0})->logical()), "r6 4");
  // A kept expanded axis stays an expanded broadcast.
  EXPECT_EQ(extents(reduce(OpType::Sum, e, {1})->logical()), "b{1 ex 6} r4");
}

TEST(ReductionDims, NormalizesAndSorts) {
  EXPECT_EQ(reductionDims({-1, 0}, 3, "sum"), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(reductionDims({}, 3, "sum"), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_VALUE_ERROR(
      reductionDims({1, -2}, 3, "sum"),
      "sum: dimension 1 is given twice in dims=[1, -2]");
  EXPECT_VALUE_ERROR(
      reductionDims({3}, 3, "max"),
      "max: dimension 3 is out of range for a tensor of 3 dimensions "
      "(valid: -3 to 2)");
}

TEST(Reduction, Errors) {
  Fusion fusion;
  TensorView* s = fusion.defineTensor({}, {}, DataType::Float);
  EXPECT_VALUE_ERROR(
      reduce(OpType::Sum, s, {}), "sum: cannot reduce the 0-dimensional T0");
  EXPECT_TYPE_ERROR(
      reduce(OpType::Sum, nullptr, {}),
      "sum: input must be a tensor, got None");
  EXPECT_INTERNAL_ERROR(
      fusion.create<ReductionOp>(OpType::Add, s, s), "add is not a reduction");
}

TEST(Mean, IsASumDividedByTheCount) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({-1, 4}, {}, DataType::Float);
  TensorView* m = mean(x, {0});
  EXPECT_EQ(extents(m->logical()), "4");
  auto* div = dynamic_cast<PointwiseOp*>(m->definition());
  ASSERT_NE(div, nullptr);
  EXPECT_EQ(div->type(), OpType::Div);
  EXPECT_EQ(div->input(1), x->logical()[0]->extent());
  EXPECT_EQ(definitionOf(div->tensorInputs()[0])->type(), OpType::Sum);
}

// As nvFuser's mean (a sum divided by the count): Float for BFloat16, the
// sum taken in Float.
TEST(Mean, ReducedPrecisionIsComputedAndReturnedInFloat) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({2, 4}, {}, DataType::BFloat16);
  TensorView* m = mean(x, {1}, /*keepdim=*/true);
  EXPECT_EQ(m->dtype(), DataType::Float);
  EXPECT_EQ(extents(m->logical()), "2 b1");
  TensorOp* last = definitionOf(m);
  EXPECT_EQ(last->type(), OpType::Div);
  EXPECT_EQ(last->tensorInputs()[0]->dtype(), DataType::Float);
}

TEST(VarMean, ShapesAndDtypes) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({2, 3, 4}, {}, DataType::Half);
  auto [var, m] = varMean(x, {0, 2}, /*correction=*/0);
  EXPECT_EQ(extents(var->logical()), "3");
  EXPECT_EQ(extents(m->logical()), "3");
  EXPECT_EQ(var->dtype(), DataType::Float);
  EXPECT_EQ(m->dtype(), DataType::Float);
  auto [var_kept, m_kept] = varMean(x, {-1}, 1, /*keepdim=*/true);
  EXPECT_EQ(extents(var_kept->logical()), "2 3 b1");
  EXPECT_EQ(extents(m_kept->logical()), "2 3 b1");
}

TEST(MeanAndVarMean, Errors) {
  Fusion fusion;
  TensorView* i = fusion.defineTensor({2, 3}, {}, DataType::Int);
  TensorView* x = fusion.defineTensor({2, 3}, {}, DataType::Float);
  EXPECT_TYPE_ERROR(
      mean(i, {0}), "mean takes floating-point tensors, got Int for T0");
  EXPECT_TYPE_ERROR(varMean(i, {0}), "var_mean takes floating-point tensors");
  EXPECT_VALUE_ERROR(
      varMean(x, {0}, -1), "var_mean: correction must be >= 0, got -1");
  EXPECT_VALUE_ERROR(mean(x, {0, 0}), "mean: dimension 0 is given twice");
}

} // namespace
} // namespace mdfuser
