// SPDX-License-Identifier: MIT
//
// Creation operations: full, iota, uniform and normal take parameters and a
// global shape, no tensors; their builders refuse bad dtypes and constants
// with user errors naming the operation and the value.

#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "ir/fusion.h"
#include "ir/literal.h"
#include "ir/ops.h"

namespace mdfuser {
namespace {

Literal* number(Fusion& fusion, double value) {
  return fusion.create<Literal>(value, DataType::Double);
}

TEST(Creation, FullHasTheShapeAndDtypeAndNoTensorOperands) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({-1}, {}, DataType::Float);
  Scalar* rows = x->logical()[0]->extent();
  TensorView* out = full(
      &fusion,
      {rows, constant(&fusion, 3)},
      number(fusion, 0.5),
      DataType::BFloat16);
  EXPECT_EQ(out->dtype(), DataType::BFloat16);
  ASSERT_EQ(out->logical().size(), 2u);
  EXPECT_EQ(out->logical()[0]->extent(), rows);
  EXPECT_EQ(out->logical()[1]->extent()->value(), 3);
  auto* op = dynamic_cast<CreationOp*>(out->definition());
  ASSERT_NE(op, nullptr);
  EXPECT_TRUE(op->tensorInputs().empty());
  EXPECT_FALSE(op->dependsOnPosition());
  EXPECT_EQ(opInfo(op->type()).family, OpFamily::kCreation);
}

TEST(Creation, IotaDefaultsToStartZeroStepOne) {
  Fusion fusion;
  TensorView* out =
      iota(&fusion, constant(&fusion, 5), nullptr, nullptr, DataType::Int);
  auto* op = static_cast<CreationOp*>(out->definition());
  EXPECT_EQ(op->input(0)->toString(), "0");
  EXPECT_EQ(op->input(1)->toString(), "1");
  EXPECT_TRUE(op->dependsOnPosition());
}

TEST(Creation, ASeedIsPrintedWithTheOperation) {
  Fusion fusion;
  TensorView* out = uniform(
      &fusion,
      number(fusion, 0),
      number(fusion, 1),
      {constant(&fusion, 4)},
      DataType::Float,
      RngSeed{
          fusion.create<Literal>(int64_t{7}, DataType::Int),
          fusion.create<Literal>(int64_t{2}, DataType::Int)});
  const std::string printed = out->definition()->toString();
  EXPECT_NE(printed.find("= uniform(0.0,"), std::string::npos) << printed;
  EXPECT_NE(printed.find("rng_seed=7"), std::string::npos) << printed;
  EXPECT_NE(printed.find("rng_offset=2"), std::string::npos) << printed;
}

TEST(Creation, ASeedOfScalarInputsIsReadWhenTheOperationRuns) {
  // The seed's values follow the parameters among the inputs (the
  // evaluator reads them as it reads any scalar operand), print as
  // attributes, and survive a clone.
  Fusion fusion;
  Literal* seed = fusion.defineScalarInput(DataType::Int);
  Literal* offset = fusion.defineScalarInput(DataType::Int32);
  TensorView* out = normal(
      &fusion,
      number(fusion, 0),
      number(fusion, 1),
      {constant(&fusion, 4)},
      DataType::Float,
      RngSeed{seed, offset});
  fusion.addOutput(out);
  auto* op = static_cast<CreationOp*>(out->definition());
  EXPECT_EQ(op->inputs().size(), 4u);
  EXPECT_EQ(op->seedIndex(), 2u);
  EXPECT_EQ(op->rng()->seed, seed);
  EXPECT_EQ(op->rng()->offset, offset);
  const std::string printed = op->toString();
  EXPECT_NE(
      printed.find("rng_seed=" + seed->toString() + ",\n"), std::string::npos)
      << printed;
  // Only there, not also among the operands.
  EXPECT_EQ(printed.find(seed->toString()), printed.rfind(seed->toString()))
      << printed;
  const std::unique_ptr<Fusion> copy = fusion.clone();
  EXPECT_EQ(copy->toString(), fusion.toString());
  const auto* cloned =
      static_cast<const CreationOp*>(copy->outputs()[0]->definition());
  EXPECT_EQ(cloned->rng()->seed, copy->scalarInputs()[0]);

  EXPECT_TYPE_ERROR(
      uniform(
          &fusion,
          number(fusion, 0),
          number(fusion, 1),
          {constant(&fusion, 4)},
          DataType::Float,
          RngSeed{fusion.defineScalarInput(DataType::Double), offset}),
      "uniform: rng_seed must be an integer scalar");
}

TEST(Creation, BadArgumentsAreUserErrors) {
  Fusion fusion;
  Scalar* four = constant(&fusion, 4);
  EXPECT_TYPE_ERROR(
      uniform(
          &fusion,
          number(fusion, 0),
          number(fusion, 1),
          {four},
          DataType::Int,
          std::nullopt),
      "uniform: dtype must be a floating-point type");
  EXPECT_VALUE_ERROR(
      normal(
          &fusion,
          number(fusion, 0),
          number(fusion, -2),
          {four},
          DataType::Float,
          std::nullopt),
      "normal: std is -2; expected std >= 0");
  EXPECT_VALUE_ERROR(
      full(
          &fusion, {constant(&fusion, -1)}, number(fusion, 0), DataType::Float),
      "full: shape[0] is -1");
  EXPECT_TYPE_ERROR(
      iota(&fusion, four, nullptr, nullptr, DataType::Bool),
      "iota: dtype must be an integer or floating-point type, got Bool");
  TensorView* x = fusion.defineTensor({2}, {}, DataType::Float);
  EXPECT_TYPE_ERROR(
      full(&fusion, {four}, x, DataType::Float),
      "full: operand 1 must be a number");
  Fusion other;
  EXPECT_VALUE_ERROR(
      full(&fusion, {constant(&other, 2)}, number(fusion, 0), DataType::Float),
      "belongs to another fusion");
}

} // namespace
} // namespace mdfuser
