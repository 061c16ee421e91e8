// SPDX-License-Identifier: MIT
//
// Scalars are the integers of the IR: extents, split factors, loop indices.
// Builders fold constants and drop identities so that printed extents stay
// readable; ScalarEvaluator gives symbolic ones a value at run time.

#include <algorithm>

#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "ir/container.h"
#include "ir/scalar.h"
#include "ir/scalar_eval.h"

namespace mdfuser {
namespace {

TEST(Scalar, ConstantsFoldAndPrintTheirValue) {
  IrContainer ir;
  Scalar* six = mul(constant(&ir, 2), constant(&ir, 3));
  ASSERT_TRUE(six->isConst());
  EXPECT_EQ(six->value(), 6);
  EXPECT_EQ(six->toString(), "6");
  EXPECT_EQ(ceilDiv(constant(&ir, 7), constant(&ir, 2))->value(), 4);
  EXPECT_EQ(sub(constant(&ir, 7), constant(&ir, 9))->value(), -2);
  EXPECT_EQ(min(constant(&ir, 7), constant(&ir, 9))->value(), 7);
  EXPECT_EQ(max(constant(&ir, 7), constant(&ir, 9))->value(), 9);
}

TEST(Scalar, SymbolsAreNamedInCreationOrderApartFromOtherScalars) {
  IrContainer ir;
  constant(&ir, 5);
  Scalar* a = symbol(&ir);
  Scalar* sum = add(a, constant(&ir, 1));
  Scalar* b = symbol(&ir);
  EXPECT_EQ(a->role(), Scalar::Role::kSymbol);
  EXPECT_EQ(sum->role(), Scalar::Role::kDerived);
  // Constants and derived scalars do not use up symbol names.
  EXPECT_EQ(a->toString(), "i0");
  EXPECT_EQ(b->toString(), "i1");
  EXPECT_FALSE(a->constValue().has_value());
}

TEST(Scalar, BuildersDropIdentities) {
  IrContainer ir;
  Scalar* x = symbol(&ir);
  Scalar* zero = constant(&ir, 0);
  Scalar* one = constant(&ir, 1);
  EXPECT_EQ(add(x, zero), x);
  EXPECT_EQ(add(zero, x), x);
  EXPECT_EQ(sub(x, zero), x);
  EXPECT_EQ(mul(x, one), x);
  EXPECT_EQ(mul(one, x), x);
  EXPECT_EQ(div(x, one), x);
  EXPECT_EQ(ceilDiv(x, one), x);
  EXPECT_EQ(min(x, x), x);
  EXPECT_EQ(max(x, x), x);
}

TEST(Scalar, DerivedScalarsPrintAsExpressions) {
  IrContainer ir;
  Scalar* i0 = symbol(&ir);
  Scalar* i1 = symbol(&ir);
  Scalar* three = constant(&ir, 3);
  EXPECT_EQ(ceilDiv(i0, three)->toString(), "ceilDiv(i0, 3)");
  EXPECT_EQ(mul(add(i0, three), i1)->toString(), "(i0 + 3) * i1");
  EXPECT_EQ(min(i0, sub(i1, three))->toString(), "min(i0, i1 - 3)");

  Scalar* q = div(i0, i1);
  auto* op = dynamic_cast<ScalarOp*>(q->definition());
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->type(), ScalarOpType::Div);
  EXPECT_EQ(op->lhs(), i0);
  EXPECT_EQ(op->rhs(), i1);
  EXPECT_EQ(op->out(), q);
  ASSERT_EQ(i0->uses().size(), 4u);
  EXPECT_EQ(i0->uses().back(), op);
}

TEST(Scalar, EvaluateFollowsIntegerSemantics) {
  EXPECT_EQ(evaluate(ScalarOpType::Div, -7, 2), -3) << "rounds towards zero";
  EXPECT_EQ(evaluate(ScalarOpType::CeilDiv, 7, 2), 4);
  EXPECT_EQ(evaluate(ScalarOpType::CeilDiv, 8, 2), 4);
  EXPECT_EQ(evaluate(ScalarOpType::Mod, 7, 3), 1);
  EXPECT_EQ(evaluate(ScalarOpType::Sub, 3, 7), -4);
  EXPECT_INTERNAL_ERROR(
      evaluate(ScalarOpType::CeilDiv, 1, 0), "division by zero");
}

TEST(Scalar, ValueOfASymbolIsAnInternalError) {
  IrContainer ir;
  Scalar* x = symbol(&ir);
  EXPECT_INTERNAL_ERROR(x->value(), "i0 is not a constant");
}

TEST(ScalarEvaluator, EvaluatesExpressionsOfBoundSymbols) {
  IrContainer ir;
  Scalar* extent = symbol(&ir);
  Scalar* index = symbol(&ir);
  Scalar* chunk = ceilDiv(extent, constant(&ir, 3));
  Scalar* start = mul(index, chunk);

  ScalarEvaluator eval;
  eval.bind(extent, 10);
  EXPECT_TRUE(eval.isBound(extent));
  EXPECT_FALSE(eval.isBound(index));
  EXPECT_EQ(eval.evaluate(chunk), 4);
  EXPECT_EQ(eval.tryEvaluate(start), std::nullopt);

  eval.bind(index, 2);
  EXPECT_EQ(eval.evaluate(start), 8);
  EXPECT_EQ(eval.evaluate(constant(&ir, 42)), 42);
}

TEST(ScalarEvaluator, RebindingASymbolChangesWhatDependsOnIt) {
  IrContainer ir;
  Scalar* extent = symbol(&ir);
  Scalar* index = symbol(&ir);
  Scalar* chunk = ceilDiv(extent, constant(&ir, 4));
  Scalar* start = min(mul(index, chunk), extent);
  Scalar* length = min(chunk, sub(extent, start));

  ScalarEvaluator eval;
  eval.bind(extent, 10);
  for (int64_t i = 0; i < 4; ++i) {
    eval.bind(index, i);
    EXPECT_EQ(eval.evaluate(start), std::min<int64_t>(3 * i, 10));
    EXPECT_EQ(eval.evaluate(length), i < 3 ? 3 : 1) << "index " << i;
  }
  // A new extent changes what depends on it, the chunk included.
  eval.bind(extent, 20);
  EXPECT_EQ(eval.evaluate(chunk), 5);
  EXPECT_EQ(eval.evaluate(start), 15);
  EXPECT_EQ(eval.evaluate(length), 5);

  // A copy evaluates on its own bindings.
  ScalarEvaluator copy = eval;
  copy.bind(index, 0);
  EXPECT_EQ(copy.evaluate(start), 0);
  EXPECT_EQ(eval.evaluate(start), 15);
}

TEST(ScalarEvaluator, UnboundSymbolsAndNonSymbolsAreInternalErrors) {
  IrContainer ir;
  Scalar* x = symbol(&ir);
  Scalar* y = add(x, constant(&ir, 1));
  ScalarEvaluator eval;
  EXPECT_INTERNAL_ERROR(eval.evaluate(y), "cannot evaluate i0 + 1");
  EXPECT_INTERNAL_ERROR(eval.bind(y, 3), "only free symbols can be bound");
  EXPECT_INTERNAL_ERROR(
      eval.bind(constant(&ir, 3), 3), "only free symbols can be bound");
}

} // namespace
} // namespace mdfuser
