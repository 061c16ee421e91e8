// SPDX-License-Identifier: MIT
//
// Operation builders check their operands and create the output with global
// shapes. linear and matmul keep the contracted axis as a trailing reduction
// axis, which is what lets a sharded contraction become local work plus a
// collective later on.

#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "ir/fusion.h"
#include "ir/ops.h"

namespace mdfuser {
namespace {

using Pairs = std::vector<std::pair<IterDomain*, IterDomain*>>;

Pairs pairs(const std::vector<AxisMapping>& map) {
  Pairs result;
  for (const AxisMapping& m : map) {
    result.emplace_back(m.producer, m.consumer);
  }
  return result;
}

std::string extents(const std::vector<IterDomain*>& ids) {
  std::string s;
  for (IterDomain* id : ids) {
    s += (s.empty() ? "" : " ") + std::string(id->isReduction() ? "r" : "") +
         id->extent()->toString();
  }
  return s;
}

TEST(Linear, OutputIsBatchThenOutFeaturesThenReducedInFeatures) {
  Fusion fusion;
  TensorView* in = fusion.defineTensor({-1, 16}, {}, DataType::BFloat16);
  TensorView* w = fusion.defineTensor({4, 16}, {}, DataType::BFloat16);
  TensorView* out = linear(in, w);
  EXPECT_EQ(out->toString(), "T2_g___bfloat[iS4{i0}, iS5{4}, rS6{16}]");
  EXPECT_EQ(out->dtype(), DataType::BFloat16);
  EXPECT_EQ(out->logical()[0]->extent(), in->logical()[0]->extent());
  EXPECT_TRUE(fusion.extentConstraints().empty());

  auto* op = dynamic_cast<LinearOp*>(out->definition());
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->opName(), "linear");
  EXPECT_EQ(op->in(), in);
  EXPECT_EQ(op->weight(), w);
  EXPECT_EQ(op->bias(), nullptr);
  EXPECT_EQ(op->tensorInputs(), (std::vector<TensorView*>{in, w}));
  EXPECT_EQ(
      op->toString(),
      "T2_g___bfloat[iS4{i0}, iS5{4}, rS6{16}]\n"
      "   = linear(T0_g___bfloat[iS0{i0}, iS1{16}],\n"
      "            T1_g___bfloat[iS2{4}, iS3{16}])");
}

TEST(Linear, AnyNumberOfBatchAxesAndAnOptionalBias) {
  Fusion fusion;
  TensorView* in3 = fusion.defineTensor({2, 3, 8}, {}, DataType::Float);
  TensorView* in1 = fusion.defineTensor({8}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({5, 8}, {}, DataType::Float);
  TensorView* b = fusion.defineTensor({5}, {}, DataType::Float);
  EXPECT_EQ(extents(linear(in3, w)->logical()), "2 3 5 r8");
  EXPECT_EQ(extents(linear(in1, w)->logical()), "5 r8");
  TensorView* with_bias = linear(in3, w, b);
  EXPECT_EQ(extents(with_bias->logical()), "2 3 5 r8");
  auto* op = dynamic_cast<LinearOp*>(with_bias->definition());
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->bias(), b);
  EXPECT_EQ(op->inputs().size(), 3u);
}

TEST(Linear, OperandErrors) {
  Fusion fusion;
  TensorView* in = fusion.defineTensor({2, 8}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({4, 8}, {}, DataType::Float);
  TensorView* scalar = fusion.defineTensor({}, {}, DataType::Float);
  TensorView* w4 = fusion.defineTensor({2, 2, 1, 8}, {}, DataType::Float);
  TensorView* half_w = fusion.defineTensor({4, 8}, {}, DataType::Half);
  EXPECT_TYPE_ERROR(linear(nullptr, w), "linear: input must be a tensor");
  EXPECT_TYPE_ERROR(linear(in, nullptr), "linear: weight must be a tensor");
  EXPECT_VALUE_ERROR(linear(scalar, w), "input must have at least 1 dimension");
  EXPECT_VALUE_ERROR(
      linear(in, w4),
      "weight must be 2-dimensional [out_features, in_features] or "
      "3-dimensional [A, B, in_features] (out_features split in two), got 4");
  EXPECT_TYPE_ERROR(
      linear(in, half_w),
      "linear: operands must have the same dtype, got Float for "
      "T0_g_float[iS0{2}, iS1{8}] and Half for T4_g___half");
}

TEST(Linear, AWeightSplitInTwoGivesAnOutputAxisEach) {
  // weight [A, B, K]: out [A, ..., B, rK] (A outermost, as in
  // nvfuser_direct), whose A and B map to the weight's and the bias's
  // first two axes, and the input's batch axes to those between.
  Fusion fusion;
  TensorView* in = fusion.defineTensor({5, 8}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({2, 3, 8}, {}, DataType::Float);
  TensorView* b = fusion.defineTensor({2, 3}, {}, DataType::Float);
  TensorView* out = linear(in, w, b);
  EXPECT_EQ(out->toString(), "T3_g_float[iS7{2}, iS8{5}, iS9{3}, rS10{8}]");
  const auto* op = static_cast<const LinearOp*>(out->definition());
  EXPECT_EQ(op->outFeatureAxes(), 2u);
  const std::vector<AxisMapping> from_w = op->mapProducerToConsumer(w, out);
  ASSERT_EQ(from_w.size(), 3u);
  EXPECT_EQ(from_w[0].consumer, out->maybeRoot()[0]);
  EXPECT_EQ(from_w[1].consumer, out->maybeRoot()[2]);
  EXPECT_EQ(from_w[2].consumer, out->maybeRoot()[3]);
  const std::vector<AxisMapping> from_b = op->mapProducerToConsumer(b, out);
  ASSERT_EQ(from_b.size(), 2u);
  EXPECT_EQ(from_b[0].consumer, out->maybeRoot()[0]);
  EXPECT_EQ(from_b[1].producer, b->logical()[1]);
  EXPECT_EQ(from_b[1].consumer, out->maybeRoot()[2]);
  const std::vector<AxisMapping> from_in = op->mapProducerToConsumer(in, out);
  ASSERT_EQ(from_in.size(), 2u);
  EXPECT_EQ(from_in[0].consumer, out->maybeRoot()[1]);
  EXPECT_EQ(from_in[1].consumer, out->maybeRoot()[3]);
}

TEST(Linear, StaticInFeaturesMismatchIsAValueError) {
  Fusion fusion;
  TensorView* in = fusion.defineTensor({2, 8}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({4, 16}, {}, DataType::Float);
  EXPECT_VALUE_ERROR(
      linear(in, w),
      "linear: in_features of the input (last axis) and of the weight (its "
      "last axis) must match, got 8 and 16");
}

TEST(Linear, SymbolicInFeaturesMismatchRecordsAnExtentConstraint) {
  Fusion fusion;
  TensorView* in = fusion.defineTensor({2, -1}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({4, 16}, {}, DataType::Float);
  linear(in, w);
  ASSERT_EQ(fusion.extentConstraints().size(), 1u);
  const Fusion::ExtentConstraint& c = fusion.extentConstraints()[0];
  EXPECT_EQ(c.lhs, in->logical()[1]->extent());
  EXPECT_EQ(c.rhs, w->logical()[1]->extent());
  EXPECT_NE(c.what.find("in_features"), std::string::npos) << c.what;

  // The same symbol on both sides needs no check.
  TensorView* x = fusion.defineTensor({-1, -1}, {}, DataType::Float);
  linear(x, set(x));
  EXPECT_EQ(fusion.extentConstraints().size(), 1u);
}

TEST(Linear, BiasErrors) {
  Fusion fusion;
  TensorView* in = fusion.defineTensor({2, 8}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({4, 8}, {}, DataType::Float);
  TensorView* b2 = fusion.defineTensor({4, 1}, {}, DataType::Float);
  TensorView* b5 = fusion.defineTensor({5}, {}, DataType::Float);
  TensorView* half_b = fusion.defineTensor({4}, {}, DataType::Half);
  EXPECT_VALUE_ERROR(
      linear(in, w, b2),
      "bias must have the weight's out_features axes (1), got 2 dimensions");
  EXPECT_VALUE_ERROR(
      linear(in, w, b5),
      "out_features axis 0 of the weight and the bias must match, got 4 and "
      "5");
  EXPECT_TYPE_ERROR(linear(in, w, half_b), "must have the same dtype");
}

TEST(Matmul, OutputIsBatchMNThenReducedK) {
  Fusion fusion;
  TensorView* a = fusion.defineTensor({2, 3, 8}, {}, DataType::Float);
  TensorView* b = fusion.defineTensor({8, 5}, {}, DataType::Float);
  TensorView* out = matmul(a, b);
  EXPECT_EQ(extents(out->logical()), "2 3 5 r8");
  auto* op = dynamic_cast<MatmulOp*>(out->definition());
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->a(), a);
  EXPECT_EQ(op->b(), b);
  EXPECT_EQ(op->opName(), "matmul");
}

TEST(Matmul, OperandErrors) {
  Fusion fusion;
  TensorView* a1 = fusion.defineTensor({8}, {}, DataType::Float);
  TensorView* a = fusion.defineTensor({3, 8}, {}, DataType::Float);
  TensorView* b7 = fusion.defineTensor({7, 5}, {}, DataType::Float);
  TensorView* half_b = fusion.defineTensor({8, 5}, {}, DataType::Half);
  EXPECT_TYPE_ERROR(matmul(a, nullptr), "second operand must be a tensor");
  EXPECT_VALUE_ERROR(matmul(a1, half_b), "at least 2 dimensions [..., M, K]");
  EXPECT_VALUE_ERROR(matmul(a, a1), "second operand must have at least 2");
  EXPECT_VALUE_ERROR(matmul(a, b7), "must match, got 8 and 7");
  EXPECT_TYPE_ERROR(matmul(a, half_b), "same dtype, got Float");
}

TEST(Set, CopiesTheDataAxesAsFreshSerialAxes) {
  Fusion fusion;
  TensorView* in = fusion.defineTensor({-1, 16}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({4, 16}, {}, DataType::Float);
  TensorView* partial = linear(in, w);
  partial->outerSplit(1, 2);
  partial->parallelize(1, ParallelType::DIDx);
  TensorView* out = set(partial);
  // Reductions are dropped; splits and parallel types are not copied.
  EXPECT_EQ(out->toString(), "T3_g_float[iS9{i0}, iS10{4}]");
  EXPECT_EQ(out->logical()[0]->extent(), in->logical()[0]->extent());
  auto* op = dynamic_cast<LoadStoreOp*>(out->definition());
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->in(), partial);
  EXPECT_EQ(op->opName(), "set");
  EXPECT_TYPE_ERROR(set(nullptr), "set: input must be a tensor, got None");
}

TEST(MapProducerToConsumer, LinearMapsInFeaturesToTheReduction) {
  Fusion fusion;
  TensorView* in = fusion.defineTensor({2, 3, 8}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({5, 8}, {}, DataType::Float);
  TensorView* b = fusion.defineTensor({5}, {}, DataType::Float);
  TensorView* out = linear(in, w, b);
  auto* op = static_cast<TensorOp*>(out->definition());
  const std::vector<IterDomain*>& o = out->logical();
  const std::vector<IterDomain*>& i = in->logical();
  EXPECT_EQ(
      pairs(op->mapProducerToConsumer(in)),
      (Pairs{{i[0], o[0]}, {i[1], o[1]}, {i[2], o[3]}}));
  EXPECT_EQ(
      pairs(op->mapProducerToConsumer(w)),
      (Pairs{{w->logical()[0], o[2]}, {w->logical()[1], o[3]}}));
  EXPECT_EQ(
      pairs(op->mapProducerToConsumer(b)), (Pairs{{b->logical()[0], o[2]}}));
}

TEST(MapProducerToConsumer, MatmulAndSet) {
  Fusion fusion;
  TensorView* a = fusion.defineTensor({3, 8}, {}, DataType::Float);
  TensorView* b = fusion.defineTensor({8, 5}, {}, DataType::Float);
  TensorView* out = matmul(a, b);
  const std::vector<IterDomain*>& o = out->logical();
  auto* mm = static_cast<TensorOp*>(out->definition());
  EXPECT_EQ(
      pairs(mm->mapProducerToConsumer(a)),
      (Pairs{{a->logical()[0], o[0]}, {a->logical()[1], o[2]}}));
  EXPECT_EQ(
      pairs(mm->mapProducerToConsumer(b)),
      (Pairs{{b->logical()[0], o[2]}, {b->logical()[1], o[1]}}));

  TensorView* copy = set(out);
  auto* st = static_cast<TensorOp*>(copy->definition());
  EXPECT_EQ(
      pairs(st->mapProducerToConsumer(out)),
      (Pairs{{o[0], copy->logical()[0]}, {o[1], copy->logical()[1]}}));
  EXPECT_INTERNAL_ERROR(st->mapProducerToConsumer(a), "is not an operand");
}

TEST(WithTensors, BuildsAnUnregisteredCopyOnOtherTensors) {
  Fusion fusion;
  TensorView* in = fusion.defineTensor({2, 8}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({4, 8}, {}, DataType::Float);
  TensorView* out = linear(in, w);
  TensorView* other_in = set(in);
  TensorView* other_out = set(out);
  auto* op = static_cast<TensorOp*>(out->definition());
  TensorOp* copy = op->withTensors({other_out}, {other_in, w});
  ASSERT_NE(dynamic_cast<LinearOp*>(copy), nullptr);
  EXPECT_EQ(copy->out(), other_out);
  EXPECT_EQ(copy->tensorInputs(), (std::vector<TensorView*>{other_in, w}));
  EXPECT_EQ(out->definition(), op);
  EXPECT_NE(other_out->definition(), copy) << "not registered";
  EXPECT_INTERNAL_ERROR(
      op->withTensors({other_out}, {other_in}), "too few tensors for linear");
}

} // namespace
} // namespace mdfuser
