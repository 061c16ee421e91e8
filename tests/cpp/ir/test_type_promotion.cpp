// SPDX-License-Identifier: MIT
//
// Type promotion as nvFuser does it (its computeTypes): torch.promote_types
// for two dtypes, torch.result_type's three tiers (tensors with dimensions,
// 0-dim tensors, scalars), where a lower tier counts only when its category
// (bool < integer < floating) is higher, with scalars keeping their dtype
// (a Python float is a Double scalar) but for Half and BFloat16 ones, which
// count as Float; then the kind widens Half and BFloat16 to Float where
// nvFuser's operations do.

#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "ir/type_promotion.h"

namespace mdfuser {
namespace {

using D = DataType;

TEST(PromoteTypes, IsTorchsTable) {
  struct Case {
    D a, b, expected;
  };
  const Case cases[] = {
      {D::Float, D::Float, D::Float},
      {D::Float, D::Half, D::Float},
      {D::Half, D::BFloat16, D::Float},
      {D::Double, D::BFloat16, D::Double},
      {D::Int, D::Int32, D::Int},
      {D::Bool, D::Int32, D::Int32},
      {D::Bool, D::BFloat16, D::BFloat16},
      {D::Int, D::Half, D::Half},
      {D::Int32, D::Half, D::Half},
      {D::Int, D::Float, D::Float},
      {D::Bool, D::Bool, D::Bool},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(promoteTypes(c.a, c.b), c.expected) << c.a << " " << c.b;
    EXPECT_EQ(promoteTypes(c.b, c.a), c.expected) << c.b << " " << c.a;
  }
}

TEST(PromoteTypes, NullIsAnInternalError) {
  EXPECT_INTERNAL_ERROR(promoteTypes(D::Null, D::Float), "Null");
}

D result(
    std::vector<D> tensors,
    std::vector<D> zero_dim,
    std::vector<D> literals,
    PromotionKind kind = PromotionKind::kDefault) {
  return resultType({tensors, zero_dim, literals}, kind);
}

TEST(ResultType, AScalarCountsOnlyThroughItsCategory) {
  constexpr auto kKeep = PromotionKind::kKeepReduced;
  // bf16 tensor * 0.5: bf16 before the kind widens it.
  EXPECT_EQ(result({D::BFloat16}, {}, {D::Double}, kKeep), D::BFloat16);
  EXPECT_EQ(result({D::Float}, {}, {D::Double}), D::Float);
  // An integer tensor and a Python float (a Double scalar): Double, where
  // torch gives its default dtype Float.
  EXPECT_EQ(result({D::Int}, {}, {D::Double}), D::Double);
  EXPECT_EQ(result({D::Int32}, {}, {D::Double}), D::Double);
  EXPECT_EQ(result({D::Int32}, {}, {D::Float}), D::Float);
  // Half and BFloat16 scalars count as Float.
  EXPECT_EQ(result({D::Int}, {}, {D::Half}), D::Float);
  // bool tensor + 1 -> int64; int32 tensor + 2 -> int32; + True -> int32.
  EXPECT_EQ(result({D::Bool}, {}, {D::Int}), D::Int);
  EXPECT_EQ(result({D::Int32}, {}, {D::Int}), D::Int32);
  EXPECT_EQ(result({D::Int32}, {}, {D::Bool}), D::Int32);
  EXPECT_EQ(result({D::Bool}, {}, {D::Bool}), D::Bool);
  EXPECT_EQ(result({D::Int}, {}, {D::Int32}), D::Int);
  EXPECT_EQ(result({D::Half}, {}, {D::Float}, kKeep), D::Half);
  EXPECT_EQ(result({D::Bool}, {}, {D::Int32}), D::Int32);
}

TEST(ResultType, AZeroDimTensorCountsWithItsDtypeWhenItsCategoryIsHigher) {
  constexpr auto kKeep = PromotionKind::kKeepReduced;
  EXPECT_EQ(result({D::Int}, {D::Double}, {}), D::Double);
  EXPECT_EQ(result({D::Half}, {D::Float}, {}, kKeep), D::Half);
  EXPECT_EQ(result({D::Bool}, {D::Int32}, {}), D::Int32);
  EXPECT_EQ(result({D::Half}, {D::BFloat16}, {}, kKeep), D::Half);
  // Without tensors of dimensions the 0-dim tensors lead.
  EXPECT_EQ(result({}, {D::Half, D::BFloat16}, {}), D::Float);
  EXPECT_EQ(result({}, {D::Int32}, {D::Double}), D::Double);
  EXPECT_EQ(result({}, {D::Int32}, {D::Half}), D::Float);
  EXPECT_EQ(result({}, {D::Bool}, {D::Int}), D::Int);
}

TEST(ResultType, TensorsPromoteAmongThemselves) {
  EXPECT_EQ(result({D::Int, D::Float}, {}, {}), D::Float);
  EXPECT_EQ(result({D::Half, D::BFloat16}, {}, {D::Double}), D::Float);
  EXPECT_EQ(result({D::Int32, D::Int, D::Bool}, {}, {}), D::Int);
  EXPECT_EQ(result({D::Half, D::Double}, {}, {}), D::Double);
}

TEST(ResultType, ArithmeticWidensHalfAndBFloat16ToFloat) {
  // add(half, half) is Float in nvFuser (Half in torch).
  EXPECT_EQ(result({D::Half, D::Half}, {}, {}), D::Float);
  EXPECT_EQ(result({D::BFloat16}, {}, {D::Double}), D::Float);
  EXPECT_EQ(result({D::BFloat16}, {D::Float}, {}), D::Float);
  EXPECT_EQ(result({D::Int, D::Half}, {}, {}), D::Float);
  // Other dtypes stay as promoted.
  EXPECT_EQ(result({D::Int32, D::Int32}, {}, {}), D::Int32);
  EXPECT_EQ(result({D::Double}, {}, {}), D::Double);
  EXPECT_EQ(result({D::Bool, D::Bool}, {}, {}), D::Bool);
}

TEST(ResultType, KindsTurnThePromotedDtypeIntoTheResult) {
  constexpr auto kToFloat = PromotionKind::kIntToFloat;
  EXPECT_EQ(result({D::Int}, {}, {}, kToFloat), D::Float);
  EXPECT_EQ(result({D::Bool}, {}, {}, kToFloat), D::Float);
  EXPECT_EQ(result({D::Half}, {}, {}, kToFloat), D::Float);
  EXPECT_EQ(result({D::BFloat16}, {}, {}, kToFloat), D::Float);
  EXPECT_EQ(result({D::Double}, {}, {}, kToFloat), D::Double);
  EXPECT_EQ(result({D::Int}, {}, {D::Int}, kToFloat), D::Float);
  EXPECT_EQ(result({D::Float}, {}, {}, PromotionKind::kAlwaysBool), D::Bool);
  EXPECT_EQ(result({D::Half}, {}, {}, PromotionKind::kAlwaysBool), D::Bool);
  EXPECT_EQ(result({D::Half}, {}, {}, PromotionKind::kKeepReduced), D::Half);
  EXPECT_EQ(
      result({D::BFloat16, D::BFloat16}, {}, {}, PromotionKind::kKeepReduced),
      D::BFloat16);
}

TEST(ResultType, OnlyTheArithmeticKindsWiden) {
  EXPECT_TRUE(widensReducedPrecision(PromotionKind::kDefault));
  EXPECT_TRUE(widensReducedPrecision(PromotionKind::kIntToFloat));
  EXPECT_FALSE(widensReducedPrecision(PromotionKind::kKeepReduced));
  EXPECT_FALSE(widensReducedPrecision(PromotionKind::kAlwaysBool));
}

TEST(ResultType, NoOperandIsAnInternalError) {
  EXPECT_INTERNAL_ERROR(result({}, {}, {}), "a promotion needs an operand");
}

} // namespace
} // namespace mdfuser
