// SPDX-License-Identifier: MIT
#include "host_ir/passes/fold_casts.h"

#include <unordered_map>
#include <vector>

#include "ir/ops.h"

namespace mdfuser::hir {

namespace {

// Whether `op`, writing its computation dtype, can write `dtype` instead
// and compute the same values rounded once.
bool foldable(const PointwiseOp& op, DataType dtype) {
  if (!isReducedPrecision(dtype) || op.type() == OpType::Cast ||
      !widensReducedPrecision(opInfo(op.type()).promotion) ||
      op.computationDtype() != DataType::Float ||
      op.out()->dtype() != DataType::Float) {
    return false;
  }
  for (const TensorView* in : op.tensorInputs()) {
    if (!isFloatingType(in->dtype())) {
      return false;
    }
  }
  return true;
}

void fold(
    HostIrContainer& hic,
    Scope& scope,
    const std::unordered_map<const Val*, int>& uses) {
  std::unordered_map<const TensorView*, PointwiseOp*> defs;
  // Each folded operation, and the operation writing the cast's output
  // that takes the cast's place.
  std::unordered_map<const Expr*, Expr*> replacement;
  for (Expr* e : scope.exprs()) {
    if (auto* loop = dynamic_cast<ForLoop*>(e)) {
      fold(hic, loop->body(), uses);
      continue;
    }
    auto* op = dynamic_cast<PointwiseOp*>(e);
    if (op == nullptr) {
      continue;
    }
    if (op->type() != OpType::Cast) {
      defs[op->out()] = op;
      continue;
    }
    const auto* t = dynamic_cast<const TensorView*>(op->inputs()[0]);
    auto def = defs.find(t);
    if (def == defs.end() || hic.isOutput(t) || uses.at(t) != 1 ||
        !foldable(*def->second, op->out()->dtype())) {
      continue;
    }
    replacement[def->second] = nullptr;
    replacement[op] =
        def->second->recreate(hic.ir(), def->second->inputs(), {op->out()});
  }
  if (replacement.empty()) {
    return;
  }
  std::vector<Expr*> exprs;
  for (Expr* e : scope.exprs()) {
    auto it = replacement.find(e);
    if (it == replacement.end()) {
      exprs.push_back(e);
    } else if (it->second != nullptr) {
      exprs.push_back(it->second);
    }
  }
  scope.setExprs(std::move(exprs));
}

} // namespace

void foldCasts(HostIrContainer& hic) {
  std::unordered_map<const Val*, int> uses;
  forEachExpr(hic.topLevel(), [&](const Expr* e) {
    for (const Val* in : e->inputs()) {
      ++uses[in];
    }
  });
  fold(hic, hic.topLevel(), uses);
}

} // namespace mdfuser::hir
