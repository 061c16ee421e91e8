// SPDX-License-Identifier: MIT
#include "host_ir/passes/allocate_and_deallocate.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "ir/errors.h"
#include "multidevice/sharding.h"

namespace mdfuser::hir {

namespace {

// Where a statement sits: the scope and its index there.
struct Site {
  Scope* scope;
  size_t index;
  bool operator==(const Site&) const = default;
};

// A statement that is not a loop, with the sites leading to it from the top
// level (the last site is its own).
struct Leaf {
  Expr* expr;
  std::vector<Site> path;
};

void collectLeaves(
    Scope& scope, std::vector<Site>& prefix, std::vector<Leaf>& leaves) {
  for (size_t i = 0; i < scope.exprs().size(); ++i) {
    prefix.push_back({&scope, i});
    if (auto* loop = dynamic_cast<ForLoop*>(scope.exprs()[i])) {
      collectLeaves(loop->body(), prefix, leaves);
    } else {
      leaves.push_back({scope.exprs()[i], prefix});
    }
    prefix.pop_back();
  }
}

class Allocator {
 public:
  explicit Allocator(HostIrContainer& hic) : hic_(hic) {
    std::vector<Site> prefix;
    collectLeaves(hic.topLevel(), prefix, leaves_);
    for (const Leaf& leaf : leaves_) {
      if (std::optional<ViewOf> view = asView(leaf.expr)) {
        view_source_[view->view] = view->source;
      }
    }
  }

  void run() {
    // Uses of each buffer, in program order; buffers in order of first use.
    std::vector<TensorView*> buffers;
    std::unordered_map<TensorView*, std::vector<const Leaf*>> uses;
    for (const Leaf& leaf : leaves_) {
      for (TensorView* tv : buffersUsedBy(leaf.expr)) {
        auto& list = uses[tv];
        if (list.empty()) {
          buffers.push_back(tv);
        }
        if (list.empty() || list.back() != &leaf) {
          list.push_back(&leaf);
        }
      }
    }
    for (TensorView* tv : buffers) {
      place(tv, uses.at(tv));
    }
    rebuild(hic_.topLevel());
  }

 private:
  TensorView* bufferOf(TensorView* tv) const {
    for (auto it = view_source_.find(tv); it != view_source_.end();
         it = view_source_.find(tv)) {
      tv = it->second;
    }
    return tv;
  }

  std::vector<TensorView*> buffersUsedBy(const Expr* expr) const {
    std::vector<TensorView*> result;
    auto add = [&](Val* val) {
      auto* tv = dynamic_cast<TensorView*>(val);
      if (tv == nullptr) {
        return;
      }
      tv = bufferOf(tv);
      if (!hic_.isInput(tv) &&
          std::find(result.begin(), result.end(), tv) == result.end()) {
        result.push_back(tv);
      }
    };
    for (Val* v : expr->inputs()) {
      add(v);
    }
    for (Val* v : expr->outputs()) {
      add(v);
    }
    return result;
  }

  // Whether each iteration of a loop can start with a fresh buffer: the
  // first use overwrites the tensor itself, not through a view, or cuts it
  // into the parts of a ring, which writes every part before reading it.
  bool startsWithFullWrite(TensorView* tv, const Leaf& first) const {
    if (dynamic_cast<const RingChunk*>(first.expr) != nullptr) {
      return true;
    }
    if (asView(first.expr).has_value()) {
      return false;
    }
    const auto& outs = first.expr->outputs();
    const auto& ins = first.expr->inputs();
    return std::find(outs.begin(), outs.end(), tv) != outs.end() &&
           std::find(ins.begin(), ins.end(), tv) == ins.end();
  }

  void place(TensorView* tv, const std::vector<const Leaf*>& uses) {
    // Depth of the innermost scope holding every use.
    size_t depth = 0;
    auto same_at = [&](size_t d) {
      for (const Leaf* use : uses) {
        if (use->path.size() <= d + 1 || !(use->path[d] == uses[0]->path[d])) {
          return false;
        }
      }
      return true;
    };
    while (same_at(depth)) {
      ++depth;
    }
    if (hic_.isOutput(tv) || !startsWithFullWrite(tv, *uses.front())) {
      depth = 0;
    }

    Scope* scope = uses.front()->path[depth].scope;
    size_t first = uses.front()->path[depth].index;
    size_t last = first;
    for (const Leaf* use : uses) {
      first = std::min(first, use->path[depth].index);
      last = std::max(last, use->path[depth].index);
    }

    // The innermost enclosing Stream loop decides whether this buffer holds
    // one chunk.
    ForLoop* stream_loop = nullptr;
    for (size_t d = 0; d < depth; ++d) {
      const Site& site = uses.front()->path[d];
      auto* loop = static_cast<ForLoop*>(site.scope->exprs()[site.index]);
      if (loop->parallelType() == ParallelType::Stream) {
        stream_loop = loop;
      }
    }
    before_[scope][first].push_back(
        hic_.create<Allocate>(tv, shapeOf(tv, stream_loop)));
    if (!hic_.isOutput(tv)) {
      after_[scope][last].push_back(hic_.create<Deallocate>(tv));
    }
  }

  std::vector<Scalar*> shapeOf(TensorView* tv, ForLoop* stream_loop) const {
    std::vector<Scalar*> shape = localExtents(tv);
    if (stream_loop != nullptr &&
        loopAxis(tv, ParallelType::Stream) != nullptr) {
      StreamChunk chunk = streamChunk(tv, stream_loop->index());
      shape[chunk.axis] = chunk.length;
    }
    return shape;
  }

  void rebuild(Scope& scope) {
    const auto& before = before_[&scope];
    const auto& after = after_[&scope];
    std::vector<Expr*> exprs;
    for (size_t i = 0; i < scope.exprs().size(); ++i) {
      Expr* expr = scope.exprs()[i];
      if (auto it = before.find(i); it != before.end()) {
        exprs.insert(exprs.end(), it->second.begin(), it->second.end());
      }
      exprs.push_back(expr);
      if (auto it = after.find(i); it != after.end()) {
        exprs.insert(exprs.end(), it->second.begin(), it->second.end());
      }
      if (auto* loop = dynamic_cast<ForLoop*>(expr)) {
        rebuild(loop->body());
      }
    }
    scope.setExprs(std::move(exprs));
  }

  HostIrContainer& hic_;
  std::vector<Leaf> leaves_;
  std::unordered_map<TensorView*, TensorView*> view_source_;
  // Statements to insert before or after the statement at an index of a
  // scope.
  std::unordered_map<Scope*, std::map<size_t, std::vector<Expr*>>> before_;
  std::unordered_map<Scope*, std::map<size_t, std::vector<Expr*>>> after_;
};

} // namespace

void allocateAndDeallocate(HostIrContainer& hic) {
  Allocator(hic).run();
}

} // namespace mdfuser::hir
