// SPDX-License-Identifier: MIT
#include "ir/scalar.h"

#include <algorithm>

#include "ir/container.h"
#include "ir/errors.h"

namespace mdfuser {

Scalar::Scalar(IrContainer* container, int64_t value)
    : Val(container), role_(Role::kConstant), value_(value) {}

Scalar::Scalar(IrContainer* container, Role role)
    : Val(container), role_(role) {
  MDF_CHECK(role != Role::kConstant, "a constant needs a value");
}

void Scalar::choose(int64_t value) {
  MDF_CHECK(role_ == Role::kChosen, toString(), " is not a count to choose");
  MDF_CHECK(value > 0, "a chosen count must be positive, got ", value);
  role_ = Role::kConstant;
  value_ = value;
}

int64_t Scalar::value() const {
  MDF_CHECK(value_.has_value(), "i", name(), " is not a constant");
  return *value_;
}

std::string_view Scalar::counterKey() const {
  // Only free symbols are ever printed by name; keeping the others out of
  // that counter gives readable names (i0, i1, ...).
  switch (role_) {
    case Role::kConstant:
      return "constant";
    case Role::kSymbol:
      return "i";
    case Role::kDerived:
      return "derived";
    case Role::kChosen:
      return "auto";
  }
  MDF_UNREACHABLE();
}

std::string Scalar::toString() const {
  switch (role_) {
    case Role::kConstant:
      return std::to_string(*value_);
    case Role::kSymbol:
      return "i" + std::to_string(name());
    case Role::kDerived:
      MDF_CHECK(definition() != nullptr, "derived scalar without definition");
      return definition()->toString();
    case Role::kChosen:
      return "auto";
  }
  MDF_UNREACHABLE();
}

Statement* Scalar::cloneInto(IrCloner& cloner) const {
  if (isConst()) {
    return cloner.target()->create<Scalar>(*value_);
  }
  return cloner.target()->create<Scalar>(role_);
}

ScalarOp::ScalarOp(
    IrContainer* container,
    ScalarOpType type,
    Scalar* out,
    Scalar* lhs,
    Scalar* rhs)
    : Expr(container, {lhs, rhs}, {out}), type_(type) {
  MDF_CHECK(out->role() == Scalar::Role::kDerived);
  registerAsDefinition();
}

Scalar* ScalarOp::out() const {
  return static_cast<Scalar*>(output(0));
}

namespace {

const char* infixSymbol(ScalarOpType type) {
  switch (type) {
    case ScalarOpType::Add:
      return "+";
    case ScalarOpType::Sub:
      return "-";
    case ScalarOpType::Mul:
      return "*";
    case ScalarOpType::Div:
      return "/";
    case ScalarOpType::Mod:
      return "%";
    default:
      return nullptr;
  }
}

const char* functionName(ScalarOpType type) {
  switch (type) {
    case ScalarOpType::CeilDiv:
      return "ceilDiv";
    case ScalarOpType::Min:
      return "min";
    case ScalarOpType::Max:
      return "max";
    default:
      return nullptr;
  }
}

// An operand of an infix operator gets parentheses when it is itself infix.
std::string operandString(const Scalar* s) {
  if (s->role() == Scalar::Role::kDerived) {
    auto* op = static_cast<const ScalarOp*>(s->definition());
    if (infixSymbol(op->type()) != nullptr) {
      return "(" + s->toString() + ")";
    }
  }
  return s->toString();
}

} // namespace

std::string ScalarOp::toString() const {
  if (const char* fn = functionName(type_)) {
    return std::string(fn) + "(" + lhs()->toString() + ", " +
           rhs()->toString() + ")";
  }
  return operandString(lhs()) + " " + infixSymbol(type_) + " " +
         operandString(rhs());
}

Statement* ScalarOp::cloneInto(IrCloner& cloner) const {
  return cloner.target()->create<ScalarOp>(
      type_, cloner.clone(out()), cloner.clone(lhs()), cloner.clone(rhs()));
}

int64_t evaluate(ScalarOpType type, int64_t lhs, int64_t rhs) {
  switch (type) {
    case ScalarOpType::Add:
      return lhs + rhs;
    case ScalarOpType::Sub:
      return lhs - rhs;
    case ScalarOpType::Mul:
      return lhs * rhs;
    case ScalarOpType::Div:
      MDF_CHECK(rhs != 0, "division by zero");
      return lhs / rhs;
    case ScalarOpType::CeilDiv:
      MDF_CHECK(rhs != 0, "division by zero");
      return (lhs + rhs - 1) / rhs;
    case ScalarOpType::Mod:
      MDF_CHECK(rhs != 0, "division by zero");
      return lhs % rhs;
    case ScalarOpType::Min:
      return std::min(lhs, rhs);
    case ScalarOpType::Max:
      return std::max(lhs, rhs);
  }
  MDF_UNREACHABLE();
}

Scalar* constant(IrContainer* container, int64_t value) {
  return container->create<Scalar>(value);
}

Scalar* symbol(IrContainer* container) {
  return container->create<Scalar>(Scalar::Role::kSymbol);
}

Scalar* chosenCount(IrContainer* container) {
  return container->create<Scalar>(Scalar::Role::kChosen);
}

namespace {

Scalar* binary(ScalarOpType type, Scalar* lhs, Scalar* rhs) {
  MDF_CHECK(lhs->container() == rhs->container());
  IrContainer* container = lhs->container();
  if (lhs->isConst() && rhs->isConst()) {
    return constant(container, evaluate(type, lhs->value(), rhs->value()));
  }
  auto* out = container->create<Scalar>(Scalar::Role::kDerived);
  container->create<ScalarOp>(type, out, lhs, rhs);
  return out;
}

bool isConstValue(const Scalar* s, int64_t value) {
  return s->isConst() && s->value() == value;
}

} // namespace

Scalar* add(Scalar* lhs, Scalar* rhs) {
  if (isConstValue(rhs, 0)) {
    return lhs;
  }
  if (isConstValue(lhs, 0)) {
    return rhs;
  }
  return binary(ScalarOpType::Add, lhs, rhs);
}

Scalar* sub(Scalar* lhs, Scalar* rhs) {
  if (isConstValue(rhs, 0)) {
    return lhs;
  }
  return binary(ScalarOpType::Sub, lhs, rhs);
}

Scalar* mul(Scalar* lhs, Scalar* rhs) {
  if (isConstValue(rhs, 1)) {
    return lhs;
  }
  if (isConstValue(lhs, 1)) {
    return rhs;
  }
  return binary(ScalarOpType::Mul, lhs, rhs);
}

Scalar* div(Scalar* lhs, Scalar* rhs) {
  if (isConstValue(rhs, 1)) {
    return lhs;
  }
  return binary(ScalarOpType::Div, lhs, rhs);
}

Scalar* ceilDiv(Scalar* lhs, Scalar* rhs) {
  if (isConstValue(rhs, 1)) {
    return lhs;
  }
  return binary(ScalarOpType::CeilDiv, lhs, rhs);
}

Scalar* mod(Scalar* lhs, Scalar* rhs) {
  if (isConstValue(rhs, 1)) {
    return constant(lhs->container(), 0);
  }
  return binary(ScalarOpType::Mod, lhs, rhs);
}

Scalar* min(Scalar* lhs, Scalar* rhs) {
  if (lhs == rhs) {
    return lhs;
  }
  return binary(ScalarOpType::Min, lhs, rhs);
}

Scalar* max(Scalar* lhs, Scalar* rhs) {
  if (lhs == rhs) {
    return lhs;
  }
  return binary(ScalarOpType::Max, lhs, rhs);
}

} // namespace mdfuser
