// SPDX-License-Identifier: MIT
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "ir/type_promotion.h"

namespace mdfuser {

// Every tensor operation of a fusion. The families group operations that
// share an IR class, a sharding rule and a way of running:
//   pointwise   one output element from the operands' elements at the same
//               (broadcast) position: PointwiseOp
//   reduction   sum/max/min over axes: ReductionOp
//   creation    full, iota, uniform, normal: CreationOp, no tensor operands
//   the others  one class each (set, broadcast, reshape, ..., sdpfa_bwd)
// Adding a pointwise operation is a line in kOpTable (op_type.cpp), a line
// in the runtime's kernel table, and nothing else.
enum class OpType {
  // pointwise, unary
  Neg,
  Abs,
  Exp,
  Log,
  Log1p,
  Tanh,
  Sigmoid,
  Relu,
  Silu,
  Gelu,
  GeluTanh,
  Erf,
  Sqrt,
  Rsqrt,
  Reciprocal,
  Sin,
  Cos,
  Cast,
  // pointwise, binary
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Maximum,
  Minimum,
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  // pointwise, ternary
  Where,
  Clamp,
  // reductions
  Sum,
  Max,
  Min,
  // data movement and layout
  Set,
  Broadcast,
  Reshape,
  Permute,
  Squeeze,
  Slice,
  Cat,
  // creation: no tensor operands
  Full,
  Iota,
  Uniform,
  Normal,
  // contractions
  Linear,
  Matmul,
  GroupedMm,
  SdpaFwd,
  SdpaBwd,
  // normalizations: fused by a host pass, never written by users
  LayerNorm,
};

// The last OpType: tables indexed by OpType have kLastOpType + 1 entries.
constexpr OpType kLastOpType = OpType::LayerNorm;

enum class OpFamily { kPointwise, kReduction, kCreation, kOther };

// Which operand dtypes a pointwise operation takes, checked after type
// promotion (so that a Bool tensor plus an int literal is an Int add).
enum class OperandTypes {
  kAny,
  // neg, abs, relu, pow: torch refuses a Bool promoted dtype (Bool ** 2 is
  // an Int pow and fine).
  kNotBool,
  // sub: torch refuses any Bool operand, even one promoted away (Bool - 1).
  kNoBoolOperand,
  // silu, gelu: torch has no integer kernel.
  kFloatingOnly,
};

struct OpInfo {
  OpType type;
  // The name in fd.ops and in printed IR.
  std::string_view name;
  OpFamily family;
  // Pointwise operations only: number of operands, promotion rule, and the
  // operand dtypes they take.
  int arity = 0;
  PromotionKind promotion = PromotionKind::kDefault;
  OperandTypes operand_types = OperandTypes::kAny;
};

const OpInfo& opInfo(OpType type);
std::string_view opName(OpType type);

// Every pointwise operation of `arity` with a Python name, in table order
// (Cast, Where and Clamp are bound by hand: they take more than tensors).
std::vector<const OpInfo*> pointwiseOps(int arity);

} // namespace mdfuser
