// SPDX-License-Identifier: MIT
#include "host_ir/host_ir_container.h"

#include <sstream>

#include "ir/errors.h"

namespace mdfuser::hir {

HostIrContainer::HostIrContainer(std::unique_ptr<Fusion> fusion)
    : fusion_(std::move(fusion)) {
  MDF_CHECK(fusion_ != nullptr);
}

namespace {

void printScope(std::ostream& os, const Scope& scope, int depth) {
  const std::string indent(2 * depth, ' ');
  for (const Expr* expr : scope.exprs()) {
    std::istringstream lines(expr->toString());
    for (std::string line; std::getline(lines, line);) {
      os << indent << line << "\n";
    }
    if (const auto* loop = dynamic_cast<const ForLoop*>(expr)) {
      printScope(os, loop->body(), depth + 1);
    }
  }
}

template <typename T>
std::string valList(const std::vector<T*>& vals) {
  std::string s = "(";
  for (size_t i = 0; i < vals.size(); ++i) {
    s += (i > 0 ? ", " : "") + vals[i]->toString();
  }
  return s + ")";
}

} // namespace

std::string HostIrContainer::toString() const {
  std::ostringstream ss;
  // Tensors and scalar inputs in the order defined: execute's arguments.
  ss << "%HostIrContainer { " << valList(fusion().allInputs()) << " -> "
     << valList(outputs()) << " :\n";
  printScope(ss, top_level_, 1);
  ss << "} // %HostIrContainer\n";
  return ss.str();
}

} // namespace mdfuser::hir
