// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ir/base_nodes.h"

namespace mdfuser {

// An integer used for extents, split factors and loop indices. It is one of
//  - a constant,
//  - a free symbol (an extent known only at run time, a loop index), printed
//    i<name>,
//  - the result of a ScalarOp on other scalars, printed as that expression,
//  - a count mdfuser chooses when it compiles the fusion (the factor of an
//    outer_split given none, the number of stream chunks), printed "auto";
//    the compiled copy of the fusion makes it a constant (choose).
class Scalar : public Val {
 public:
  enum class Role { kConstant, kSymbol, kDerived, kChosen };

  // A constant.
  Scalar(IrContainer* container, int64_t value);
  // A free symbol or, when `role` is kDerived, the future output of a
  // ScalarOp.
  Scalar(IrContainer* container, Role role);

  Role role() const {
    return role_;
  }
  bool isConst() const {
    return role_ == Role::kConstant;
  }
  // Only for constants.
  int64_t value() const;
  // A chosen count becomes the constant `value`.
  void choose(int64_t value);
  std::optional<int64_t> constValue() const {
    return value_;
  }

  std::string_view counterKey() const override;
  std::string toString() const override;
  Statement* cloneInto(IrCloner& cloner) const override;

 private:
  Role role_;
  std::optional<int64_t> value_;
};

enum class ScalarOpType { Add, Sub, Mul, Div, CeilDiv, Mod, Min, Max };

// out = lhs <op> rhs on integers. Division rounds towards zero; CeilDiv
// rounds up for non-negative operands.
class ScalarOp : public Expr {
 public:
  ScalarOp(
      IrContainer* container,
      ScalarOpType type,
      Scalar* out,
      Scalar* lhs,
      Scalar* rhs);

  ScalarOpType type() const {
    return type_;
  }
  Scalar* out() const;
  // Inline: the evaluator reads them for every extent and index it
  // evaluates. The constructor takes exactly two inputs.
  Scalar* lhs() const {
    return static_cast<Scalar*>(inputs()[0]);
  }
  Scalar* rhs() const {
    return static_cast<Scalar*>(inputs()[1]);
  }

  std::string_view opName() const override {
    return "ScalarOp";
  }
  // The expression in infix or call form, e.g. "ceilDiv(i0, 3)".
  std::string toString() const override;
  Statement* cloneInto(IrCloner& cloner) const override;

 private:
  ScalarOpType type_;
};

int64_t evaluate(ScalarOpType type, int64_t lhs, int64_t rhs);

// Builders. They fold constants and drop identities (x * 1, ceilDiv(x, 1)),
// so extents stay readable.
Scalar* constant(IrContainer* container, int64_t value);
Scalar* symbol(IrContainer* container);
Scalar* chosenCount(IrContainer* container);
Scalar* add(Scalar* lhs, Scalar* rhs);
Scalar* sub(Scalar* lhs, Scalar* rhs);
Scalar* mul(Scalar* lhs, Scalar* rhs);
Scalar* div(Scalar* lhs, Scalar* rhs);
Scalar* ceilDiv(Scalar* lhs, Scalar* rhs);
Scalar* mod(Scalar* lhs, Scalar* rhs);
Scalar* min(Scalar* lhs, Scalar* rhs);
Scalar* max(Scalar* lhs, Scalar* rhs);

} // namespace mdfuser
