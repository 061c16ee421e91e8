// SPDX-License-Identifier: MIT
#include "host_ir/verifier.h"

#include <unordered_set>

#include "ir/errors.h"
#include "ir/ops.h"

namespace mdfuser::hir {

namespace {

// What is in scope at a point of the program. Copied on entering a loop
// body, so that what a body creates is gone after the loop.
struct State {
  std::unordered_set<const Val*> symbols;
  std::unordered_set<const Stream*> streams;
  std::unordered_set<const TensorView*> tensors;
  std::unordered_set<const Communication*> pending;
};

class Verifier {
 public:
  Verifier(const HostIrContainer& hic, const VerifyOptions& options)
      : hic_(hic), options_(options) {}

  void run() {
    State state;
    for (const TensorView* tv : hic_.inputs()) {
      state.tensors.insert(tv);
      for (const IterDomain* id : tv->logical()) {
        collectSymbols(id->extent(), state.symbols);
      }
    }
    verifyScope(hic_.topLevel(), state);
    MDF_CHECK(
        state.pending.empty(),
        "Communication ",
        (*state.pending.begin())->name(),
        " is never waited for");
  }

 private:
  static void collectSymbols(
      const Scalar* s, std::unordered_set<const Val*>& out) {
    if (s->role() == Scalar::Role::kSymbol) {
      out.insert(s);
    } else if (s->role() == Scalar::Role::kDerived) {
      for (const Val* in : s->definition()->inputs()) {
        collectSymbols(static_cast<const Scalar*>(in), out);
      }
    }
  }

  void checkScalar(const Scalar* s, const State& state, const Expr* where) {
    std::unordered_set<const Val*> symbols;
    collectSymbols(s, symbols);
    for (const Val* symbol : symbols) {
      MDF_CHECK(
          state.symbols.count(symbol) != 0,
          symbol->toString(),
          " is neither an input extent nor an enclosing loop index in: ",
          where->toString());
    }
  }

  void checkStream(
      const Stream* stream, const State& state, const Expr* where) {
    if (stream->index() != nullptr) {
      checkScalar(stream->index(), state, where);
      return;
    }
    MDF_CHECK(
        state.streams.count(stream) != 0,
        stream->toString(),
        " is used before GetCurrentStream captures it in: ",
        where->toString());
  }

  void checkTensor(
      const TensorView* tv, const State& state, const Expr* where) {
    if (!options_.buffers_allocated) {
      return;
    }
    MDF_CHECK(
        state.tensors.count(tv) != 0,
        tv->toString(),
        " is used while no buffer is bound to it, in:\n",
        where->toString());
  }

  void checkDeallocate(const Deallocate* dealloc, State& state) {
    const TensorView* tv = dealloc->buffer();
    MDF_CHECK(
        !hic_.isOutput(tv) && !hic_.isInput(tv),
        "fusion inputs and outputs are never deallocated: ",
        tv->toString());
    for (const Communication* c : state.pending) {
      MDF_CHECK(
          c->in() != tv && c->out() != tv,
          tv->toString(),
          " is deallocated while Communication ",
          c->name(),
          " may still use it");
    }
    state.tensors.erase(tv);
  }

  // A pending CollectivePermute still reads its input and writes its
  // output: `expr` may read the input, nothing else.
  static void checkPendingPermutes(const Expr* expr, const State& state) {
    for (const Communication* c : state.pending) {
      if (c->type() != CommunicationType::CollectivePermute) {
        continue;
      }
      for (const Val* v : expr->outputs()) {
        MDF_CHECK(
            v != c->in() && v != c->out(),
            v->toString(),
            " is written while Communication ",
            c->name(),
            " (a CollectivePermute) sends or receives it, in:\n",
            expr->toString());
      }
      for (const Val* v : expr->inputs()) {
        MDF_CHECK(
            v != c->out(),
            v->toString(),
            " is read while Communication ",
            c->name(),
            " (a CollectivePermute) receives into it, in:\n",
            expr->toString());
      }
    }
  }

  void verifyScope(const Scope& scope, State& state) {
    for (const Expr* expr : scope.exprs()) {
      if (const auto* loop = dynamic_cast<const ForLoop*>(expr)) {
        checkScalar(loop->start(), state, expr);
        checkScalar(loop->stop(), state, expr);
        State inner = state;
        inner.symbols.insert(loop->index());
        verifyScope(loop->body(), inner);
        MDF_CHECK(
            inner.pending.size() == state.pending.size(),
            "a Communication posted in the loop ",
            loop->toString(),
            " is not waited for inside it");
        continue;
      }
      if (const auto* get = dynamic_cast<const GetCurrentStream*>(expr)) {
        state.streams.insert(get->stream());
        continue;
      }
      if (const auto* set = dynamic_cast<const SetCurrentStream*>(expr)) {
        checkStream(set->stream(), state, expr);
        continue;
      }
      if (const auto* sync = dynamic_cast<const Synchronize*>(expr)) {
        checkStream(sync->stream(), state, expr);
        continue;
      }
      if (dynamic_cast<const SynchronizePreviousRun*>(expr) != nullptr) {
        continue;
      }
      if (const auto* alloc = dynamic_cast<const Allocate*>(expr)) {
        for (const Scalar* s : alloc->shape()) {
          checkScalar(s, state, expr);
        }
        state.tensors.insert(alloc->buffer());
        continue;
      }
      if (const auto* dealloc = dynamic_cast<const Deallocate*>(expr)) {
        checkTensor(dealloc->buffer(), state, expr);
        checkDeallocate(dealloc, state);
        continue;
      }
      if (const auto* view = dynamic_cast<const ShardView*>(expr)) {
        checkTensor(view->in(), state, expr);
        checkScalar(view->start(), state, expr);
        checkScalar(view->length(), state, expr);
        state.tensors.insert(view->out());
        continue;
      }
      if (const auto* view = dynamic_cast<const View*>(expr)) {
        checkTensor(view->in(), state, expr);
        state.tensors.insert(view->out());
        continue;
      }
      if (const auto* comm = dynamic_cast<const Communication*>(expr)) {
        checkPendingPermutes(expr, state);
        for (const TensorView* tv : {comm->in(), comm->out()}) {
          if (tv != nullptr) {
            checkTensor(tv, state, expr);
          }
        }
        state.pending.insert(comm);
        continue;
      }
      if (const auto* fused =
              dynamic_cast<const FusedMatmulCommunication*>(expr)) {
        // Its moves end within the statement: nothing stays pending.
        checkPendingPermutes(expr, state);
        checkTensor(fused->in(), state, expr);
        checkTensor(fused->weight(), state, expr);
        checkTensor(fused->out(), state, expr);
        if (!options_.buffers_allocated) {
          state.tensors.insert(fused->out());
        }
        continue;
      }
      if (const auto* wait = dynamic_cast<const Wait*>(expr)) {
        MDF_CHECK(
            state.pending.erase(wait->communication()) == 1,
            wait->toString(),
            " does not follow its Communication, or waits twice");
        continue;
      }
      const auto* op = dynamic_cast<const TensorOp*>(expr);
      MDF_CHECK(op != nullptr, "unknown host statement: ", expr->toString());
      checkPendingPermutes(expr, state);
      for (const TensorView* in : op->tensorInputs()) {
        checkTensor(in, state, expr);
      }
      for (const Val* in : op->inputs()) {
        if (const auto* s = dynamic_cast<const Scalar*>(in)) {
          checkScalar(s, state, expr);
        }
      }
      for (const TensorView* out : op->outs()) {
        checkTensor(out, state, expr);
        if (!options_.buffers_allocated) {
          state.tensors.insert(out);
        }
      }
    }
  }

  const HostIrContainer& hic_;
  const VerifyOptions& options_;
};

} // namespace

void verify(const HostIrContainer& hic, const VerifyOptions& options) {
  Verifier(hic, options).run();
}

} // namespace mdfuser::hir
