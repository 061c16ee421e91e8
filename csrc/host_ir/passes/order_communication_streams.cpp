// SPDX-License-Identifier: MIT
#include "host_ir/passes/order_communication_streams.h"

#include <algorithm>
#include <array>
#include <unordered_map>
#include <unordered_set>

#include "ir/errors.h"

namespace mdfuser::hir {

namespace {

bool isCommunicationStream(const Expr* expr) {
  const auto* set = dynamic_cast<const SetCurrentStream*>(expr);
  return set != nullptr && set->stream()->isCommunication();
}

class Orderer {
 public:
  explicit Orderer(HostIrContainer& hic) : hic_(hic) {}

  void run() {
    forEachExpr(hic_.topLevel(), [&](const Expr* expr) {
      const auto* c = dynamic_cast<const Communication*>(expr);
      if (c != nullptr && c->backend() == CommunicatorBackend::kCuda &&
          c->landing() != nullptr) {
        landings_.insert(c->landing());
      }
    });
    Lanes lanes;
    scan(hic_.topLevel(), lanes);
    rebuild(hic_.topLevel());
  }

 private:
  // What the compute stream did to buffers since the communication stream
  // last waited for it.
  struct Uses {
    std::unordered_set<const TensorView*> written;
    std::unordered_set<const TensorView*> touched;
    // Whether the communication stream has not waited yet in this run: the
    // symmetric buffers the CUDA backend lands in outlive a run, and the
    // previous run's compute may still read them.
    bool run_start = true;
    void clear() {
      written.clear();
      touched.clear();
      run_start = false;
    }
  };
  // The uses since each lane of communication streams last waited: moves on
  // different lanes are not ordered after each other.
  struct Lanes {
    std::array<Uses, Stream::kCommunicationLanes> uses;
    // The lane of the communication stream made current last.
    int64_t current = 0;
    void use(const TensorView* buffer, bool writes) {
      for (Uses& lane : uses) {
        lane.touched.insert(buffer);
        if (writes) {
          lane.written.insert(buffer);
        }
      }
    }
  };

  // What a communication must wait for.
  struct Decision {
    // The compute stream it waits for, nullptr if none; the communication
    // stream it is issued on.
    Stream* back = nullptr;
    Stream* channel = nullptr;
    // Whether its receive buffer was used since its lane last waited.
    bool touched = false;
  };

  const TensorView* bufferOf(const Val* val) const {
    const auto* tv = dynamic_cast<const TensorView*>(val);
    if (tv == nullptr) {
      return nullptr;
    }
    for (auto it = view_source_.find(tv); it != view_source_.end();
         it = view_source_.find(tv)) {
      tv = it->second;
    }
    return tv;
  }

  void scan(const Scope& scope, Lanes& lanes) {
    const auto& exprs = scope.exprs();
    bool on_communication_stream = false;
    for (size_t i = 0; i < exprs.size(); ++i) {
      const Expr* expr = exprs[i];
      if (const auto* set = dynamic_cast<const SetCurrentStream*>(expr)) {
        on_communication_stream = set->stream()->isCommunication();
        if (on_communication_stream) {
          lanes.current = set->stream()->lane();
        }
        continue;
      }
      if (const auto* loop = dynamic_cast<const ForLoop*>(expr)) {
        // Twice: the second pass sees what the first iteration left.
        scan(loop->body(), lanes);
        scan(loop->body(), lanes);
        continue;
      }
      if (std::optional<ViewOf> view = asView(expr)) {
        view_source_[view->view] = view->source;
        continue;
      }
      if (dynamic_cast<const Wait*>(expr) != nullptr) {
        continue;
      }
      if (const auto* alloc = dynamic_cast<const Allocate*>(expr);
          alloc != nullptr && landings_.contains(alloc->buffer())) {
        // A buffer a move lands in starts here: it is symmetric, kept under
        // its Allocate and loop iterations (runtime.md), so the uses before
        // this point were of another iteration's buffer or of the previous
        // run's, which `run_start` stands for. An allocation is the host's.
        for (Uses& lane : lanes.uses) {
          lane.touched.erase(alloc->buffer());
          lane.written.erase(alloc->buffer());
        }
        continue;
      }
      if (on_communication_stream) {
        Uses& uses = lanes.uses.at(static_cast<size_t>(lanes.current));
        if (dynamic_cast<const Synchronize*>(expr) != nullptr) {
          uses.clear();
        } else if (const auto* c = dynamic_cast<const Communication*>(expr)) {
          order(c, exprs, i, uses);
        }
        continue;
      }
      for (const Val* v : expr->inputs()) {
        if (const TensorView* b = bufferOf(v)) {
          lanes.use(b, /*writes=*/false);
        }
      }
      for (const Val* v : expr->outputs()) {
        if (const TensorView* b = bufferOf(v)) {
          lanes.use(b, /*writes=*/true);
        }
      }
    }
  }

  void order(
      const Communication* c,
      const std::vector<Expr*>& exprs,
      size_t i,
      Uses& uses) {
    const bool sends_fresh_data =
        c->in() != nullptr && uses.written.count(bufferOf(c->in())) != 0;
    const bool reuses_buffer =
        c->out() != nullptr && uses.touched.count(bufferOf(c->out())) != 0;
    const bool previous_run =
        c->backend() == CommunicatorBackend::kCuda && uses.run_start;
    Decision& decision = decisions_[c];
    // Over both scans of a loop body: a receive buffer used since the last
    // wait in either keeps the move from posting early.
    decision.touched = decision.touched || reuses_buffer;
    if (!sends_fresh_data && !reuses_buffer && !previous_run) {
      return;
    }
    const auto* back = i + 1 < exprs.size()
                           ? dynamic_cast<const SetCurrentStream*>(exprs[i + 1])
                           : nullptr;
    MDF_CHECK(
        back != nullptr && !back->stream()->isCommunication() && i > 0 &&
            isCommunicationStream(exprs[i - 1]),
        "Communication ",
        c->name(),
        " is not issued on a communication stream as "
        "AssignCommunicationStreams leaves it");
    decision.back = back->stream();
    decision.channel =
        static_cast<const SetCurrentStream*>(exprs[i - 1])->stream();
    uses.clear();
  }

  // Whether the move `c`, which must wait for `decision.back`, posts its
  // receive early: a CollectivePermute of the CUDA backend whose receive
  // buffer no stream used since its lane last waited. Then only the
  // previous runs' uses remain, which the run's start stands for.
  static bool postsEarly(const Communication* c, const Decision& decision) {
    return c->backend() == CommunicatorBackend::kCuda &&
           c->type() == CommunicationType::CollectivePermute &&
           c->out() != nullptr && !decision.touched;
  }

  // Where in `exprs` the early wait of a move at `at` that returns to
  // `back` goes: after the scope's first SetCurrentStream(back) before it
  // (not counting those that return from a communication stream, which
  // make current again what was current before), where `back` has not
  // yet waited for this iteration's work; where the scope makes `back`
  // current only so or not at all, it is current from the scope's start:
  // after the scope's leading GetCurrentStreams.
  static size_t earlyPoint(
      const std::vector<Expr*>& exprs, size_t at, const Stream* back) {
    for (size_t i = 0; i < at; ++i) {
      const auto* set = dynamic_cast<const SetCurrentStream*>(exprs[i]);
      const bool returns =
          i > 0 && dynamic_cast<const Communication*>(exprs[i - 1]) != nullptr;
      if (set != nullptr && set->stream() == back && !returns) {
        return i + 1;
      }
    }
    size_t i = 0;
    while (i < at && dynamic_cast<const GetCurrentStream*>(exprs[i])) {
      ++i;
    }
    return i;
  }

  void rebuild(Scope& scope) {
    const std::vector<Expr*>& old = scope.exprs();
    // The early waits of this scope's moves, by the position they precede.
    std::unordered_map<size_t, std::vector<const Decision*>> early;
    for (size_t i = 0; i < old.size(); ++i) {
      auto* c = dynamic_cast<Communication*>(old[i]);
      auto it = decisions_.find(c);
      if (it == decisions_.end() || it->second.back == nullptr ||
          !postsEarly(c, it->second)) {
        continue;
      }
      c->setSendsAfter(it->second.back);
      // One wait a lane at a point serves every move issued there after it.
      std::vector<const Decision*>& waits =
          early[earlyPoint(old, i, it->second.back)];
      const bool waited =
          std::any_of(waits.begin(), waits.end(), [&](const Decision* d) {
            return d->channel->sameAs(it->second.channel) &&
                   d->back->sameAs(it->second.back);
          });
      if (!waited) {
        waits.push_back(&it->second);
      }
    }
    std::vector<Expr*> exprs;
    for (size_t i = 0; i < old.size(); ++i) {
      if (auto found = early.find(i); found != early.end()) {
        for (const Decision* d : found->second) {
          exprs.push_back(hic_.create<SetCurrentStream>(d->channel));
          exprs.push_back(hic_.create<SynchronizePreviousRun>());
          exprs.push_back(hic_.create<SetCurrentStream>(d->back));
        }
      }
      Expr* expr = old[i];
      if (auto* loop = dynamic_cast<ForLoop*>(expr)) {
        rebuild(loop->body());
      }
      auto* c = dynamic_cast<Communication*>(expr);
      if (auto it = decisions_.find(c); it != decisions_.end() &&
                                        it->second.back != nullptr &&
                                        c->sendsAfter() == nullptr) {
        exprs.push_back(hic_.create<Synchronize>(it->second.back));
      }
      exprs.push_back(expr);
    }
    scope.setExprs(std::move(exprs));
  }

  HostIrContainer& hic_;
  std::unordered_map<const TensorView*, const TensorView*> view_source_;
  std::unordered_map<const Communication*, Decision> decisions_;
  // The buffers the CUDA backend's moves land in.
  std::unordered_set<const TensorView*> landings_;
};

} // namespace

void orderCommunicationStreams(HostIrContainer& hic) {
  Orderer(hic).run();
}

} // namespace mdfuser::hir
