// SPDX-License-Identifier: MIT
//
// Type promotion as torch does it: torch.promote_types for two dtypes, and
// torch.result_type over three tiers (tensors with dimensions, 0-dim
// tensors, Python numbers), where a lower tier counts only when its
// category (bool < integer < floating) is higher. Expected values are
// torch's.

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

TEST(ResultType, APythonNumberCountsOnlyThroughItsCategory) {
  // bf16 tensor * 0.5 -> bf16; int tensor + 0.5 -> float (the default).
  EXPECT_EQ(result({D::BFloat16}, {}, {D::Double}), D::BFloat16);
  EXPECT_EQ(result({D::Int}, {}, {D::Double}), D::Float);
  EXPECT_EQ(result({D::Int32}, {}, {D::Double}), D::Float);
  // bool tensor + 1 -> int64; int32 tensor + 2 -> int32; + True -> int32.
  EXPECT_EQ(result({D::Bool}, {}, {D::Int}), D::Int);
  EXPECT_EQ(result({D::Int32}, {}, {D::Int}), D::Int32);
  EXPECT_EQ(result({D::Int32}, {}, {D::Bool}), D::Int32);
  EXPECT_EQ(result({D::Bool}, {}, {D::Bool}), D::Bool);
  // define_scalar(2, Int32) and define_scalar(0.5, Float) count like 2 and
  // 0.5.
  EXPECT_EQ(result({D::Int}, {}, {D::Int32}), D::Int);
  EXPECT_EQ(result({D::Half}, {}, {D::Float}), D::Half);
  EXPECT_EQ(result({D::Bool}, {}, {D::Int32}), D::Int);
}

TEST(ResultType, AZeroDimTensorCountsWithItsDtypeWhenItsCategoryIsHigher) {
  EXPECT_EQ(result({D::Int}, {D::Double}, {}), D::Double);
  EXPECT_EQ(result({D::Half}, {D::Float}, {}), D::Half);
  EXPECT_EQ(result({D::Bool}, {D::Int32}, {}), D::Int32);
  EXPECT_EQ(result({D::Half}, {D::BFloat16}, {}), D::Half);
  // Without tensors of dimensions the 0-dim tensors lead.
  EXPECT_EQ(result({}, {D::Half, D::BFloat16}, {}), D::Float);
  EXPECT_EQ(result({}, {D::Int32}, {D::Double}), D::Float);
  EXPECT_EQ(result({}, {D::Int32}, {D::Half}), D::Float);
  EXPECT_EQ(result({}, {D::Bool}, {D::Int}), D::Int);
}

TEST(ResultType, TensorsPromoteAmongThemselves) {
  EXPECT_EQ(result({D::Int, D::Float}, {}, {}), D::Float);
  EXPECT_EQ(result({D::Half, D::BFloat16}, {}, {D::Double}), D::Float);
  EXPECT_EQ(result({D::Int32, D::Int, D::Bool}, {}, {}), D::Int);
}

TEST(ResultType, KindsTurnThePromotedDtypeIntoTheResult) {
  EXPECT_EQ(result({D::Int}, {}, {}, PromotionKind::kIntToFloat), D::Float);
  EXPECT_EQ(result({D::Bool}, {}, {}, PromotionKind::kIntToFloat), D::Float);
  EXPECT_EQ(result({D::Half}, {}, {}, PromotionKind::kIntToFloat), D::Half);
  EXPECT_EQ(
      result({D::Int}, {}, {D::Int}, PromotionKind::kIntToFloat), D::Float);
  EXPECT_EQ(result({D::Float}, {}, {}, PromotionKind::kAlwaysBool), D::Bool);
}

TEST(ResultType, NoOperandIsAnInternalError) {
  EXPECT_INTERNAL_ERROR(result({}, {}, {}), "a promotion needs an operand");
}

} // namespace
} // namespace mdfuser
