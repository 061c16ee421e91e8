// SPDX-License-Identifier: MIT
#include "host_ir/passes/ring_prologues_first.h"

#include <algorithm>
#include <optional>
#include <unordered_set>
#include <vector>

namespace mdfuser::hir {

namespace {

bool runsRing(const Expr* expr) {
  const auto* loop = dynamic_cast<const ForLoop*>(expr);
  if (loop == nullptr) {
    return false;
  }
  bool found = false;
  forEachExpr(loop->body(), [&](const Expr* e) {
    found = found || isCollectivePermute(e);
  });
  return found;
}

// The statements of an iteration, split where its first ring starts.
struct Parts {
  std::vector<Expr*> header; // SetCurrentStream(Stream i), Synchronize(main)
  std::vector<Expr*> prologue;
  std::vector<Expr*> rest;
};

std::optional<Parts> split(const ForLoop& loop) {
  const std::vector<Expr*>& body = loop.body().exprs();
  if (body.size() < 2) {
    return std::nullopt;
  }
  const auto* set = dynamic_cast<const SetCurrentStream*>(body[0]);
  if (set == nullptr || set->stream()->index() != loop.index() ||
      dynamic_cast<const Synchronize*>(body[1]) == nullptr) {
    return std::nullopt; // not a loop AssignStreams put on worker streams
  }
  const auto ring = std::find_if(body.begin() + 2, body.end(), runsRing);
  if (ring == body.end()) {
    return std::nullopt;
  }
  return Parts{
      {body.begin(), body.begin() + 2},
      {body.begin() + 2, ring},
      {ring, body.end()}};
}

// The tensors `exprs` read or write, loop bodies included.
std::unordered_set<const Val*> tensorsOf(const std::vector<Expr*>& exprs) {
  std::unordered_set<const Val*> used;
  for (const Expr* expr : exprs) {
    auto note = [&](const Expr* e) {
      used.insert(e->inputs().begin(), e->inputs().end());
      used.insert(e->outputs().begin(), e->outputs().end());
    };
    note(expr);
    if (const auto* loop = dynamic_cast<const ForLoop*>(expr)) {
      forEachExpr(loop->body(), note);
    }
  }
  return used;
}

// Rewrites `loop` into the two loops, appended to `out`; false (nothing
// appended) when it does not qualify.
bool rewrite(HostIrContainer& hic, ForLoop* loop, std::vector<Expr*>& out) {
  std::optional<Parts> parts = split(*loop);
  if (!parts) {
    return false;
  }
  bool computes = false;
  for (const Expr* expr : parts->prologue) {
    if (dynamic_cast<const Communication*>(expr) != nullptr ||
        dynamic_cast<const Wait*>(expr) != nullptr ||
        dynamic_cast<const SetCurrentStream*>(expr) != nullptr ||
        dynamic_cast<const Synchronize*>(expr) != nullptr ||
        dynamic_cast<const ForLoop*>(expr) != nullptr) {
      return false;
    }
    computes |= dynamic_cast<const TensorOp*>(expr) != nullptr;
  }
  if (!computes) {
    return false;
  }

  // What the rest needs of the prologue: views, made again in the same
  // order. A buffer allocated in the iteration before the ring and used
  // by it would be needed for every chunk at once: such loops stay.
  std::unordered_set<const Val*> needed = tensorsOf(parts->rest);
  std::vector<Expr*> again;
  for (auto it = parts->prologue.rbegin(); it != parts->prologue.rend(); ++it) {
    if (std::optional<ViewOf> view = asView(*it)) {
      if (needed.count(view->view) != 0) {
        again.push_back(*it);
        needed.insert(view->source);
      }
    } else if (const auto* alloc = dynamic_cast<const Allocate*>(*it)) {
      if (needed.count(alloc->buffer()) != 0) {
        return false;
      }
    }
  }
  std::reverse(again.begin(), again.end());

  Scalar* i = loop->index();
  auto* previous = hic.create<Stream>(
      max(sub(i, constant(hic.ir(), 1)), constant(hic.ir(), 0)));
  std::vector<Expr*> a = parts->header;
  a.push_back(hic.create<Synchronize>(previous));
  a.insert(a.end(), parts->prologue.begin(), parts->prologue.end());
  loop->body().setExprs(std::move(a));
  out.push_back(loop);

  auto* rings =
      hic.create<ForLoop>(i, loop->start(), loop->stop(), ParallelType::Stream);
  std::vector<Expr*> b{hic.create<SetCurrentStream>(hic.create<Stream>(i))};
  b.insert(b.end(), again.begin(), again.end());
  b.insert(b.end(), parts->rest.begin(), parts->rest.end());
  rings->body().setExprs(std::move(b));
  out.push_back(rings);
  return true;
}

} // namespace

void ringProloguesFirst(HostIrContainer& hic) {
  std::vector<Expr*> exprs;
  for (Expr* expr : hic.topLevel().exprs()) {
    auto* loop = dynamic_cast<ForLoop*>(expr);
    if (loop == nullptr || loop->parallelType() != ParallelType::Stream ||
        !rewrite(hic, loop, exprs)) {
      exprs.push_back(expr);
    }
  }
  hic.topLevel().setExprs(std::move(exprs));
}

} // namespace mdfuser::hir
