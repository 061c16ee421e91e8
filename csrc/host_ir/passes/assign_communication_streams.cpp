// SPDX-License-Identifier: MIT
#include "host_ir/passes/assign_communication_streams.h"

#include <algorithm>
#include <unordered_map>

#include "ir/errors.h"

namespace mdfuser::hir {

namespace {

class Assigner {
 public:
  Assigner(HostIrContainer& hic, int64_t lanes) : hic_(hic), lanes_(lanes) {
    MDF_CHECK(
        lanes >= 1 && lanes <= Stream::kCommunicationLanes,
        "communication lanes: 1 to ",
        Stream::kCommunicationLanes,
        ", not ",
        lanes);
  }

  void run() {
    rebuild(hic_.topLevel(), nullptr, constant(hic_.ir(), 0));
    if (caller_ != nullptr) {
      std::vector<Expr*> exprs = {hic_.create<GetCurrentStream>(caller_)};
      const auto& old = hic_.topLevel().exprs();
      exprs.insert(exprs.end(), old.begin(), old.end());
      hic_.topLevel().setExprs(std::move(exprs));
    }
  }

 private:
  // `compute`: the stream made current last in the enclosing scopes
  // (nullptr: the caller's); `index`: the communication stream's index.
  void rebuild(Scope& scope, Stream* compute, Scalar* index) {
    std::vector<Expr*> exprs;
    // The lane of each move of this scope not yet waited for.
    std::unordered_map<const Communication*, int64_t> outstanding;
    for (Expr* expr : scope.exprs()) {
      if (auto* wait = dynamic_cast<Wait*>(expr)) {
        outstanding.erase(wait->communication());
      }
      if (auto* set = dynamic_cast<SetCurrentStream*>(expr)) {
        MDF_CHECK(
            !set->stream()->isCommunication(),
            "AssignCommunicationStreams ran twice: ",
            set->toString());
        compute = set->stream();
      }
      if (auto* loop = dynamic_cast<ForLoop*>(expr)) {
        rebuild(
            loop->body(),
            compute,
            loop->parallelType() == ParallelType::Stream ? loop->index()
                                                         : index);
      }
      if (!isCollectivePermute(expr)) {
        exprs.push_back(expr);
        continue;
      }
      if (compute == nullptr) {
        if (caller_ == nullptr) {
          caller_ = hic_.create<Stream>();
        }
        compute = caller_;
      }
      const int64_t lane =
          laneFor(outstanding, static_cast<Communication*>(expr));
      outstanding.emplace(static_cast<Communication*>(expr), lane);
      exprs.push_back(hic_.create<SetCurrentStream>(
          hic_.create<Stream>(index, Stream::Kind::kCommunication, lane)));
      exprs.push_back(expr);
      exprs.push_back(hic_.create<SetCurrentStream>(compute));
    }
    scope.setExprs(std::move(exprs));
  }

  // The lane of an outstanding move sending the same buffer as `move`;
  // else the lowest lane no outstanding move holds; where all are held,
  // the number of outstanding moves mod the lanes.
  int64_t laneFor(
      const std::unordered_map<const Communication*, int64_t>& outstanding,
      const Communication* move) const {
    // A fan-out (one buffer sent to several peers) keeps to one lane: the
    // copies of a buffer issued at once on several streams ran one after
    // another all the same, each slower than alone (doc/host_ir.md).
    for (const auto& [other, lane] : outstanding) {
      if (other->in() == move->in()) {
        return lane;
      }
    }
    for (int64_t lane = 0; lane < lanes_; ++lane) {
      const bool held = std::any_of(
          outstanding.begin(), outstanding.end(), [&](const auto& held_move) {
            return held_move.second == lane;
          });
      if (!held) {
        return lane;
      }
    }
    return static_cast<int64_t>(outstanding.size()) % lanes_;
  }

  HostIrContainer& hic_;
  const int64_t lanes_;
  // The caller's stream, captured at the top of the program when a
  // communication at the top level must come back to it.
  Stream* caller_ = nullptr;
};

} // namespace

void assignCommunicationStreams(HostIrContainer& hic, int64_t lanes) {
  Assigner(hic, lanes).run();
}

} // namespace mdfuser::hir
