// SPDX-License-Identifier: MIT
#include "host_ir/passes/assign_communication_streams.h"

#include "ir/errors.h"

namespace mdfuser::hir {

namespace {

bool isPermute(const Expr* expr) {
  const auto* c = dynamic_cast<const Communication*>(expr);
  return c != nullptr && c->type() == CommunicationType::CollectivePermute;
}

class Assigner {
 public:
  explicit Assigner(HostIrContainer& hic) : hic_(hic) {}

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
    for (Expr* expr : scope.exprs()) {
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
      if (!isPermute(expr)) {
        exprs.push_back(expr);
        continue;
      }
      if (compute == nullptr) {
        if (caller_ == nullptr) {
          caller_ = hic_.create<Stream>();
        }
        compute = caller_;
      }
      exprs.push_back(hic_.create<SetCurrentStream>(
          hic_.create<Stream>(index, Stream::Kind::kCommunication)));
      exprs.push_back(expr);
      exprs.push_back(hic_.create<SetCurrentStream>(compute));
    }
    scope.setExprs(std::move(exprs));
  }

  HostIrContainer& hic_;
  // The caller's stream, captured at the top of the program when a
  // communication at the top level must come back to it.
  Stream* caller_ = nullptr;
};

} // namespace

void assignCommunicationStreams(HostIrContainer& hic) {
  Assigner(hic).run();
}

} // namespace mdfuser::hir
