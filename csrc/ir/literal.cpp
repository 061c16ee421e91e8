// SPDX-License-Identifier: MIT
#include "ir/literal.h"

#include <charconv>

#include "ir/container.h"
#include "ir/errors.h"

namespace mdfuser {

std::string valueString(const Literal::Value& value) {
  if (const bool* b = std::get_if<bool>(&value)) {
    return *b ? "true" : "false";
  }
  if (const int64_t* i = std::get_if<int64_t>(&value)) {
    return std::to_string(*i);
  }
  const double d = std::get<double>(value);
  char buffer[32];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), d);
  MDF_CHECK(ec == std::errc(), "cannot print ", d);
  std::string s(buffer, end);
  // Keep floating literals recognisable: "2.0", not "2".
  if (s.find_first_of(".einf") == std::string::npos) {
    s += ".0";
  }
  return s;
}

DataType defaultDtype(const Literal::Value& value) {
  if (std::holds_alternative<bool>(value)) {
    return DataType::Bool;
  }
  if (std::holds_alternative<int64_t>(value)) {
    return DataType::Int;
  }
  return DataType::Double;
}

bool Literal::fits(const Value& value, DataType dtype) {
  return std::holds_alternative<bool>(value) ? dtype == DataType::Bool
         : std::holds_alternative<int64_t>(value)
             ? isIntegralType(dtype) || isFloatingType(dtype)
             : isFloatingType(dtype);
}

Literal::Value Literal::as(const Value& value, DataType dtype) {
  MDF_CHECK(fits(value, dtype));
  if (std::holds_alternative<int64_t>(value) && isFloatingType(dtype)) {
    return static_cast<double>(std::get<int64_t>(value));
  }
  return value;
}

Literal::Literal(IrContainer* container, Value value, DataType dtype)
    : Val(container), dtype_(dtype) {
  MDF_TYPE_CHECK(
      fits(value, dtype),
      "define_scalar: ",
      valueString(value),
      " cannot be a ",
      dtype,
      "; expected a value of its kind (Bool for bools, Int, Int32 or a "
      "floating type for integers, a floating type for floats)");
  // An integer given a floating dtype is stored as what it now is.
  value_ = as(value, dtype);
}

Literal::Literal(IrContainer* container, DataType dtype)
    : Val(container), dtype_(dtype) {
  MDF_TYPE_CHECK(
      dtype == DataType::Bool || isIntegralType(dtype) || isFloatingType(dtype),
      "define_scalar: a scalar input cannot be a ",
      dtype,
      "; expected Bool, an integral or a floating type");
}

const Literal::Value& Literal::value() const {
  MDF_CHECK(
      value_.has_value(),
      "the scalar input ",
      toString(),
      " has no value here");
  return *value_;
}

double Literal::asDouble() const {
  const Value& v = value();
  if (const bool* b = std::get_if<bool>(&v)) {
    return *b ? 1.0 : 0.0;
  }
  if (const int64_t* i = std::get_if<int64_t>(&v)) {
    return static_cast<double>(*i);
  }
  return std::get<double>(v);
}

std::string Literal::toString() const {
  if (isSymbolic()) {
    const std::string s = "s" + std::to_string(name());
    const bool plain = dtype_ == DataType::Bool || dtype_ == DataType::Int ||
                       dtype_ == DataType::Double;
    return plain ? s : std::string(typeString(dtype_)) + "(" + s + ")";
  }
  const std::string s = valueString(*value_);
  if (dtype_ == defaultDtype(*value_)) {
    return s;
  }
  return std::string(typeString(dtype_)) + "(" + s + ")";
}

Statement* Literal::cloneInto(IrCloner& cloner) const {
  if (isSymbolic()) {
    return cloner.target()->create<Literal>(dtype_);
  }
  return cloner.target()->create<Literal>(*value_, dtype_);
}

} // namespace mdfuser
