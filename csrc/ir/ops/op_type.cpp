// SPDX-License-Identifier: MIT
#include "ir/ops/op_type.h"

#include <array>

#include "ir/errors.h"

namespace mdfuser {

namespace {

using enum OpType;
constexpr OpFamily kP = OpFamily::kPointwise;
constexpr PromotionKind kDefault = PromotionKind::kDefault;
constexpr PromotionKind kToFloat = PromotionKind::kIntToFloat;
constexpr PromotionKind kToBool = PromotionKind::kAlwaysBool;
constexpr PromotionKind kKeep = PromotionKind::kKeepReduced;
constexpr OperandTypes kAny = OperandTypes::kAny;
constexpr OperandTypes kNotBool = OperandTypes::kNotBool;
constexpr OperandTypes kNoBool = OperandTypes::kNoBoolOperand;
constexpr OperandTypes kFloating = OperandTypes::kFloatingOnly;

// In OpType order.
constexpr OpInfo kOpTable[] = {
    {Neg, "neg", kP, 1, kDefault, kNotBool},
    {Abs, "abs", kP, 1, kKeep, kNotBool},
    {Exp, "exp", kP, 1, kToFloat, kAny},
    {Log, "log", kP, 1, kToFloat, kAny},
    {Log1p, "log1p", kP, 1, kToFloat, kAny},
    {Tanh, "tanh", kP, 1, kToFloat, kAny},
    {Sigmoid, "sigmoid", kP, 1, kToFloat, kAny},
    {Relu, "relu", kP, 1, kKeep, kNotBool},
    {Silu, "silu", kP, 1, kKeep, kFloating},
    {Gelu, "gelu", kP, 1, kToFloat, kFloating},
    {GeluTanh, "gelu_tanh", kP, 1, kToFloat, kFloating},
    {Erf, "erf", kP, 1, kToFloat, kAny},
    {Sqrt, "sqrt", kP, 1, kToFloat, kAny},
    {Rsqrt, "rsqrt", kP, 1, kToFloat, kAny},
    {Reciprocal, "reciprocal", kP, 1, kToFloat, kAny},
    {Sin, "sin", kP, 1, kToFloat, kAny},
    {Cos, "cos", kP, 1, kToFloat, kAny},
    {Cast, "cast", kP, 1, kKeep, kAny},
    {Add, "add", kP, 2, kDefault, kAny},
    {Sub, "sub", kP, 2, kDefault, kNoBool},
    {Mul, "mul", kP, 2, kDefault, kAny},
    {Div, "div", kP, 2, kToFloat, kAny},
    {Pow, "pow", kP, 2, kDefault, kNotBool},
    {Maximum, "maximum", kP, 2, kDefault, kAny},
    {Minimum, "minimum", kP, 2, kDefault, kAny},
    {Eq, "eq", kP, 2, kToBool, kAny},
    {Ne, "ne", kP, 2, kToBool, kAny},
    {Lt, "lt", kP, 2, kToBool, kAny},
    {Le, "le", kP, 2, kToBool, kAny},
    {Gt, "gt", kP, 2, kToBool, kAny},
    {Ge, "ge", kP, 2, kToBool, kAny},
    {Where, "where", kP, 3, kKeep, kAny},
    {Clamp, "clamp", kP, 3, kKeep, kNotBool},
    {Sum, "sum", OpFamily::kReduction},
    {Max, "max", OpFamily::kReduction},
    {Min, "min", OpFamily::kReduction},
    {Set, "set", OpFamily::kOther},
    {Broadcast, "broadcast", OpFamily::kOther},
    {Reshape, "reshape", OpFamily::kOther},
    {Permute, "permute", OpFamily::kOther},
    {Squeeze, "squeeze", OpFamily::kOther},
    {Slice, "slice", OpFamily::kOther},
    {Cat, "cat", OpFamily::kOther},
    {Full, "full", OpFamily::kCreation},
    {Iota, "iota", OpFamily::kCreation},
    {Uniform, "uniform", OpFamily::kCreation},
    {Normal, "normal", OpFamily::kCreation},
    {Linear, "linear", OpFamily::kOther},
    {Matmul, "matmul", OpFamily::kOther},
    {GroupedMm, "grouped_mm", OpFamily::kOther},
    {SdpaFwd, "sdpfa_fwd", OpFamily::kOther},
    {SdpaBwd, "sdpfa_bwd", OpFamily::kOther},
    {LayerNorm, "layer_norm", OpFamily::kOther},
};

constexpr bool tableIsInOrder() {
  for (size_t i = 0; i < std::size(kOpTable); ++i) {
    if (static_cast<size_t>(kOpTable[i].type) != i) {
      return false;
    }
  }
  return static_cast<size_t>(kLastOpType) + 1 == std::size(kOpTable);
}
static_assert(tableIsInOrder(), "kOpTable must list every OpType in order");

} // namespace

const OpInfo& opInfo(OpType type) {
  const auto index = static_cast<size_t>(type);
  MDF_CHECK_LT(index, std::size(kOpTable), "unknown OpType");
  return kOpTable[index];
}

std::string_view opName(OpType type) {
  return opInfo(type).name;
}

std::vector<const OpInfo*> pointwiseOps(int arity) {
  std::vector<const OpInfo*> result;
  for (const OpInfo& info : kOpTable) {
    if (info.family == OpFamily::kPointwise && info.arity == arity &&
        info.type != Cast && info.type != Where && info.type != Clamp) {
      result.push_back(&info);
    }
  }
  return result;
}

} // namespace mdfuser
