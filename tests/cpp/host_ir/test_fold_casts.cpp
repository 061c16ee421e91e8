// SPDX-License-Identifier: MIT
//
// FoldCasts lets a pointwise operation that computes in Float write the
// Half or BFloat16 of the cast that reads it, and leaves every other cast
// alone.

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "common/host_ir_outline.h"
#include "host_ir/lower.h"
#include "host_ir/passes/fold_casts.h"
#include "host_ir/verifier.h"
#include "ir/literal.h"
#include "ir/ops.h"
#include "passes/pipeline.h"

namespace mdfuser {
namespace {

using namespace hir;

// The program of `body` on two inputs [4, 8] of `dtype`, on one device.
std::unique_ptr<HostIrContainer> program(
    DataType dtype,
    const std::function<void(Fusion&, TensorView*, TensorView*)>& body) {
  auto fusion = std::make_unique<Fusion>();
  TensorView* a = fusion->defineTensor({4, 8}, {}, dtype);
  TensorView* b = fusion->defineTensor({4, 8}, {}, dtype);
  body(*fusion, a, b);
  runFusionPasses(fusion.get());
  return lowerToHostIr(std::move(fusion), {});
}

std::string folded(HostIrContainer& hic) {
  foldCasts(hic);
  verify(hic);
  return test::outline(hic);
}

TEST(FoldCasts, ACastBackFoldsIntoTheArithmetic) {
  TensorView* out = nullptr;
  auto hic = program(DataType::BFloat16, [&](Fusion& f, auto* a, auto* b) {
    TensorView* sum = binaryOp(OpType::Add, a, b);
    ASSERT_EQ(sum->dtype(), DataType::Float);
    out = cast(unaryOp(OpType::Exp, sum), DataType::BFloat16);
    f.addOutput(out);
  });
  // add stays Float (exp reads it); exp writes the BFloat16 output.
  const std::string after = folded(*hic);
  EXPECT_EQ(after.find("cast("), std::string::npos) << after;
  EXPECT_NE(
      after.find("T" + std::to_string(out->name()) + " = exp("),
      std::string::npos)
      << after;
  const auto& exprs = hic->topLevel().exprs();
  auto* exp = dynamic_cast<const PointwiseOp*>(exprs.back());
  ASSERT_NE(exp, nullptr);
  EXPECT_EQ(exp->out()->dtype(), DataType::BFloat16);
  EXPECT_EQ(exp->computationDtype(), DataType::Float);
}

TEST(FoldCasts, AnIntermediateReadTwiceOrReturnedStays) {
  auto hic = program(DataType::Half, [](Fusion& f, auto* a, auto* b) {
    TensorView* sum = binaryOp(OpType::Add, a, b);
    f.addOutput(cast(sum, DataType::Half));
    f.addOutput(binaryOp(OpType::Mul, sum, sum));
  });
  EXPECT_NE(folded(*hic).find("cast("), std::string::npos);

  auto returned = program(DataType::Half, [](Fusion& f, auto* a, auto* b) {
    TensorView* sum = binaryOp(OpType::Add, a, b);
    f.addOutput(sum);
    f.addOutput(cast(sum, DataType::Half));
  });
  EXPECT_NE(folded(*returned).find("cast("), std::string::npos);
}

TEST(FoldCasts, OnlyCastsToHalfOrBFloat16OfFloatArithmetic) {
  // To Double: no narrower kernel computes the same.
  auto to_double = program(DataType::Float, [](Fusion& f, auto* a, auto* b) {
    f.addOutput(cast(binaryOp(OpType::Add, a, b), DataType::Double));
  });
  EXPECT_NE(folded(*to_double).find("cast("), std::string::npos);
  // Of an integer operation made Float by a division.
  auto ints = program(DataType::Int, [](Fusion& f, auto* a, auto* b) {
    f.addOutput(cast(binaryOp(OpType::Div, a, b), DataType::Half));
  });
  EXPECT_NE(folded(*ints).find("cast("), std::string::npos);
  // Of an operation that keeps Half (abs): nothing to fold.
  auto keep = program(DataType::Float, [](Fusion& f, auto* a, auto*) {
    f.addOutput(cast(unaryOp(OpType::Abs, a), DataType::Half));
  });
  EXPECT_NE(folded(*keep).find("cast("), std::string::npos);
  // Of Double arithmetic.
  auto dbl = program(DataType::Double, [](Fusion& f, auto* a, auto* b) {
    f.addOutput(cast(binaryOp(OpType::Mul, a, b), DataType::BFloat16));
  });
  EXPECT_NE(folded(*dbl).find("cast("), std::string::npos);
  // Float arithmetic cast to Half folds.
  auto fl = program(DataType::Float, [](Fusion& f, auto* a, auto* b) {
    f.addOutput(cast(binaryOp(OpType::Mul, a, b), DataType::Half));
  });
  EXPECT_EQ(folded(*fl).find("cast("), std::string::npos);
}

} // namespace
} // namespace mdfuser
