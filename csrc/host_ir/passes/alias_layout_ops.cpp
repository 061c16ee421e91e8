// SPDX-License-Identifier: MIT
#include "host_ir/passes/alias_layout_ops.h"

#include <unordered_set>

#include "ir/ops.h"

namespace mdfuser::hir {

namespace {

bool isLayoutOp(const TensorOp* op) {
  switch (op->type()) {
    case OpType::Permute:
    case OpType::Slice:
    case OpType::Squeeze:
    case OpType::Broadcast:
    case OpType::Reshape:
      return true;
    default:
      return false;
  }
}

void collectViews(
    const Scope& scope, std::unordered_set<const TensorView*>& views) {
  forEachExpr(scope, [&](const Expr* e) {
    if (std::optional<ViewOf> view = asView(e)) {
      views.insert(view->view);
    }
  });
}

void rewrite(
    HostIrContainer& hic,
    Scope& scope,
    const std::unordered_set<const TensorView*>& chunk_views) {
  std::vector<Expr*> exprs;
  for (Expr* e : scope.exprs()) {
    if (auto* loop = dynamic_cast<ForLoop*>(e)) {
      rewrite(hic, loop->body(), chunk_views);
    }
    auto* op = dynamic_cast<TensorOp*>(e);
    if (op != nullptr && isLayoutOp(op) && !hic.isOutput(op->out()) &&
        chunk_views.count(op->out()) == 0) {
      exprs.push_back(hic.create<View>(op));
      continue;
    }
    exprs.push_back(e);
  }
  scope.setExprs(std::move(exprs));
}

} // namespace

void aliasLayoutOps(HostIrContainer& hic) {
  // Results written through a chunk view of a longer-lived tensor.
  std::unordered_set<const TensorView*> chunk_views;
  collectViews(hic.topLevel(), chunk_views);
  rewrite(hic, hic.topLevel(), chunk_views);
}

} // namespace mdfuser::hir
