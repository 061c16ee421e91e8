// SPDX-License-Identifier: MIT
#pragma once

#include <string>

#include "host_ir/host_ir_container.h"
#include "ir/ops.h"

namespace mdfuser::test {

// A host program in a compact form that names tensors (T3) rather than
// printing their domains, one statement per line, two spaces per nesting
// level. Pass tests compare it with what they expect.
inline std::string outline(const hir::Scope& scope, int depth = 0) {
  using namespace hir;
  auto t = [](const TensorView* tv) {
    return "T" + std::to_string(tv->name());
  };
  std::string s;
  for (const Expr* e : scope.exprs()) {
    s += std::string(2 * depth, ' ');
    if (const auto* loop = dynamic_cast<const ForLoop*>(e)) {
      s += "FOR " + loop->index()->toString() +
           (loop->parallelType() == ParallelType::Stream ? " stream"
                                                         : " serial") +
           "\n" + outline(loop->body(), depth + 1);
      continue;
    }
    if (const auto* a = dynamic_cast<const Allocate*>(e)) {
      s += "Allocate " + t(a->buffer());
    } else if (const auto* d = dynamic_cast<const Deallocate*>(e)) {
      s += "Deallocate " + t(d->buffer());
    } else if (const auto* v = dynamic_cast<const ShardByStream*>(e)) {
      s += t(v->out()) + " = ShardByStream(" + t(v->in()) + ", " +
           v->index()->toString() + ")";
    } else if (const auto* r = dynamic_cast<const RingChunk*>(e)) {
      s += t(r->out()) + " = RingChunk(" + t(r->in()) + ", " +
           r->index()->toString() + ")";
    } else if (const auto* alias = dynamic_cast<const View*>(e)) {
      s += "View(" + std::string(alias->op()->opName()) + ") " +
           t(alias->out()) + " of " + t(alias->in());
    } else if (const auto* c = dynamic_cast<const Communication*>(e)) {
      s += "Communication " + std::to_string(c->name()) + " " + t(c->in()) +
           " -> " + t(c->out());
      if (c->sendsAfter() != nullptr) {
        s += " after " + c->sendsAfter()->toString();
      }
    } else if (
        const auto* f = dynamic_cast<const FusedMatmulCommunication*>(e)) {
      s += t(f->out()) + " = " + std::string(f->opName()) + "(" + t(f->in()) +
           ", " + t(f->weight()) + ")";
    } else if (const auto* w = dynamic_cast<const Wait*>(e)) {
      s += "Wait " + std::to_string(w->communication()->name());
    } else if (const auto* g = dynamic_cast<const GetCurrentStream*>(e)) {
      s += g->stream()->toString() + " = GetCurrentStream";
    } else if (
        dynamic_cast<const SetCurrentStream*>(e) != nullptr ||
        dynamic_cast<const Synchronize*>(e) != nullptr ||
        dynamic_cast<const SynchronizePreviousRun*>(e) != nullptr) {
      s += e->toString();
    } else if (const auto* op = dynamic_cast<const TensorOp*>(e)) {
      s += t(op->out()) + " = " + std::string(op->opName()) + "(";
      const auto ins = op->tensorInputs();
      for (size_t i = 0; i < ins.size(); ++i) {
        s += (i > 0 ? ", " : "") + t(ins[i]);
      }
      s += ")";
    } else {
      s += e->toString();
    }
    s += "\n";
  }
  return s;
}

inline std::string outline(const hir::HostIrContainer& hic) {
  return outline(hic.topLevel());
}

// How many times `what` occurs in `text` (a printed program).
inline size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

} // namespace mdfuser::test
