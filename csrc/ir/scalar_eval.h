// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>

#include "ir/scalar.h"

namespace mdfuser {

// Evaluates scalar expressions given values for their free symbols.
class ScalarEvaluator {
 public:
  void bind(const Scalar* symbol, int64_t value);
  bool isBound(const Scalar* symbol) const;

  // nullopt when the expression depends on an unbound symbol.
  std::optional<int64_t> tryEvaluate(const Scalar* scalar) const;
  // Fails (internal error) when a symbol is unbound.
  int64_t evaluate(const Scalar* scalar) const;

 private:
  std::unordered_map<const Scalar*, int64_t> bindings_;
};

} // namespace mdfuser
