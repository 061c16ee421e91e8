// SPDX-License-Identifier: MIT
#include "host_ir/passes/assign_streams.h"

#include "ir/errors.h"

namespace mdfuser::hir {

namespace {

// True when `loop` already starts by switching to its worker stream.
bool isAssigned(const ForLoop* loop) {
  const auto& body = loop->body().exprs();
  if (body.empty()) {
    return false;
  }
  const auto* set = dynamic_cast<const SetCurrentStream*>(body.front());
  return set != nullptr && set->stream()->index() == loop->index();
}

void assignScope(HostIrContainer& hic, Scope& scope) {
  std::vector<Expr*> exprs;
  for (Expr* expr : scope.exprs()) {
    auto* loop = dynamic_cast<ForLoop*>(expr);
    if (loop == nullptr) {
      exprs.push_back(expr);
      continue;
    }
    assignScope(hic, loop->body());
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

    std::vector<Expr*> body;
    body.push_back(
        hic.create<SetCurrentStream>(hic.create<Stream>(loop->index())));
    body.push_back(hic.create<Synchronize>(main));
    const auto& old_body = loop->body().exprs();
    body.insert(body.end(), old_body.begin(), old_body.end());
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

void assignStreams(HostIrContainer& hic) {
  assignScope(hic, hic.topLevel());
}

} // namespace mdfuser::hir
