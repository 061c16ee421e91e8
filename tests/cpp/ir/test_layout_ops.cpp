// SPDX-License-Identifier: MIT
//
// Layout builders: broadcast, broadcast_in_dim, permute, squeeze, slice and
// cat. Each maps the input axes it keeps whole to their output axes; axes
// it creates, cuts or concatenates along map to nothing, so a sharding
// there is gathered first. (reshape has its own file.)

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

TEST(Broadcast, InsertsAxesThatMapToNothing) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({-1, 4}, {}, DataType::Float);
  TensorView* y = broadcast(x, {true, false, true, false});
  EXPECT_EQ(extents(y->logical()), "b1 i0 b1 4");
  const std::vector<IterDomain*>& o = y->logical();
  auto* op = dynamic_cast<BroadcastOp*>(y->definition());
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(
      pairs(op->mapProducerToConsumer(x)),
      (AxisPairs{{x->logical()[0], o[1]}, {x->logical()[1], o[3]}}));
  EXPECT_EQ(
      op->toString(),
      "T1_g_float[bS2{1}, iS3{i0}, bS4{1}, iS5{4}]\n"
      "   = broadcast(T0_g_float[iS0{i0}, iS1{4}],\n"
      "               is_new=[true, false, true, false])");
  EXPECT_VALUE_ERROR(
      broadcast(x, {true, false}),
      "broadcast: is_broadcast_dim has 1 False entries but the input has 2 "
      "dimensions");
}

TEST(BroadcastInDim, ExpandsNewAndBroadcastAxes) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({1, 4}, {}, DataType::Float);
  TensorView* t = fusion.defineTensor({-1}, {}, DataType::Float);
  Scalar* rows = t->logical()[0]->extent();
  // [1, 4] -> [t, 4]: the broadcast axis is expanded.
  TensorView* e = broadcastInDim(x, {rows, constant(&fusion, 4)}, {0, 1});
  EXPECT_EQ(extents(e->logical()), "b{1 ex i0} 4");
  EXPECT_TRUE(e->logical()[0]->isExpanded());
  // Expanded and input broadcast axes map to nothing, the others exactly.
  EXPECT_EQ(
      pairs(definitionOf(e)->mapProducerToConsumer(x)),
      (AxisPairs{{x->logical()[1], e->logical()[1]}}));
  // [4] -> [3, t, 4] with the input at position 2.
  TensorView* v = fusion.defineTensor({4}, {}, DataType::Float);
  TensorView* n = broadcastInDim(
      v, {constant(&fusion, 3), rows, constant(&fusion, 4)}, {-1});
  EXPECT_EQ(extents(n->logical()), "b{1 ex 3} b{1 ex i0} 4");
  auto* op = dynamic_cast<BroadcastOp*>(n->definition());
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->isNew(), (std::vector<bool>{true, true, false}));
}

TEST(BroadcastInDim, Errors) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({3, 4}, {}, DataType::Float);
  Scalar* c2 = constant(&fusion, 2);
  Scalar* c3 = constant(&fusion, 3);
  Scalar* c4 = constant(&fusion, 4);
  EXPECT_VALUE_ERROR(
      broadcastInDim(x, {c3, c4}, {0}),
      "broadcast_in_dim: broadcast_dims has 1 entries but the input has 2");
  EXPECT_VALUE_ERROR(
      broadcastInDim(x, {c2, c3, c4}, {2, 1}),
      "broadcast_in_dim: broadcast_dims=[2, 1] must be strictly increasing");
  EXPECT_VALUE_ERROR(
      broadcastInDim(x, {c3, c2}, {0, 1}),
      "broadcast_in_dim: the extent of input dimension 1 and shape[1] must "
      "match, got 4 and 2");
  EXPECT_VALUE_ERROR(
      broadcastInDim(x, {constant(&fusion, -1), c3, c4}, {1, 2}),
      "broadcast_in_dim: shape[0] is -1; expected an extent >= 0");
  EXPECT_VALUE_ERROR(
      broadcastInDim(x, {c3, c4}, {0, 2}),
      "broadcast_in_dim: dimension 2 is out of range for a tensor of 2");
}

TEST(Permute, MovesAxesAndTheirMaps) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({2, -1, 4}, {}, DataType::Float);
  TensorView* y = permute(x, {2, 0, -2});
  EXPECT_EQ(extents(y->logical()), "4 2 i0");
  auto* op = dynamic_cast<PermuteOp*>(y->definition());
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->dims(), (std::vector<int64_t>{2, 0, 1}));
  const std::vector<IterDomain*>& i = x->logical();
  const std::vector<IterDomain*>& o = y->logical();
  EXPECT_EQ(
      pairs(op->mapProducerToConsumer(x)),
      (AxisPairs{{i[2], o[0]}, {i[0], o[1]}, {i[1], o[2]}}));
  EXPECT_NE(op->toString().find("dims=[2, 0, 1]"), std::string::npos)
      << op->toString();
}

TEST(Permute, RequiresAPermutation) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({2, 3, 4}, {}, DataType::Float);
  EXPECT_VALUE_ERROR(
      permute(x, {0, -3, 1}),
      "permute: dims=[0, -3, 1] names dimension 0 twice; expected a "
      "permutation");
  EXPECT_VALUE_ERROR(
      permute(x, {0, 1}),
      "permute: dims=[0, 1] has 2 entries but the input has 3 dimensions");
  EXPECT_VALUE_ERROR(
      permute(x, {0, 1, 3}), "permute: dimension 3 is out of range");
}

TEST(Squeeze, RemovesAxesOfExtentOne) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({2, 1, -1, 1}, {}, DataType::Float);
  TensorView* y = squeeze(x, {1, -1});
  EXPECT_EQ(extents(y->logical()), "2 i0");
  auto* op = dynamic_cast<SqueezeOp*>(y->definition());
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->isRemoved(), (std::vector<bool>{false, true, false, true}));
  EXPECT_EQ(
      pairs(op->mapProducerToConsumer(x)),
      (AxisPairs{
          {x->logical()[0], y->logical()[0]},
          {x->logical()[2], y->logical()[1]}}));
  EXPECT_NE(op->toString().find("dims=[1, 3]"), std::string::npos);
}

TEST(Squeeze, Errors) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({2, 1}, {}, DataType::Float);
  EXPECT_VALUE_ERROR(
      squeeze(x, {0}),
      "squeeze: dimension 0 of T0_g_float[iS0{2}, bS1{1}] has extent 2; only "
      "dimensions of extent 1 can be squeezed");
  EXPECT_VALUE_ERROR(
      squeeze(x, {1, -1}),
      "squeeze: dimension 1 is given twice in dims=[1, -1]");
  TensorView* e =
      broadcastInDim(x, {constant(&fusion, 2), constant(&fusion, 5)}, {0, 1});
  EXPECT_VALUE_ERROR(
      squeeze(e, {1}), "(an expanded broadcast; pass squeeze_expanded=True)");
  EXPECT_EQ(extents(squeeze(e, {1}, true)->logical()), "2");
}

TEST(Slice, CutAxesMapToNothing) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({4, -1, 6}, {}, DataType::Float);
  Scalar* rows = x->logical()[1]->extent();
  TensorView* y = slice(
      x,
      {constant(&fusion, 1), constant(&fusion, 0), constant(&fusion, 0)},
      {constant(&fusion, 3), rows, constant(&fusion, 6)});
  EXPECT_EQ(extents(y->logical()), "2 i0 6");
  auto* op = dynamic_cast<SliceOp*>(y->definition());
  ASSERT_NE(op, nullptr);
  EXPECT_FALSE(op->isWhole(0));
  EXPECT_TRUE(op->isWhole(1));
  EXPECT_TRUE(op->isWhole(2));
  EXPECT_EQ(
      pairs(op->mapProducerToConsumer(x)),
      (AxisPairs{
          {x->logical()[1], y->logical()[1]},
          {x->logical()[2], y->logical()[2]}}));
  // The starts are operands, so that a symbolic one is bound at run time.
  EXPECT_EQ(op->starts().size(), 3u);
  EXPECT_EQ(op->inputs().size(), 4u);
}

TEST(Slice, Errors) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({2, 3}, {}, DataType::Float);
  auto c = [&](int64_t v) { return constant(&fusion, v); };
  EXPECT_VALUE_ERROR(
      slice(x, {c(0), c(0)}, {c(2), c(4)}),
      "slice: end 4 of dimension 1 is past its extent 3");
  EXPECT_VALUE_ERROR(
      slice(x, {c(-1), c(0)}, {c(2), c(3)}),
      "slice: start -1 of dimension 0 is negative");
  EXPECT_VALUE_ERROR(
      slice(x, {c(2), c(0)}, {c(1), c(3)}),
      "slice: end 1 of dimension 0 is before its start 2");
  EXPECT_VALUE_ERROR(
      slice(x, {c(0)}, {c(1)}),
      "slice: start_indices and end_indices need one entry per dimension");
  EXPECT_VALUE_ERROR(
      slice(x, {c(0), c(0)}, {c(2), c(3)}, {1, 2}),
      "slice: only strides of 1 are supported, got 2");
}

TEST(Cat, AddsTheExtentsAlongTheAxis) {
  Fusion fusion;
  TensorView* a = fusion.defineTensor({2, -1}, {}, DataType::Int);
  TensorView* b = fusion.defineTensor({2, 3}, {}, DataType::Int);
  TensorView* c = fusion.defineTensor({2, 5}, {}, DataType::Int);
  TensorView* y = cat({a, b, c}, -1);
  EXPECT_EQ(extents(y->logical()), "2 (i0 + 3) + 5");
  EXPECT_EQ(y->dtype(), DataType::Int);
  auto* op = dynamic_cast<CatOp*>(y->definition());
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->dim(), 1);
  for (TensorView* in : {a, b, c}) {
    EXPECT_EQ(
        pairs(op->mapProducerToConsumer(in)),
        (AxisPairs{{in->logical()[0], y->logical()[0]}}));
  }
  EXPECT_EQ(extents(cat({b, c}, 1)->logical()), "2 8");
}

TEST(Cat, Errors) {
  Fusion fusion;
  TensorView* a = fusion.defineTensor({2, 3}, {}, DataType::Float);
  TensorView* r1 = fusion.defineTensor({2}, {}, DataType::Float);
  TensorView* half = fusion.defineTensor({2, 3}, {}, DataType::Half);
  TensorView* wide = fusion.defineTensor({2, 4}, {}, DataType::Float);
  EXPECT_VALUE_ERROR(cat({}, 0), "cat: needs at least one tensor");
  EXPECT_VALUE_ERROR(
      cat({a, r1}, 0), "cat: tensor 1 has 1 dimensions but tensor 0 has 2");
  EXPECT_TYPE_ERROR(
      cat({a, half}, 0), "cat: tensor 1 has dtype Half but tensor 0 has Float");
  EXPECT_VALUE_ERROR(
      cat({a, wide}, 0),
      "cat: dimension 1 of tensor 0 and tensor 1 must match, got 3 and 4");
  EXPECT_VALUE_ERROR(cat({a, a}, 2), "cat: dimension 2 is out of range");
  EXPECT_TYPE_ERROR(cat({a, nullptr}, 0), "cat: tensor 1 must be a tensor");
}

} // namespace
} // namespace mdfuser
