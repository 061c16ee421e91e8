// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <string>
#include <variant>

#include "ir/base_nodes.h"
#include "ir/dtype.h"

namespace mdfuser {

// A typed constant operand of a pointwise operation: define_scalar(0.5) or
// a Python number. Like a Python number in torch, it takes part in type
// promotion only through its category (bool, integer, floating): a
// BFloat16 tensor times the Double 0.5 stays BFloat16.
class Literal : public Val {
 public:
  using Value = std::variant<bool, int64_t, double>;

  // `dtype` must be able to hold `value`'s category: Bool for bools, an
  // integral or floating type for integers, a floating type for doubles.
  // User error otherwise.
  Literal(IrContainer* container, Value value, DataType dtype);

  const Value& value() const {
    return value_;
  }
  DataType dtype() const {
    return dtype_;
  }
  double asDouble() const;

  std::string_view counterKey() const override {
    return "literal";
  }
  // "0.5", "3", "true"; with the dtype when it is not the default of its
  // category: "float(0.5)", "int32(3)".
  std::string toString() const override;
  Statement* cloneInto(IrCloner& cloner) const override;

 private:
  Value value_;
  DataType dtype_;
};

// The default dtype of a Python number: Bool, Int or Double.
DataType defaultDtype(const Literal::Value& value);

} // namespace mdfuser
