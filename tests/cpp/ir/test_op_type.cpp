// SPDX-License-Identifier: MIT
//
// The operation table: one row per OpType, in order, with a unique name; the
// pointwise rows say how many operands they take and how they promote.

#include <set>
#include <string>

#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "ir/ops/op_type.h"

namespace mdfuser {
namespace {

constexpr int kNumOpTypes = static_cast<int>(kLastOpType) + 1;

TEST(OpTable, EveryOpTypeHasItsOwnRowAndAUniqueName) {
  std::set<std::string_view> names;
  for (int i = 0; i < kNumOpTypes; ++i) {
    const auto type = static_cast<OpType>(i);
    const OpInfo& info = opInfo(type);
    EXPECT_EQ(info.type, type) << "row " << i;
    EXPECT_FALSE(info.name.empty()) << "row " << i;
    EXPECT_EQ(opName(type), info.name);
    EXPECT_TRUE(names.insert(info.name).second) << info.name << " twice";
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(kNumOpTypes));
}

TEST(OpTable, OnlyPointwiseRowsHaveAnArity) {
  for (int i = 0; i < kNumOpTypes; ++i) {
    const OpInfo& info = opInfo(static_cast<OpType>(i));
    if (info.family == OpFamily::kPointwise) {
      EXPECT_GE(info.arity, 1) << info.name;
      EXPECT_LE(info.arity, 3) << info.name;
    } else {
      EXPECT_EQ(info.arity, 0) << info.name;
      EXPECT_EQ(info.promotion, PromotionKind::kDefault) << info.name;
      EXPECT_EQ(info.operand_types, OperandTypes::kAny) << info.name;
    }
  }
  EXPECT_EQ(opInfo(OpType::Sum).family, OpFamily::kReduction);
  EXPECT_EQ(opInfo(OpType::Min).family, OpFamily::kReduction);
  EXPECT_EQ(opInfo(OpType::Where).arity, 3);
}

// Promotion kinds as nvFuser's ops choose their TypePromotionConfig:
// arithmetic and neg widen Half and BFloat16 (kDefault), float functions
// also make integers Float, abs/relu/silu/where/clamp keep the dtype.
TEST(OpTable, PromotionFollowsNvFuserAndOperandTypesTorch) {
  using K = PromotionKind;
  EXPECT_EQ(opInfo(OpType::Div).promotion, K::kIntToFloat);
  EXPECT_EQ(opInfo(OpType::Exp).promotion, K::kIntToFloat);
  EXPECT_EQ(opInfo(OpType::Gelu).promotion, K::kIntToFloat);
  EXPECT_EQ(opInfo(OpType::GeluTanh).promotion, K::kIntToFloat);
  EXPECT_EQ(opInfo(OpType::Lt).promotion, K::kAlwaysBool);
  EXPECT_EQ(opInfo(OpType::Add).promotion, K::kDefault);
  EXPECT_EQ(opInfo(OpType::Maximum).promotion, K::kDefault);
  EXPECT_EQ(opInfo(OpType::Pow).promotion, K::kDefault);
  EXPECT_EQ(opInfo(OpType::Neg).promotion, K::kDefault);
  EXPECT_EQ(opInfo(OpType::Abs).promotion, K::kKeepReduced);
  EXPECT_EQ(opInfo(OpType::Relu).promotion, K::kKeepReduced);
  EXPECT_EQ(opInfo(OpType::Silu).promotion, K::kKeepReduced);
  EXPECT_EQ(opInfo(OpType::Where).promotion, K::kKeepReduced);
  EXPECT_EQ(opInfo(OpType::Clamp).promotion, K::kKeepReduced);
  EXPECT_EQ(opInfo(OpType::Sub).operand_types, OperandTypes::kNoBoolOperand);
  EXPECT_EQ(opInfo(OpType::Neg).operand_types, OperandTypes::kNotBool);
  EXPECT_EQ(opInfo(OpType::Pow).operand_types, OperandTypes::kNotBool);
  EXPECT_EQ(opInfo(OpType::Gelu).operand_types, OperandTypes::kFloatingOnly);
  EXPECT_EQ(opInfo(OpType::Mul).operand_types, OperandTypes::kAny);
}

std::string names(const std::vector<const OpInfo*>& infos) {
  std::string s;
  for (const OpInfo* info : infos) {
    s += (s.empty() ? "" : " ") + std::string(info->name);
  }
  return s;
}

TEST(OpTable, PointwiseOpsListsTheBindableOpsInTableOrder) {
  EXPECT_EQ(
      names(pointwiseOps(1)),
      "neg abs exp log log1p tanh sigmoid relu silu gelu gelu_tanh erf sqrt "
      "rsqrt reciprocal sin cos");
  EXPECT_EQ(
      names(pointwiseOps(2)),
      "add sub mul div pow maximum minimum eq ne lt le gt ge");
  // cast and where take more than tensors and are bound by hand.
  EXPECT_EQ(names(pointwiseOps(3)), "");
}

TEST(OpTable, AnUnknownOpTypeIsAnInternalError) {
  EXPECT_INTERNAL_ERROR(
      opInfo(static_cast<OpType>(kNumOpTypes)), "unknown OpType");
}

} // namespace
} // namespace mdfuser
