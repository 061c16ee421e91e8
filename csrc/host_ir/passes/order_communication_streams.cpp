// SPDX-License-Identifier: MIT
#include "host_ir/passes/order_communication_streams.h"

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
    wait_for_[c] = back->stream();
    uses.clear();
  }

  void rebuild(Scope& scope) {
    std::vector<Expr*> exprs;
    for (Expr* expr : scope.exprs()) {
      if (auto* loop = dynamic_cast<ForLoop*>(expr)) {
        rebuild(loop->body());
      }
      if (auto it = wait_for_.find(dynamic_cast<Communication*>(expr));
          it != wait_for_.end()) {
        exprs.push_back(hic_.create<Synchronize>(it->second));
      }
      exprs.push_back(expr);
    }
    scope.setExprs(std::move(exprs));
  }

  HostIrContainer& hic_;
  std::unordered_map<const TensorView*, const TensorView*> view_source_;
  // The communications that must wait, and for which compute stream.
  std::unordered_map<const Communication*, Stream*> wait_for_;
};

} // namespace

void orderCommunicationStreams(HostIrContainer& hic) {
  Orderer(hic).run();
}

} // namespace mdfuser::hir
