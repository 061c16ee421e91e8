// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "ir/scalar.h"

namespace mdfuser {

// Evaluates scalar expressions given values for their free symbols.
//
// Derived values are remembered with the symbols they depend on, and stay
// valid until one of those is bound again: the host evaluator reads the
// bounds of stream chunks and ring parts, expressions that share
// subexpressions many times over (each part's start and length from the
// chunk's, each from the extent's), in every statement of a loop
// iteration, and between iterations binds only the loop's index, on which
// the extents' subexpressions do not depend.
class ScalarEvaluator {
 public:
  void bind(const Scalar* symbol, int64_t value);
  bool isBound(const Scalar* symbol) const;

  // nullopt when the expression depends on an unbound symbol.
  std::optional<int64_t> tryEvaluate(const Scalar* scalar) const;
  // Fails (internal error) when a symbol is unbound.
  int64_t evaluate(const Scalar* scalar) const;

 private:
  struct Binding {
    int64_t value = 0;
    // The count of binds when it was bound.
    uint64_t stamp = 0;
  };
  struct Remembered {
    int64_t value = 0;
    // The count of binds when `value` was computed: valid while none of
    // `symbols` (those it depends on) was bound since.
    uint64_t stamp = 0;
    std::vector<const Scalar*> symbols;
  };

  // `remembered`'s value if none of its symbols was bound since.
  std::optional<int64_t> stillValid(const Remembered& remembered) const;

  std::unordered_map<const Scalar*, Binding> bindings_;
  uint64_t binds_ = 0;
  mutable std::unordered_map<const Scalar*, Remembered> derived_;
};

} // namespace mdfuser
