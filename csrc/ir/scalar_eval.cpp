// SPDX-License-Identifier: MIT
#include "ir/scalar_eval.h"

#include "ir/errors.h"

namespace mdfuser {

void ScalarEvaluator::bind(const Scalar* symbol, int64_t value) {
  MDF_CHECK(
      symbol->role() == Scalar::Role::kSymbol,
      "only free symbols can be bound, not ",
      symbol->toString());
  bindings_[symbol] = value;
}

bool ScalarEvaluator::isBound(const Scalar* symbol) const {
  return bindings_.count(symbol) != 0;
}

std::optional<int64_t> ScalarEvaluator::tryEvaluate(
    const Scalar* scalar) const {
  switch (scalar->role()) {
    case Scalar::Role::kConstant:
      return scalar->value();
    case Scalar::Role::kSymbol: {
      auto it = bindings_.find(scalar);
      if (it == bindings_.end()) {
        return std::nullopt;
      }
      return it->second;
    }
    case Scalar::Role::kChosen:
      // Chosen when the fusion is compiled.
      return std::nullopt;
    case Scalar::Role::kDerived: {
      const auto* op = static_cast<const ScalarOp*>(scalar->definition());
      std::optional<int64_t> lhs = tryEvaluate(op->lhs());
      std::optional<int64_t> rhs = tryEvaluate(op->rhs());
      if (!lhs.has_value() || !rhs.has_value()) {
        return std::nullopt;
      }
      return mdfuser::evaluate(op->type(), *lhs, *rhs);
    }
  }
  MDF_UNREACHABLE();
}

int64_t ScalarEvaluator::evaluate(const Scalar* scalar) const {
  std::optional<int64_t> value = tryEvaluate(scalar);
  MDF_CHECK(
      value.has_value(),
      "cannot evaluate ",
      scalar->toString(),
      ": a symbol it depends on is unbound");
  return *value;
}

} // namespace mdfuser
