// SPDX-License-Identifier: MIT
//
// reshape groups its input and output axes into runs with equal products.
// One-to-one groups map exactly; a split maps its input axis to the
// outermost output axis and a merge its outermost input axis to the output
// axis, both inexactly; other groups map nothing. A -1 takes the input
// axes left between the groups before it and after it.

#include <gtest/gtest.h>

#include "common/axis_map.h"
#include "common/expect_error.h"
#include "ir/fusion.h"
#include "ir/ops.h"

namespace mdfuser {
namespace {

using test::AxisPairs;
using test::exactness;
using test::extents;
using test::pairs;

std::string groups(const TensorView* out) {
  auto* op = dynamic_cast<ReshapeOp*>(out->definition());
  if (op == nullptr) {
    return "not a reshape";
  }
  std::string s;
  for (const ReshapeOp::Group& g : op->groups()) {
    s += (s.empty() ? "" : " ") + std::to_string(g.in_begin) + ":" +
         std::to_string(g.in_end) + "->" + std::to_string(g.out_begin) + ":" +
         std::to_string(g.out_end);
  }
  return s;
}

class Reshape : public ::testing::Test {
 protected:
  std::vector<Scalar*> shape(const std::vector<int64_t>& extents) {
    std::vector<Scalar*> result;
    for (int64_t e : extents) {
      result.push_back(constant(&fusion, e));
    }
    return result;
  }

  Fusion fusion;
};

TEST_F(Reshape, SplitAndMergeOfStaticExtents) {
  TensorView* x = fusion.defineTensor({6, 4, 5}, {}, DataType::Float);
  TensorView* y = reshape(x, shape({2, 3, 20}));
  EXPECT_EQ(extents(y->logical()), "2 3 20");
  EXPECT_EQ(groups(y), "0:1->0:2 1:3->2:3");
  const std::vector<IterDomain*>& i = x->logical();
  const std::vector<IterDomain*>& o = y->logical();
  TensorOp* op = test::definitionOf(y);
  EXPECT_EQ(
      pairs(op->mapProducerToConsumer(x)),
      (AxisPairs{{i[0], o[0]}, {i[1], o[2]}}));
  EXPECT_EQ(
      exactness(op->mapProducerToConsumer(x)),
      (std::vector<bool>{false, false}));
  EXPECT_EQ(y->dtype(), DataType::Float);
}

TEST_F(Reshape, ARegroupingMapsNothing) {
  TensorView* x = fusion.defineTensor({6, 4}, {}, DataType::Float);
  TensorView* y = reshape(x, shape({4, 6}));
  EXPECT_EQ(groups(y), "0:2->0:2");
  EXPECT_TRUE(test::definitionOf(y)->mapProducerToConsumer(x).empty());
}

TEST_F(Reshape, AxesOfExtentOneAreGroupsOfTheirOwn) {
  TensorView* x = fusion.defineTensor({6, 1, 4}, {}, DataType::Float);
  TensorView* y = reshape(x, shape({1, 6, 4, 1}));
  EXPECT_EQ(groups(y), "0:0->0:1 0:1->1:2 1:2->2:2 2:3->2:3 3:3->3:4");
  TensorOp* op = test::definitionOf(y);
  EXPECT_EQ(
      pairs(op->mapProducerToConsumer(x)),
      (AxisPairs{
          {x->logical()[0], y->logical()[1]},
          {x->logical()[2], y->logical()[2]}}));
  EXPECT_EQ(
      exactness(op->mapProducerToConsumer(x)), (std::vector<bool>{true, true}));
}

TEST_F(Reshape, AStaticMinusOneIsInferred) {
  TensorView* x = fusion.defineTensor({2, 3, 4}, {}, DataType::Float);
  EXPECT_EQ(extents(reshape(x, shape({4, -1}))->logical()), "4 6");
  EXPECT_EQ(extents(reshape(x, shape({-1}))->logical()), "24");
  EXPECT_EQ(extents(reshape(x, shape({2, -1, 3}))->logical()), "2 4 3");
}

TEST_F(Reshape, SymbolicExtentsKeepTheirAxis) {
  TensorView* x = fusion.defineTensor({-1, 6}, {}, DataType::Float);
  Scalar* rows = x->logical()[0]->extent();
  TensorView* y =
      reshape(x, {rows, constant(&fusion, 2), constant(&fusion, 3)});
  EXPECT_EQ(extents(y->logical()), "i0 2 3");
  EXPECT_EQ(groups(y), "0:1->0:1 1:2->1:3");
  EXPECT_EQ(
      exactness(test::definitionOf(y)->mapProducerToConsumer(x)),
      (std::vector<bool>{true, false}));
}

TEST_F(Reshape, MinusOneTakesTheSymbolicAxesLeftInTheMiddle) {
  TensorView* x = fusion.defineTensor({-1, -1, 6}, {}, DataType::Float);
  // [b, s, 6] -> [-1, 6]: -1 = b * s, the merge maps b inexactly.
  TensorView* y = reshape(x, shape({-1, 6}));
  EXPECT_EQ(extents(y->logical()), "i0 * i1 6");
  EXPECT_EQ(groups(y), "0:2->0:1 2:3->1:2");
  TensorOp* op = test::definitionOf(y);
  EXPECT_EQ(
      pairs(op->mapProducerToConsumer(x)),
      (AxisPairs{
          {x->logical()[0], y->logical()[0]},
          {x->logical()[2], y->logical()[1]}}));
  EXPECT_EQ(
      exactness(op->mapProducerToConsumer(x)),
      (std::vector<bool>{false, true}));

  // [b, s, 6] -> [b, -1]: -1 = s * 6.
  TensorView* z =
      reshape(x, {x->logical()[0]->extent(), constant(&fusion, -1)});
  EXPECT_EQ(extents(z->logical()), "i0 i1 * 6");
  EXPECT_EQ(groups(z), "0:1->0:1 1:3->1:2");
}

TEST_F(Reshape, MinusOneOfASingleSymbolicAxisIsThatAxis) {
  TensorView* x = fusion.defineTensor({2, -1, 6}, {}, DataType::Float);
  TensorView* y = reshape(x, shape({2, -1, 3, 2}));
  EXPECT_EQ(y->logical()[1]->extent(), x->logical()[1]->extent());
  EXPECT_EQ(groups(y), "0:1->0:1 1:2->1:2 2:3->2:4");
  // With nothing left for it, -1 is 1.
  TensorView* z = reshape(
      x,
      {constant(&fusion, 2),
       x->logical()[1]->extent(),
       constant(&fusion, -1),
       constant(&fusion, 6)});
  EXPECT_EQ(extents(z->logical()), "2 i0 1 6");
}

TEST_F(Reshape, ExtentConstantsPrintInTheOp) {
  TensorView* x = fusion.defineTensor({6}, {}, DataType::Float);
  TensorView* y = reshape(x, shape({2, 3}));
  EXPECT_EQ(
      test::definitionOf(y)->toString(),
      "T1_g_float[iS1{2}, iS2{3}]\n"
      "   = reshape(T0_g_float[iS0{6}])");
}

TEST_F(Reshape, Errors) {
  TensorView* x = fusion.defineTensor({2, 3}, {}, DataType::Float);
  EXPECT_VALUE_ERROR(
      reshape(x, shape({4, 2})),
      "reshape of T0_g_float[iS0{2}, iS1{3}] to [4, 2]: the input has 6 "
      "elements but the shape has 8");
  EXPECT_VALUE_ERROR(reshape(x, shape({-1, -1})), "at most one -1 is allowed");
  EXPECT_VALUE_ERROR(
      reshape(x, shape({-1, 4})),
      "cannot infer -1: 6 elements do not divide into 4");
  EXPECT_VALUE_ERROR(reshape(x, shape({2, -3})), "extent -3 is negative");

  TensorView* s = fusion.defineTensor({-1, 6}, {}, DataType::Float);
  EXPECT_VALUE_ERROR(
      reshape(s, shape({2, 3, 6})),
      "cannot tell how the symbolic extent i0 is reshaped");
  EXPECT_VALUE_ERROR(
      reshape(s, shape({4, -1})),
      "cannot tell how the symbolic extent i0 is reshaped");
  TensorView* t = fusion.defineTensor({6, -1}, {}, DataType::Float);
  EXPECT_VALUE_ERROR(
      reshape(t, shape({2, -1})),
      "cannot infer -1: the extents around it do not match whole input");

  TensorView* e = broadcastInDim(
      fusion.defineTensor({1, 3}, {}, DataType::Float), shape({4, 3}), {0, 1});
  EXPECT_VALUE_ERROR(
      reshape(e, shape({12})), "is an expanded broadcast; reshape cannot");
}

} // namespace
} // namespace mdfuser
