// SPDX-License-Identifier: MIT
//
// Literals: typed constants that take part in type promotion like Python
// numbers. They check that their dtype can hold their value and print
// the dtype only when it is not the default of the value's kind.

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "ir/fusion.h"
#include "ir/literal.h"
#include "ir/ops.h"

namespace mdfuser {
namespace {

TEST(Literal, DefaultDtypesAreThoseOfPythonNumbers) {
  EXPECT_EQ(defaultDtype(true), DataType::Bool);
  EXPECT_EQ(defaultDtype(int64_t{3}), DataType::Int);
  EXPECT_EQ(defaultDtype(0.5), DataType::Double);
}

TEST(Literal, PrintsItsDtypeOnlyWhenNotTheDefault) {
  Fusion fusion;
  EXPECT_EQ(fusion.create<Literal>(0.5, DataType::Double)->toString(), "0.5");
  EXPECT_EQ(fusion.create<Literal>(2.0, DataType::Double)->toString(), "2.0");
  EXPECT_EQ(fusion.create<Literal>(int64_t{3}, DataType::Int)->toString(), "3");
  EXPECT_EQ(fusion.create<Literal>(true, DataType::Bool)->toString(), "true");
  EXPECT_EQ(
      fusion.create<Literal>(0.5, DataType::Float)->toString(), "float(0.5)");
  EXPECT_EQ(
      fusion.create<Literal>(int64_t{3}, DataType::Int32)->toString(),
      "int(3)");
  EXPECT_EQ(
      fusion.create<Literal>(1e20, DataType::Double)->toString(), "1e+20");
  EXPECT_EQ(
      fusion.create<Literal>(-0.25, DataType::BFloat16)->toString(),
      "__bfloat(-0.25)");
}

TEST(Literal, PrintsNonFiniteValues) {
  Fusion fusion;
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(fusion.create<Literal>(inf, DataType::Double)->toString(), "inf");
  EXPECT_EQ(fusion.create<Literal>(-inf, DataType::Double)->toString(), "-inf");
  EXPECT_EQ(
      fusion.create<Literal>(std::nan(""), DataType::Double)->toString(),
      "nan");
}

TEST(Literal, AnIntegerGivenAFloatingDtypeBecomesAFloat) {
  Fusion fusion;
  auto* literal = fusion.create<Literal>(int64_t{2}, DataType::Double);
  ASSERT_TRUE(std::holds_alternative<double>(literal->value()));
  EXPECT_EQ(std::get<double>(literal->value()), 2.0);
  EXPECT_EQ(literal->toString(), "2.0");
  EXPECT_EQ(
      fusion.create<Literal>(int64_t{2}, DataType::Half)->toString(),
      "__half(2.0)");
}

TEST(Literal, AsDouble) {
  Fusion fusion;
  EXPECT_EQ(fusion.create<Literal>(true, DataType::Bool)->asDouble(), 1.0);
  EXPECT_EQ(fusion.create<Literal>(false, DataType::Bool)->asDouble(), 0.0);
  EXPECT_EQ(
      fusion.create<Literal>(int64_t{-7}, DataType::Int)->asDouble(), -7.0);
  EXPECT_EQ(fusion.create<Literal>(0.25, DataType::Float)->asDouble(), 0.25);
}

TEST(Literal, ADtypeThatCannotHoldTheValueIsATypeError) {
  Fusion fusion;
  EXPECT_TYPE_ERROR(
      fusion.create<Literal>(true, DataType::Int),
      "define_scalar: true cannot be a Int; expected a value of its kind");
  EXPECT_TYPE_ERROR(
      fusion.create<Literal>(int64_t{2}, DataType::Bool),
      "define_scalar: 2 cannot be a Bool");
  EXPECT_TYPE_ERROR(
      fusion.create<Literal>(0.5, DataType::Int32),
      "define_scalar: 0.5 cannot be a Int32");
  EXPECT_TYPE_ERROR(
      fusion.create<Literal>(0.5, DataType::Null),
      "define_scalar: 0.5 cannot be a Null");
}

TEST(Literal, NamesCountLiteralsApartFromTensors) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({4}, {}, DataType::Float);
  auto* a = fusion.create<Literal>(0.5, DataType::Double);
  auto* b = fusion.create<Literal>(0.5, DataType::Double);
  EXPECT_EQ(a->name(), 0);
  EXPECT_EQ(b->name(), 1);
  TensorView* y = binaryOp(OpType::Mul, x, a);
  EXPECT_EQ(y->toString(), "T1_g_float[iS1{4}]");
}

TEST(Literal, ACloneKeepsValueAndDtype) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({4}, {}, DataType::Int);
  fusion.addOutput(binaryOp(
      OpType::Add, x, fusion.create<Literal>(int64_t{3}, DataType::Int32)));
  const std::unique_ptr<Fusion> copy = fusion.clone();
  EXPECT_EQ(copy->toString(), fusion.toString());
  EXPECT_NE(fusion.toString().find("int(3)"), std::string::npos)
      << fusion.toString();
}

TEST(Literal, AScalarInputIsSymbolicAndClonedInItsPlace) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({4}, {}, DataType::Float);
  Literal* a = fusion.defineScalarInput(DataType::Double);
  Literal* n = fusion.defineScalarInput(DataType::Int32);
  EXPECT_TRUE(a->isSymbolic());
  EXPECT_FALSE(fusion.create<Literal>(0.5, DataType::Double)->isSymbolic());
  EXPECT_EQ(a->toString(), "s" + std::to_string(a->name()));
  EXPECT_EQ(n->toString(), "int(s" + std::to_string(n->name()) + ")");
  EXPECT_INTERNAL_ERROR(a->value(), "has no value here");
  EXPECT_INTERNAL_ERROR(a->asDouble(), "has no value here");
  EXPECT_EQ(fusion.inputs(), (std::vector<TensorView*>{x}));
  EXPECT_EQ(fusion.scalarInputs(), (std::vector<Literal*>{a, n}));
  EXPECT_EQ(fusion.allInputs(), (std::vector<Val*>{x, a, n}));
  EXPECT_TRUE(fusion.isInput(a));
  fusion.addOutput(binaryOp(OpType::Mul, x, a));

  const std::unique_ptr<Fusion> copy = fusion.clone();
  EXPECT_EQ(copy->toString(), fusion.toString());
  ASSERT_EQ(copy->allInputs().size(), 3u);
  EXPECT_EQ(copy->allInputs()[1], copy->scalarInputs()[0]);
  EXPECT_TRUE(copy->scalarInputs()[0]->isSymbolic());
  EXPECT_EQ(copy->scalarInputs()[1]->dtype(), DataType::Int32);
  EXPECT_EQ(
      copy->outputs()[0]->definition()->inputs()[1], copy->allInputs()[1]);
}

TEST(Literal, AScalarInputHoldsBoolsIntegersOrFloats) {
  Fusion fusion;
  EXPECT_TYPE_ERROR(
      fusion.defineScalarInput(DataType::UInt64),
      "a scalar input cannot be a UInt64");
  fusion.defineTensor({4}, {}, DataType::Float);
  fusion.freeze();
  EXPECT_VALUE_ERROR(
      fusion.defineScalarInput(DataType::Double), "already been executed");
}

TEST(Literal, FitsAndAsFollowTheDtypesKind) {
  EXPECT_TRUE(Literal::fits(true, DataType::Bool));
  EXPECT_FALSE(Literal::fits(true, DataType::Int));
  EXPECT_TRUE(Literal::fits(int64_t{2}, DataType::Float));
  EXPECT_FALSE(Literal::fits(2.5, DataType::Int));
  EXPECT_FALSE(Literal::fits(int64_t{1}, DataType::Bool));
  EXPECT_EQ(std::get<double>(Literal::as(int64_t{2}, DataType::Double)), 2.0);
  EXPECT_EQ(std::get<int64_t>(Literal::as(int64_t{2}, DataType::Int)), 2);
}

} // namespace
} // namespace mdfuser
