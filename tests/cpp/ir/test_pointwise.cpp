// SPDX-License-Identifier: MIT
//
// Pointwise builders: torch's broadcasting (aligned at the last axis,
// extent-1 and broadcast axes stretch), torch's result dtypes, the axis
// map that lets shardings pass through, and the user errors.

#include <gtest/gtest.h>

#include "common/axis_map.h"
#include "common/expect_error.h"
#include "ir/fusion.h"
#include "ir/literal.h"
#include "ir/ops.h"

namespace mdfuser {
namespace {

using test::AxisPairs;
using test::definitionOf;
using test::extents;
using test::pairs;

TEST(Pointwise, UnaryKeepsTheShapeOnFreshAxes) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({-1, 1, 8}, {}, DataType::BFloat16);
  TensorView* y = unaryOp(OpType::Tanh, x);
  EXPECT_EQ(extents(y->logical()), "i0 b1 8");
  // As in nvFuser, Half and BFloat16 compute in Float and give Float.
  EXPECT_EQ(y->dtype(), DataType::Float);
  EXPECT_NE(y->logical()[0], x->logical()[0]);
  EXPECT_EQ(y->logical()[0]->extent(), x->logical()[0]->extent());
  auto* op = dynamic_cast<PointwiseOp*>(y->definition());
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->type(), OpType::Tanh);
  EXPECT_EQ(
      op->toString(),
      "T1_g_float[iS3{i0}, bS4{1}, iS5{8}]\n"
      "   = tanh(T0_g___bfloat[iS0{i0}, bS1{1}, iS2{8}])");
}

TEST(Pointwise, BinaryBroadcastsAlignedAtTheLastAxis) {
  Fusion fusion;
  TensorView* a = fusion.defineTensor({-1, 1, 4}, {}, DataType::Float);
  TensorView* b = fusion.defineTensor({3, 4}, {}, DataType::Float);
  TensorView* c = fusion.defineTensor({4}, {}, DataType::Float);
  EXPECT_EQ(extents(binaryOp(OpType::Add, a, b)->logical()), "i0 3 4");
  EXPECT_EQ(extents(binaryOp(OpType::Mul, c, a)->logical()), "i0 b1 4");
  EXPECT_EQ(extents(binaryOp(OpType::Mul, c, c)->logical()), "4");
  TensorView* s = fusion.defineTensor({}, {}, DataType::Float);
  EXPECT_EQ(extents(binaryOp(OpType::Sub, s, b)->logical()), "3 4");
  EXPECT_TRUE(fusion.extentConstraints().empty());
}

// nvFuser's rule (type_promotion.h): torch's promotion, scalars keeping
// their dtype, and arithmetic on Half and BFloat16 giving Float.
TEST(Pointwise, TheOutputDtypeIsNvFusers) {
  Fusion fusion;
  TensorView* i = fusion.defineTensor({2}, {}, DataType::Int);
  TensorView* i32 = fusion.defineTensor({2}, {}, DataType::Int32);
  TensorView* bf = fusion.defineTensor({2}, {}, DataType::BFloat16);
  TensorView* b = fusion.defineTensor({2}, {}, DataType::Bool);
  auto* half = fusion.create<Literal>(0.5, DataType::Double);
  auto* two = fusion.create<Literal>(int64_t{2}, DataType::Int);
  auto* two32 = fusion.create<Literal>(int64_t{2}, DataType::Int32);
  EXPECT_EQ(binaryOp(OpType::Add, i, half)->dtype(), DataType::Double);
  EXPECT_EQ(binaryOp(OpType::Mul, bf, half)->dtype(), DataType::Float);
  EXPECT_EQ(binaryOp(OpType::Add, bf, bf)->dtype(), DataType::Float);
  EXPECT_EQ(binaryOp(OpType::Maximum, bf, bf)->dtype(), DataType::Float);
  EXPECT_EQ(unaryOp(OpType::Neg, bf)->dtype(), DataType::Float);
  EXPECT_EQ(unaryOp(OpType::Gelu, bf)->dtype(), DataType::Float);
  EXPECT_EQ(unaryOp(OpType::Abs, bf)->dtype(), DataType::BFloat16);
  EXPECT_EQ(unaryOp(OpType::Relu, bf)->dtype(), DataType::BFloat16);
  EXPECT_EQ(unaryOp(OpType::Silu, bf)->dtype(), DataType::BFloat16);
  EXPECT_EQ(clamp(bf, half, nullptr)->dtype(), DataType::BFloat16);
  EXPECT_EQ(clamp(bf, half, half)->dtype(), DataType::BFloat16);
  EXPECT_EQ(binaryOp(OpType::Add, b, two)->dtype(), DataType::Int);
  EXPECT_EQ(binaryOp(OpType::Mul, i32, two32)->dtype(), DataType::Int32);
  EXPECT_EQ(binaryOp(OpType::Mul, i, two32)->dtype(), DataType::Int);
  EXPECT_EQ(binaryOp(OpType::Div, i, i32)->dtype(), DataType::Float);
  EXPECT_EQ(binaryOp(OpType::Lt, bf, half)->dtype(), DataType::Bool);
  EXPECT_EQ(binaryOp(OpType::Maximum, b, i32)->dtype(), DataType::Int32);
  EXPECT_EQ(unaryOp(OpType::Exp, i)->dtype(), DataType::Float);
  EXPECT_EQ(unaryOp(OpType::Abs, i32)->dtype(), DataType::Int32);
  EXPECT_EQ(binaryOp(OpType::Pow, b, two)->dtype(), DataType::Int);
  // An extent counts as an Int number.
  EXPECT_EQ(
      binaryOp(OpType::Div, bf, bf->logical()[0]->extent())->dtype(),
      DataType::Float);
  EXPECT_EQ(
      binaryOp(OpType::Mul, i32, i->logical()[0]->extent())->dtype(),
      DataType::Int32);
}

TEST(Pointwise, WhereAndCast) {
  Fusion fusion;
  TensorView* cond = fusion.defineTensor({3, 1}, {}, DataType::Bool);
  TensorView* x = fusion.defineTensor({4}, {}, DataType::Int);
  auto* half = fusion.create<Literal>(0.5, DataType::Double);
  TensorView* w = where(cond, x, half);
  // The condition broadcasts but takes no part in the promotion.
  EXPECT_EQ(extents(w->logical()), "3 4");
  EXPECT_EQ(w->dtype(), DataType::Double);
  EXPECT_EQ(where(cond, x, x)->dtype(), DataType::Int);
  // where keeps Half and BFloat16, as nvFuser's does.
  TensorView* h = fusion.defineTensor({4}, {}, DataType::Half);
  EXPECT_EQ(where(cond, h, h)->dtype(), DataType::Half);
  EXPECT_EQ(where(cond, h, half)->dtype(), DataType::Half);

  TensorView* c = cast(x, DataType::Half);
  EXPECT_EQ(c->dtype(), DataType::Half);
  EXPECT_EQ(
      definitionOf(c)->toString(),
      "T7_g___half[iS12{4}]\n"
      "   = cast(T1_g_int64_t[iS2{4}],\n"
      "          dtype=Half)");
}

TEST(Pointwise, LiteralsPrintAsOperands) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({4}, {}, DataType::Float);
  TensorView* y =
      binaryOp(OpType::Mul, x, fusion.create<Literal>(0.5, DataType::Float));
  EXPECT_EQ(
      definitionOf(y)->toString(),
      "T1_g_float[iS1{4}]\n"
      "   = mul(T0_g_float[iS0{4}],\n"
      "         float(0.5))");
}

TEST(Pointwise, ExpandedBroadcastsStayBroadcastOrMeetTheirExtent) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({1, 4}, {}, DataType::Float);
  TensorView* y = fusion.defineTensor({-1, 4}, {}, DataType::Float);
  TensorView* e = broadcastInDim(
      x, {y->logical()[0]->extent(), constant(&fusion, 4)}, {0, 1});
  EXPECT_EQ(extents(unaryOp(OpType::Neg, e)->logical()), "b{1 ex i0} 4");
  EXPECT_EQ(extents(binaryOp(OpType::Add, e, y)->logical()), "i0 4");
  EXPECT_TRUE(fusion.extentConstraints().empty());
}

TEST(Pointwise, BroadcastOperandAxesMapToNothing) {
  Fusion fusion;
  TensorView* a = fusion.defineTensor({-1, 1, 4}, {}, DataType::Float);
  TensorView* b = fusion.defineTensor({3, 4}, {}, DataType::Float);
  TensorView* out = binaryOp(OpType::Add, a, b);
  const std::vector<IterDomain*>& o = out->logical();
  TensorOp* op = definitionOf(out);
  // a's broadcast axis 1 meets b's 3: no sharding flows from it.
  EXPECT_EQ(
      pairs(op->mapProducerToConsumer(a)),
      (AxisPairs{{a->logical()[0], o[0]}, {a->logical()[2], o[2]}}));
  EXPECT_EQ(
      pairs(op->mapProducerToConsumer(b)),
      (AxisPairs{{b->logical()[0], o[1]}, {b->logical()[1], o[2]}}));

  // Where every operand broadcasts, the broadcast axes map to each other.
  TensorView* n = unaryOp(OpType::Neg, a);
  EXPECT_EQ(pairs(definitionOf(n)->mapProducerToConsumer(a)).size(), 3u);
}

TEST(Pointwise, SymbolicExtentsThatMustMatchBecomeConstraints) {
  Fusion fusion;
  TensorView* a = fusion.defineTensor({-1, 4}, {}, DataType::Float);
  TensorView* b = fusion.defineTensor({-1, 4}, {}, DataType::Float);
  binaryOp(OpType::Add, a, b);
  ASSERT_EQ(fusion.extentConstraints().size(), 1u);
  EXPECT_EQ(fusion.extentConstraints()[0].lhs, a->logical()[0]->extent());
  EXPECT_EQ(fusion.extentConstraints()[0].rhs, b->logical()[0]->extent());
  EXPECT_EQ(
      fusion.extentConstraints()[0].what,
      "add: the extents of broadcast dimension 0 of the operands");
}

TEST(Pointwise, RecreateKeepsTheLiteral) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({4}, {}, DataType::Float);
  auto* two = fusion.create<Literal>(2.0, DataType::Double);
  TensorView* y = binaryOp(OpType::Pow, x, two);
  TensorView* x2 = set(x);
  TensorView* y2 = set(y);
  TensorOp* copy = definitionOf(y)->withTensors({y2}, {x2});
  EXPECT_EQ(copy->type(), OpType::Pow);
  EXPECT_EQ(copy->inputs(), (std::vector<Val*>{x2, two}));
  EXPECT_EQ(copy->out(), y2);
}

// ------------------------------------------------------------------ errors

TEST(Pointwise, ShapeMismatchIsAValueError) {
  Fusion fusion;
  TensorView* a = fusion.defineTensor({2, 3}, {}, DataType::Float);
  TensorView* b = fusion.defineTensor({4, 3}, {}, DataType::Float);
  EXPECT_VALUE_ERROR(
      binaryOp(OpType::Add, a, b),
      "add: the extents of broadcast dimension 0 of the operands must match, "
      "got 2 and 4");
}

TEST(Pointwise, DtypesTorchRefusesAreTypeErrors) {
  Fusion fusion;
  TensorView* b = fusion.defineTensor({2}, {}, DataType::Bool);
  TensorView* i = fusion.defineTensor({2}, {}, DataType::Int);
  auto* one = fusion.create<Literal>(int64_t{1}, DataType::Int);
  auto* yes = fusion.create<Literal>(true, DataType::Bool);
  EXPECT_TYPE_ERROR(unaryOp(OpType::Neg, b), "neg does not take Bool operands");
  EXPECT_TYPE_ERROR(unaryOp(OpType::Relu, b), "relu does not take Bool");
  EXPECT_TYPE_ERROR(binaryOp(OpType::Pow, b, b), "pow does not take Bool");
  EXPECT_TYPE_ERROR(
      unaryOp(OpType::Silu, i),
      "silu takes floating-point operands only, got Int; cast them first");
  EXPECT_TYPE_ERROR(unaryOp(OpType::GeluTanh, b), "gelu_tanh takes floating");
  // sub refuses a Bool operand even when the promotion makes it an Int.
  EXPECT_TYPE_ERROR(
      binaryOp(OpType::Sub, b, one),
      "sub does not take Bool operands (as in torch), got operand 0 T0");
  EXPECT_TYPE_ERROR(
      binaryOp(OpType::Sub, i, yes),
      "sub does not take Bool operands (as in torch), got operand 1 true");
  EXPECT_TYPE_ERROR(
      where(i, i, i), "where: the condition must be Bool, got Int");
  EXPECT_TYPE_ERROR(
      cast(i, DataType::Null), "cast: the target dtype must not be Null");
}

TEST(Pointwise, ScalarsAloneGiveAZeroDimensionalTensor) {
  // As nvfuser_direct's scalar operations: the result of scalars alone is
  // 0-dimensional, their dtypes promoted as tensors' (a Double stays
  // Double, an Int under exp becomes Float).
  Fusion fusion;
  auto* half = fusion.create<Literal>(DataType::Double);
  auto* one = fusion.create<Literal>(int64_t{1}, DataType::Int);
  TensorView* r = unaryOp(OpType::Reciprocal, half);
  EXPECT_TRUE(r->logicalNoReductions().empty());
  EXPECT_EQ(r->dtype(), DataType::Double);
  EXPECT_EQ(binaryOp(OpType::Add, one, one)->dtype(), DataType::Int);
  EXPECT_EQ(unaryOp(OpType::Exp, one)->dtype(), DataType::Float);
  TensorView* x = fusion.defineTensor({2, 3}, {}, DataType::BFloat16);
  // A 0-dimensional tensor does not promote a tensor with dimensions; the
  // product is Float as any arithmetic on BFloat16.
  TensorView* y = binaryOp(OpType::Mul, x, r);
  EXPECT_EQ(y->dtype(), DataType::Float);
  EXPECT_EQ(
      where(binaryOp(OpType::Lt, x, r), x, r)->dtype(), DataType::BFloat16);
  EXPECT_EQ(y->logicalNoReductions().size(), 2);
}

TEST(Pointwise, OperandErrors) {
  Fusion fusion;
  Fusion other;
  TensorView* x = fusion.defineTensor({2}, {}, DataType::Float);
  TensorView* y = other.defineTensor({2}, {}, DataType::Float);
  EXPECT_TYPE_ERROR(
      binaryOp(OpType::Add, x, nullptr),
      "add: operand 1 must be a tensor or a scalar, got None");
  EXPECT_VALUE_ERROR(
      binaryOp(OpType::Add, x, y),
      "add: T0_g_float[iS0{2}] belongs to another fusion than "
      "T0_g_float[iS0{2}]");
  EXPECT_INTERNAL_ERROR(binaryOp(OpType::Neg, x, x), "neg is not binary");
}

TEST(Pointwise, NoOperationAfterTheFusionRan) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({2}, {}, DataType::Float);
  fusion.freeze();
  EXPECT_VALUE_ERROR(
      unaryOp(OpType::Exp, x), "exp: the fusion has already been executed");
}

} // namespace
} // namespace mdfuser
