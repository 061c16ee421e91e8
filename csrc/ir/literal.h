// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "ir/base_nodes.h"
#include "ir/dtype.h"

namespace mdfuser {

// A typed scalar operand of a pointwise operation: a constant
// (define_scalar(0.5) or a Python number), or a scalar input of the fusion
// whose value each execute gives (define_scalar(None, dtype), symbolic).
// Like a Python number in torch, it takes part in type promotion only
// through its category (bool, integer, floating): a BFloat16 tensor times
// the Double 0.5 stays BFloat16.
class Literal : public Val {
 public:
  using Value = std::variant<bool, int64_t, double>;

  // A constant. `dtype` must be able to hold `value`'s category (fits()):
  // user error otherwise.
  Literal(IrContainer* container, Value value, DataType dtype);
  // A symbolic scalar of `dtype` (Bool, an integral or a floating type),
  // given at run time.
  Literal(IrContainer* container, DataType dtype);

  bool isSymbolic() const {
    return !value_.has_value();
  }
  // Only for constants.
  const Value& value() const;
  DataType dtype() const {
    return dtype_;
  }
  // Only for constants.
  double asDouble() const;

  // Whether `dtype` can hold `value`: Bool for bools, an integral or
  // floating type for integers, a floating type for doubles.
  static bool fits(const Value& value, DataType dtype);
  // `value` as the kind of value `dtype` holds (an integer given a floating
  // type becomes a double); `value` must fit.
  static Value as(const Value& value, DataType dtype);

  std::string_view counterKey() const override {
    return "literal";
  }
  // "0.5", "3", "true"; with the dtype when it is not the default of its
  // category: "float(0.5)", "int32(3)". A symbolic one is named by its
  // number: "s2", "float(s2)".
  std::string toString() const override;
  Statement* cloneInto(IrCloner& cloner) const override;

 private:
  std::optional<Value> value_;
  DataType dtype_;
};

// "true", "3", "0.5".
std::string valueString(const Literal::Value& value);

// The default dtype of a Python number: Bool, Int or Double.
DataType defaultDtype(const Literal::Value& value);

} // namespace mdfuser
