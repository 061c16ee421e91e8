// SPDX-License-Identifier: MIT
//
// grouped_mm: the output of each form, the axis maps that make it shard
// (ragged axis and offsets to nothing, K to rK, the group axis of the
// grouped operand to rG), the sharding priority, and the operand errors.

#include <gtest/gtest.h>

#include "common/axis_map.h"
#include "common/expect_error.h"
#include "ir/fusion.h"
#include "ir/ops.h"

namespace mdfuser {
namespace {

using test::AxisPairs;
using test::extents;
using test::pairs;

class GroupedMm : public ::testing::Test {
 protected:
  TensorView* define(
      std::vector<int64_t> shape, DataType dtype = DataType::BFloat16) {
    return fusion.defineTensor(shape, {}, dtype);
  }
  TensorView* offsets(int64_t groups, DataType dtype = DataType::Int32) {
    return define({groups}, dtype);
  }

  Fusion fusion;
};

TEST_F(GroupedMm, RaggedRowsGivesTokensByNWithKAndGroupsReduced) {
  TensorView* a = define({-1, 8});
  TensorView* b = define({4, 8, 6});
  TensorView* o = offsets(4);
  TensorView* out = groupedMm(a, b, o);
  EXPECT_EQ(extents(out->logical()), "i0 6 r8 r4");
  EXPECT_EQ(out->dtype(), DataType::BFloat16);
  auto* op = dynamic_cast<GroupedMmOp*>(out->definition());
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->form(), GroupedMmOp::Form::kRaggedRows);
  EXPECT_EQ(op->grouped(), b);
  const std::vector<IterDomain*>& c = out->logical();
  EXPECT_EQ(
      pairs(op->mapProducerToConsumer(a)), (AxisPairs{{a->logical()[1], c[2]}}))
      << "the ragged token axis maps to nothing";
  EXPECT_EQ(
      pairs(op->mapProducerToConsumer(b)),
      (AxisPairs{
          {b->logical()[0], c[3]},
          {b->logical()[1], c[2]},
          {b->logical()[2], c[1]}}));
  EXPECT_TRUE(op->mapProducerToConsumer(o).empty());
  EXPECT_EQ(op->shardingPriority(), (std::vector<TensorView*>{b, a}));
}

TEST_F(GroupedMm, RaggedColsGivesMByColumnsWithKAndGroupsReduced) {
  TensorView* a = define({4, 5, 8});
  TensorView* b = define({8, -1});
  TensorView* out = groupedMm(a, b, offsets(4));
  EXPECT_EQ(extents(out->logical()), "5 i0 r8 r4");
  auto* op = static_cast<GroupedMmOp*>(out->definition());
  EXPECT_EQ(op->form(), GroupedMmOp::Form::kRaggedCols);
  EXPECT_EQ(op->grouped(), a);
  const std::vector<IterDomain*>& c = out->logical();
  EXPECT_EQ(
      pairs(op->mapProducerToConsumer(a)),
      (AxisPairs{
          {a->logical()[0], c[3]},
          {a->logical()[1], c[0]},
          {a->logical()[2], c[2]}}));
  EXPECT_EQ(
      pairs(op->mapProducerToConsumer(b)),
      (AxisPairs{{b->logical()[0], c[2]}}));
  EXPECT_EQ(op->shardingPriority(), (std::vector<TensorView*>{a, b}));
}

TEST_F(GroupedMm, RaggedKGivesOneProductPerGroup) {
  TensorView* a = define({5, -1});
  TensorView* b = define({-1, 6});
  TensorView* out = groupedMm(a, b, offsets(3));
  EXPECT_EQ(extents(out->logical()), "3 5 6");
  auto* op = static_cast<GroupedMmOp*>(out->definition());
  EXPECT_EQ(op->form(), GroupedMmOp::Form::kRaggedK);
  EXPECT_EQ(op->grouped(), nullptr);
  const std::vector<IterDomain*>& c = out->logical();
  EXPECT_EQ(
      pairs(op->mapProducerToConsumer(a)),
      (AxisPairs{{a->logical()[0], c[1]}}));
  EXPECT_EQ(
      pairs(op->mapProducerToConsumer(b)),
      (AxisPairs{{b->logical()[1], c[2]}}));
}

TEST_F(GroupedMm, PrintsAsGroupedMm) {
  TensorView* out = groupedMm(define({6, 8}), define({2, 8, 4}), offsets(2));
  EXPECT_NE(
      out->definition()->toString().find("= grouped_mm("), std::string::npos)
      << out->definition()->toString();
}

TEST_F(GroupedMm, OffsetsMustBeInt32) {
  TensorView* a = define({6, 8});
  TensorView* b = define({2, 8, 4});
  TensorView* o = offsets(2, DataType::Int);
  EXPECT_TYPE_ERROR(
      groupedMm(a, b, o), "grouped_mm: offsets must be Int32 (the cumulative");
}

TEST_F(GroupedMm, OffsetsMustBeOneDimensional) {
  TensorView* o = define({2, 1}, DataType::Int32);
  EXPECT_VALUE_ERROR(
      groupedMm(define({6, 8}), define({2, 8, 4}), o),
      "grouped_mm: offsets must be 1-dimensional [groups], got 2 dimensions");
}

TEST_F(GroupedMm, TwoThreeDimensionalOperandsAreAMatmul) {
  EXPECT_VALUE_ERROR(
      groupedMm(define({2, 6, 8}), define({2, 8, 4}), offsets(2)),
      "got 3 and 3 dimensions");
  EXPECT_VALUE_ERROR(
      groupedMm(define({2, 6, 8}), define({2, 8, 4}), offsets(2)),
      "use matmul");
}

TEST_F(GroupedMm, KAndGroupCountsMustAgree) {
  EXPECT_VALUE_ERROR(
      groupedMm(define({6, 8}), define({2, 7, 4}), offsets(2)),
      "grouped_mm: K of mat1 (its last axis) and of mat2 (axis -2)");
  EXPECT_VALUE_ERROR(
      groupedMm(define({6, 8}), define({2, 8, 4}), offsets(3)),
      "grouped_mm: the groups of offsets and of mat2 (its first axis)");
  EXPECT_VALUE_ERROR(
      groupedMm(define({2, 6, 8}), define({8, 4}), offsets(3)),
      "grouped_mm: the groups of offsets and of mat1 (its first axis)");
}

TEST_F(GroupedMm, OperandDtypes) {
  EXPECT_TYPE_ERROR(
      groupedMm(define({6, 8}, DataType::Float), define({2, 8, 4}), offsets(2)),
      "grouped_mm: mat1 and mat2 must have the same dtype, got Float");
  EXPECT_TYPE_ERROR(
      groupedMm(
          define({6, 8}, DataType::Int),
          define({2, 8, 4}, DataType::Int),
          offsets(2)),
      "grouped_mm takes floating-point mat1 and mat2, got Int");
}

} // namespace
} // namespace mdfuser
