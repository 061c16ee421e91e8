// SPDX-License-Identifier: MIT
#include "host_ir/passes/inplace_allreduce.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include "ir/errors.h"
#include "ir/ops.h"

namespace mdfuser::hir {

namespace {

bool mentions(const Expr* expr, const Val* val) {
  const auto& ins = expr->inputs();
  const auto& outs = expr->outputs();
  return std::find(ins.begin(), ins.end(), val) != ins.end() ||
         std::find(outs.begin(), outs.end(), val) != outs.end();
}

class Rewriter {
 public:
  explicit Rewriter(HostIrContainer& hic) : hic_(hic) {
    forEachExpr(std::as_const(hic.topLevel()), [&](const Expr* expr) {
      for (const Val* v : expr->inputs()) {
        users_[v].push_back(expr);
      }
      for (const Val* v : expr->outputs()) {
        users_[v].push_back(expr);
      }
      if (std::optional<ViewOf> view = asView(expr)) {
        view_source_[view->view] = view->source;
      }
    });
  }

  void run(Scope& scope) {
    for (Expr* expr : scope.exprs()) {
      if (auto* loop = dynamic_cast<ForLoop*>(expr)) {
        run(loop->body());
      }
    }
    // Rewrite one allreduce at a time; each rewrite rebuilds the scope.
    for (bool changed = true; changed;) {
      changed = false;
      const std::vector<Expr*> exprs = scope.exprs();
      for (size_t c = 0; c < exprs.size() && !changed; ++c) {
        auto* comm = dynamic_cast<Communication*>(exprs[c]);
        if (comm != nullptr && comm->type() == CommunicationType::Allreduce &&
            comm->in() != comm->out()) {
          changed = tryRewrite(scope, c);
        }
      }
    }
  }

 private:
  const TensorView* bufferOf(const TensorView* tv) const {
    for (auto it = view_source_.find(tv); it != view_source_.end();
         it = view_source_.find(tv)) {
      tv = it->second;
    }
    return tv;
  }

  bool tryRewrite(Scope& scope, size_t c) {
    std::vector<Expr*> exprs = scope.exprs();
    auto* comm = static_cast<Communication*>(exprs[c]);
    TensorView* temp = comm->in();
    TensorView* out = comm->out();
    if (temp == nullptr || out == nullptr) {
      return false;
    }
    if (hic_.isInput(temp) || hic_.isOutput(temp) ||
        temp->memoryType() != MemoryType::Global) {
      return false;
    }
    // The producer: the last statement before the allreduce that writes the
    // temporary, a compute operation.
    size_t p = c;
    while (p > 0 && !mentions(exprs[p - 1], temp)) {
      --p;
    }
    if (p == 0) {
      return false;
    }
    --p;
    auto* producer = dynamic_cast<TensorOp*>(exprs[p]);
    if (producer == nullptr || producer->outputs().size() != 1 ||
        producer->out() != temp) {
      return false;
    }
    // The temporary is used by the producer, the allreduce and its wait only.
    size_t wait = exprs.size();
    for (size_t i = c + 1; i < exprs.size(); ++i) {
      if (auto* w = dynamic_cast<Wait*>(exprs[i]);
          w != nullptr && w->communication() == comm) {
        wait = i;
      }
    }
    if (wait == exprs.size()) {
      return false;
    }
    for (const Expr* user : users_[temp]) {
      if (user != producer && user != comm && user != exprs[wait]) {
        return false;
      }
    }
    // The producer must not read the buffer it would now write.
    for (TensorView* in : producer->tensorInputs()) {
      if (bufferOf(in) == bufferOf(out)) {
        return false;
      }
    }
    // `out` must exist before the producer: a chunk view of this scope moves
    // up; anything else must be untouched between producer and allreduce.
    size_t view = exprs.size();
    for (size_t i = 0; i < c; ++i) {
      if (auto* v = dynamic_cast<ShardByStream*>(exprs[i]);
          v != nullptr && v->out() == out) {
        view = i;
      }
    }
    if (view == exprs.size()) {
      for (size_t i = p + 1; i < c; ++i) {
        if (mentions(exprs[i], out)) {
          return false;
        }
      }
    }

    comm->reduceInPlace();
    std::vector<Expr*> rebuilt;
    for (size_t i = 0; i < exprs.size(); ++i) {
      if (i == view && view > p) {
        continue;
      }
      if (i == p) {
        if (view != exprs.size() && view > p) {
          rebuilt.push_back(exprs[view]);
        }
        rebuilt.push_back(
            producer->withTensors({out}, producer->tensorInputs()));
      } else if (i == wait) {
        // A new Wait lists the buffers the collective now uses.
        rebuilt.push_back(hic_.create<Wait>(comm));
      } else {
        rebuilt.push_back(exprs[i]);
      }
    }
    scope.setExprs(std::move(rebuilt));
    return true;
  }

  HostIrContainer& hic_;
  std::unordered_map<const Val*, std::vector<const Expr*>> users_;
  std::unordered_map<const TensorView*, const TensorView*> view_source_;
};

} // namespace

void inplaceAllreduce(HostIrContainer& hic) {
  Rewriter(hic).run(hic.topLevel());
}

} // namespace mdfuser::hir
