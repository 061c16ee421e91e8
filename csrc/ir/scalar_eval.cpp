// SPDX-License-Identifier: MIT
#include "ir/scalar_eval.h"

#include <algorithm>

#include "ir/errors.h"

namespace mdfuser {

void ScalarEvaluator::bind(const Scalar* symbol, int64_t value) {
  MDF_CHECK(
      symbol->role() == Scalar::Role::kSymbol,
      "only free symbols can be bound, not ",
      symbol->toString());
  bindings_[symbol] = {value, ++binds_};
}

bool ScalarEvaluator::isBound(const Scalar* symbol) const {
  return bindings_.count(symbol) != 0;
}

std::optional<int64_t> ScalarEvaluator::stillValid(
    const Remembered& remembered) const {
  for (const Scalar* symbol : remembered.symbols) {
    auto it = bindings_.find(symbol);
    if (it == bindings_.end() || it->second.stamp > remembered.stamp) {
      return std::nullopt;
    }
  }
  return remembered.value;
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
      return it->second.value;
    }
    case Scalar::Role::kDerived: {
      auto it = derived_.find(scalar);
      if (it != derived_.end()) {
        if (std::optional<int64_t> value = stillValid(it->second)) {
          return value;
        }
      }
      const auto* op = static_cast<const ScalarOp*>(scalar->definition());
      std::optional<int64_t> lhs = tryEvaluate(op->lhs());
      std::optional<int64_t> rhs = tryEvaluate(op->rhs());
      if (!lhs.has_value() || !rhs.has_value()) {
        return std::nullopt;
      }
      const int64_t value = mdfuser::evaluate(op->type(), *lhs, *rhs);
      // The operands' evaluation may have rehashed the map.
      Remembered& remembered = derived_[scalar];
      if (remembered.stamp == 0) {
        // First evaluated: the symbols it depends on, the operands' own.
        for (const Scalar* operand : {op->lhs(), op->rhs()}) {
          if (operand->role() == Scalar::Role::kSymbol) {
            remembered.symbols.push_back(operand);
          } else if (operand->role() == Scalar::Role::kDerived) {
            const std::vector<const Scalar*>& theirs =
                derived_.at(operand).symbols;
            remembered.symbols.insert(
                remembered.symbols.end(), theirs.begin(), theirs.end());
          }
        }
        std::sort(remembered.symbols.begin(), remembered.symbols.end());
        remembered.symbols.erase(
            std::unique(remembered.symbols.begin(), remembered.symbols.end()),
            remembered.symbols.end());
      }
      remembered.value = value;
      remembered.stamp = binds_;
      return value;
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
