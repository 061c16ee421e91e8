// SPDX-License-Identifier: MIT
//
// A Fusion owns the tensors and operations of one program on global shapes.
// Its operations are listed producers first, starting from the outputs; its
// text form is deterministic, and a clone prints exactly like the original.

#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "common/row_parallel.h"
#include "ir/fusion.h"
#include "ir/ops.h"

namespace mdfuser {
namespace {

// Passes when each of `expected` occurs in a line of `text`, in order, each
// in a later line than the previous one.
::testing::AssertionResult containsLinesInOrder(
    const std::string& text, const std::vector<std::string>& expected) {
  std::istringstream lines(text);
  size_t next = 0;
  for (std::string line; next < expected.size() && std::getline(lines, line);) {
    if (line.find(expected[next]) != std::string::npos) {
      ++next;
    }
  }
  if (next == expected.size()) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "no line containing \"" << expected[next] << "\" (after the lines "
         << "matched before it) in:\n"
         << text;
}

TEST(Fusion, ExprsListsProducersBeforeConsumersOnce) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({8, 8}, {}, DataType::Float);
  TensorView* a = set(x);
  TensorView* b = set(a);
  TensorView* c = matmul(a, b); // a is used twice
  set(x);                       // dead: no output depends on it
  fusion.addOutput(c);

  const std::vector<TensorOp*> exprs = fusion.exprs();
  ASSERT_EQ(exprs.size(), 3u);
  EXPECT_EQ(exprs[0]->out(), a);
  EXPECT_EQ(exprs[1]->out(), b);
  EXPECT_EQ(exprs[2]->out(), c);
  EXPECT_EQ(exprs[2]->opName(), "matmul");
  EXPECT_EQ(fusion.allTensors(), (std::vector<TensorView*>{x, a, b, c}));
  EXPECT_TRUE(fusion.isInput(x));
  EXPECT_FALSE(fusion.isInput(a));
  EXPECT_TRUE(fusion.isOutput(c));
  EXPECT_FALSE(fusion.isOutput(b));
}

TEST(Fusion, DefineTensorChecksItsArguments) {
  Fusion fusion;
  EXPECT_VALUE_ERROR(
      fusion.defineTensor({4, 8}, {true}, DataType::Float),
      "contiguity has 1 entries but shape has 2 axes");
  EXPECT_VALUE_ERROR(
      fusion.defineTensor({4, -2}, {}, DataType::Float),
      "axis 1 has extent -2");
  EXPECT_TRUE(fusion.inputs().empty());
  fusion.freeze();
  EXPECT_VALUE_ERROR(
      fusion.defineTensor({4}, {}, DataType::Float),
      "cannot define a tensor in a fusion that has already been executed");
}

TEST(Fusion, AddOutputChecksItsArgument) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({4}, {}, DataType::Float);
  TensorView* y = set(x);
  EXPECT_TYPE_ERROR(fusion.addOutput(nullptr), "expected a tensor, got None");
  fusion.addOutput(y);
  EXPECT_VALUE_ERROR(fusion.addOutput(y), "T1_g_float[iS1{4}] is already an");

  Fusion other;
  TensorView* foreign = set(other.defineTensor({4}, {}, DataType::Float));
  EXPECT_VALUE_ERROR(fusion.addOutput(foreign), "belongs to another fusion");
  TensorView* z = set(x);
  fusion.freeze();
  EXPECT_VALUE_ERROR(fusion.addOutput(z), "cannot add an output");
  EXPECT_VALUE_ERROR(set(x), "the fusion has already been executed");
  EXPECT_EQ(fusion.outputs(), std::vector<TensorView*>{y});
}

TEST(Fusion, OperationsRefuseExtentsOfAnotherFusion) {
  Fusion fusion;
  Fusion other;
  TensorView* x = fusion.defineTensor({-1, 4}, {}, DataType::Float);
  TensorView* row = fusion.defineTensor({4}, {}, DataType::Float);
  Scalar* n = other.defineTensor({-1}, {}, DataType::Float)->axis(0)->extent();
  Scalar* four = x->axis(1)->extent();
  EXPECT_VALUE_ERROR(
      reshape(x, {n, four}), "reshape: i0 belongs to another fusion");
  EXPECT_VALUE_ERROR(
      broadcastInDim(row, {n, four}, {1}),
      "broadcast_in_dim: i0 belongs to another fusion");
  EXPECT_VALUE_ERROR(
      slice(x, {constant(&fusion, 0), constant(&fusion, 0)}, {n, four}, {}),
      "slice: i0 belongs to another fusion");
}

TEST(Fusion, EveryOperationRefusesOperandsOfAnotherFusion) {
  // Whatever builds an operation, registering it checks its operands.
  Fusion fusion;
  Fusion other;
  TensorView* x = fusion.defineTensor({4}, {}, DataType::Float);
  TensorView* foreign = other.defineTensor({4}, {}, DataType::Float);
  TensorView* out = set(x);
  auto* op = fusion.create<LoadStoreOp>(out, foreign);
  EXPECT_VALUE_ERROR(
      op->registerAsDefinition(),
      "set: operand 0 T0_g_float[iS0{4}] belongs to another fusion");
  EXPECT_EQ(out->definition(), x->uses().front());
}

TEST(Fusion, AnInputCanBeAnOutput) {
  // As in nvFuser: the output is the input itself.
  Fusion fusion;
  TensorView* x = fusion.defineTensor({4}, {}, DataType::Float);
  fusion.addOutput(x);
  EXPECT_TRUE(fusion.isInput(x));
  EXPECT_TRUE(fusion.isOutput(x));
  EXPECT_TRUE(fusion.exprs().empty());
}

TEST(Fusion, FusionOfFindsTheOwner) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({4}, {}, DataType::Float);
  EXPECT_EQ(fusionOf(x), &fusion);
  IrContainer plain;
  EXPECT_INTERNAL_ERROR(fusionOf(symbol(&plain)), "i0 is not in a Fusion");
}

TEST(Fusion, ToStringListsInputsOutputsTransformsAndOperations) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({-1, 8}, {}, DataType::Float);
  x->outerSplit(0, 2);
  fusion.addOutput(set(x));
  const std::string text = fusion.toString();
  EXPECT_TRUE(containsLinesInOrder(
      text,
      {"%Fusion {",
       "inputs:",
       "  T0_g_float[iS2{2}, iS3{ceilDiv(i0, 2)}, iS1{8}]",
       "outputs:",
       "  T1_g_float[iS4{i0}, iS5{8}]",
       "transforms:",
       "    logical: [iS0{i0}, iS1{8}]",
       "      Outer split: iS0{i0} by factor 2 -> iS2{2}, iS3{ceilDiv(i0, 2)}",
       "    loop: [iS2{2}, iS3{ceilDiv(i0, 2)}, iS1{8}]",
       "    logical: [iS4{i0}, iS5{8}]",
       "operations:",
       "  T1_g_float[iS4{i0}, iS5{8}]",
       "     = set(T0_g_float[iS2{2}, iS3{ceilDiv(i0, 2)}, iS1{8}])",
       "} // %Fusion"}));
  EXPECT_EQ(text, fusion.toString()) << "printing is deterministic";
}

TEST(Fusion, ToStringShowsTheRootOfRFactoredTensors) {
  Fusion fusion;
  auto* root = fusion.create<IterDomain>(constant(&fusion, 8));
  auto [outer, inner] = split(root, constant(&fusion, 2), false);
  auto* tv = fusion.create<TensorView>(
      std::vector<IterDomain*>{outer, inner}, DataType::Float);
  tv->setDomains({root}, {outer, inner}, {outer, inner});
  fusion.addInput(tv);
  EXPECT_TRUE(containsLinesInOrder(
      fusion.toString(),
      {"    root: [iS0{8}]",
       "      Outer split: iS0{8} by factor 2 -> iS1{2}, iS2{4}",
       "    logical: [iS1{2}, iS2{4}]",
       "    loop: [iS1{2}, iS2{4}]"}));
}

TEST(Fusion, CloneKeepsNamesAndPrintsTheSame) {
  auto fusion = test::makeRowParallelLinear(/*h=*/4, /*d=*/2, /*s=*/3);
  fusion->freeze();
  std::unique_ptr<Fusion> copy = fusion->clone();
  EXPECT_EQ(copy->toString(), fusion->toString());
  EXPECT_FALSE(copy->isFrozen());

  ASSERT_EQ(copy->inputs().size(), 2u);
  ASSERT_EQ(copy->outputs().size(), 1u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_NE(copy->inputs()[i], fusion->inputs()[i]);
    EXPECT_EQ(copy->inputs()[i]->name(), fusion->inputs()[i]->name());
    EXPECT_EQ(copy->inputs()[i]->container(), copy.get());
  }
  EXPECT_EQ(*copy->inputs()[0]->deviceMesh(), DeviceMesh({0, 1}));

  // Definitions and uses point into the copy.
  TensorView* out = copy->outputs()[0];
  auto* op = dynamic_cast<LinearOp*>(out->definition());
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->in(), copy->inputs()[0]);
  EXPECT_EQ(op->weight(), copy->inputs()[1]);
  EXPECT_EQ(copy->inputs()[0]->uses(), std::vector<Expr*>{op});
  const std::vector<TensorOp*> exprs = copy->exprs();
  ASSERT_EQ(exprs.size(), 1u);
  EXPECT_EQ(exprs[0], op);

  // Derived extents are rebuilt in the copy.
  Scalar* chunk = copy->inputs()[0]->axis(1)->extent();
  EXPECT_EQ(chunk->container(), copy.get());
  EXPECT_EQ(chunk->toString(), "ceilDiv(i0, 3)");
}

TEST(Fusion, CloneIsIndependentOfTheOriginal) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({-1, 16}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({4, -1}, {}, DataType::Float);
  fusion.addOutput(linear(x, w));
  ASSERT_EQ(fusion.extentConstraints().size(), 1u);
  const std::string before = fusion.toString();

  std::unique_ptr<Fusion> copy = fusion.clone();
  copy->inputs()[0]->outerSplit(1, 2);
  copy->inputs()[0]->parallelize(1, ParallelType::DIDx);
  copy->inputs()[0]->setDeviceMesh(DeviceMesh({0, 1}));
  EXPECT_EQ(fusion.toString(), before);
  EXPECT_NE(copy->toString(), before);
  EXPECT_FALSE(x->hasDeviceMesh());

  // Constraints refer to the copy's scalars.
  ASSERT_EQ(copy->extentConstraints().size(), 1u);
  const Fusion::ExtentConstraint& c = copy->extentConstraints()[0];
  EXPECT_EQ(c.lhs, copy->inputs()[0]->logical()[1]->extent());
  EXPECT_EQ(c.rhs, copy->inputs()[1]->logical()[1]->extent());
  EXPECT_EQ(c.what, fusion.extentConstraints()[0].what);

  // New statements continue the original's numbering.
  TensorView* later = copy->defineTensor({-1}, {}, DataType::Float);
  EXPECT_EQ(later->toString(), "T3_g_float[iS9{i2}]");
}

} // namespace
} // namespace mdfuser
