// SPDX-License-Identifier: MIT
#include "host_ir/passes/assign_streams.h"

#include <algorithm>

#include "ir/errors.h"

namespace mdfuser::hir {

namespace {

// True when `loop` already switches to its worker stream.
bool isAssigned(const ForLoop* loop) {
  for (const Expr* expr : loop->body().exprs()) {
    const auto* set = dynamic_cast<const SetCurrentStream*>(expr);
    if (set != nullptr && set->stream()->index() == loop->index()) {
      return true;
    }
  }
  return false;
}

// Whether `expr`, or a statement of the loop it is, satisfies `is`.
template <typename Predicate>
bool holds(const Expr* expr, Predicate is) {
  bool found = is(expr);
  if (const auto* loop = dynamic_cast<const ForLoop*>(expr)) {
    forEachExpr(loop->body(), [&](const Expr* e) { found = found || is(e); });
  }
  return found;
}

bool isCollective(const Expr* expr) {
  return holds(expr, [](const Expr* e) {
    // A fused matmul–communication statement communicates too.
    const auto* c = dynamic_cast<const Communication*>(e);
    return (c != nullptr &&
            c->type() != CommunicationType::CollectivePermute) ||
           dynamic_cast<const FusedMatmulCommunication*>(e) != nullptr;
  });
}

bool holdsPermute(const Expr* expr) {
  return holds(expr, isCollectivePermute);
}

bool isContraction(const Expr* expr) {
  return holds(expr, [](const Expr* e) {
    const auto* op = dynamic_cast<const TensorOp*>(e);
    if (op == nullptr) {
      return false;
    }
    switch (op->type()) {
      case OpType::Linear:
      case OpType::Matmul:
      case OpType::GroupedMm:
      case OpType::SdpaFwd:
      case OpType::SdpaBwd:
        return true;
      default:
        return false;
    }
  });
}

// Where an iteration of StreamSchedule::kCommunicationPerStream moves to
// its worker stream: at its first collective, which the stream it is
// issued on waits for; but where moves to peers (CollectivePermutes, which
// go to communication streams of their own) come before it, right after
// the last contraction before it (a statement counts as what it holds: a
// ring's loop of steps as a move and a contraction), so that the GEMMs of a
// decomposition run on the main stream in iteration order and what follows them
// (the sums of arrivals, the moves of the reduced parts and their waits)
// overlaps the next iteration's. At the top for an iteration that does not
// communicate: nothing to overlap.
size_t workerFrom(const std::vector<Expr*>& body) {
  const auto communicates = [](const Expr* e) {
    return isCollective(e) || holdsPermute(e);
  };
  if (std::none_of(body.begin(), body.end(), communicates)) {
    return 0;
  }
  const size_t collective = static_cast<size_t>(
      std::find_if(body.begin(), body.end(), isCollective) - body.begin());
  const size_t permute = static_cast<size_t>(
      std::find_if(body.begin(), body.end(), holdsPermute) - body.begin());
  if (permute >= collective) {
    return collective;
  }
  size_t after_contraction = 0;
  for (size_t i = 0; i < collective; ++i) {
    if (isContraction(body[i])) {
      after_contraction = i + 1;
    }
  }
  return std::max(permute, after_contraction);
}

void assignScope(HostIrContainer& hic, Scope& scope, StreamSchedule schedule) {
  std::vector<Expr*> exprs;
  for (Expr* expr : scope.exprs()) {
    auto* loop = dynamic_cast<ForLoop*>(expr);
    if (loop == nullptr) {
      exprs.push_back(expr);
      continue;
    }
    assignScope(hic, loop->body(), schedule);
    if (loop->parallelType() != ParallelType::Stream) {
      exprs.push_back(loop);
      continue;
    }
    MDF_CHECK(
        !isAssigned(loop),
        "AssignStreams ran twice on the loop ",
        loop->toString());

    auto* main = hic.create<Stream>();
    exprs.push_back(hic.create<GetCurrentStream>(main));

    const auto& old_body = loop->body().exprs();
    const auto on_worker = schedule == StreamSchedule::kCommunicationPerStream
                               ? old_body.begin() + static_cast<std::ptrdiff_t>(
                                                        workerFrom(old_body))
                               : old_body.begin();
    std::vector<Expr*> body(old_body.begin(), on_worker);
    body.push_back(
        hic.create<SetCurrentStream>(hic.create<Stream>(loop->index())));
    body.push_back(hic.create<Synchronize>(main));
    body.insert(body.end(), on_worker, old_body.end());
    if (on_worker != old_body.begin()) {
      body.push_back(hic.create<SetCurrentStream>(main));
    }
    loop->body().setExprs(std::move(body));
    exprs.push_back(loop);

    exprs.push_back(hic.create<SetCurrentStream>(main));
    auto* join = hic.create<ForLoop>(
        symbol(hic.ir()), loop->start(), loop->stop(), ParallelType::Serial);
    join->body().pushBack(
        hic.create<Synchronize>(hic.create<Stream>(join->index())));
    exprs.push_back(join);
  }
  scope.setExprs(std::move(exprs));
}

} // namespace

void assignStreams(HostIrContainer& hic, StreamSchedule schedule) {
  assignScope(hic, hic.topLevel(), schedule);
}

} // namespace mdfuser::hir
