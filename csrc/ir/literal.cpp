// SPDX-License-Identifier: MIT
#include "ir/literal.h"

#include <charconv>

#include "ir/container.h"
#include "ir/errors.h"

namespace mdfuser {

namespace {

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

} // namespace

DataType defaultDtype(const Literal::Value& value) {
  if (std::holds_alternative<bool>(value)) {
    return DataType::Bool;
  }
  if (std::holds_alternative<int64_t>(value)) {
    return DataType::Int;
  }
  return DataType::Double;
}

Literal::Literal(IrContainer* container, Value value, DataType dtype)
    : Val(container), value_(value), dtype_(dtype) {
  const bool fits = std::holds_alternative<bool>(value)
                        ? dtype == DataType::Bool
                    : std::holds_alternative<int64_t>(value)
                        ? isIntegralType(dtype) || isFloatingType(dtype)
                        : isFloatingType(dtype);
  MDF_TYPE_CHECK(
      fits,
      "define_scalar: ",
      valueString(value),
      " cannot be a ",
      dtype,
      "; expected a value of its kind (Bool for bools, Int, Int32 or a "
      "floating type for integers, a floating type for floats)");
  // An integer given a floating dtype is stored as what it now is.
  if (std::holds_alternative<int64_t>(value) && isFloatingType(dtype)) {
    value_ = static_cast<double>(std::get<int64_t>(value));
  }
}

double Literal::asDouble() const {
  if (const bool* b = std::get_if<bool>(&value_)) {
    return *b ? 1.0 : 0.0;
  }
  if (const int64_t* i = std::get_if<int64_t>(&value_)) {
    return static_cast<double>(*i);
  }
  return std::get<double>(value_);
}

std::string Literal::toString() const {
  const std::string s = valueString(value_);
  if (dtype_ == defaultDtype(value_)) {
    return s;
  }
  return std::string(typeString(dtype_)) + "(" + s + ")";
}

Statement* Literal::cloneInto(IrCloner& cloner) const {
  return cloner.target()->create<Literal>(value_, dtype_);
}

} // namespace mdfuser
