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

    // Where the iteration moves to its worker stream: at the top, or at its
    // first communication (a fused matmul–communication statement
    // communicates too).
    const auto& old_body = loop->body().exprs();
    auto on_worker = old_body.begin();
    if (schedule == StreamSchedule::kCommunicationPerStream) {
      on_worker = std::find_if(old_body.begin(), old_body.end(), [](Expr* e) {
        return dynamic_cast<Communication*>(e) != nullptr ||
               dynamic_cast<FusedMatmulCommunication*>(e) != nullptr;
      });
      if (on_worker == old_body.end()) {
        on_worker = old_body.begin();
      }
    }
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
