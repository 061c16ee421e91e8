// SPDX-License-Identifier: MIT
#include "host_ir/passes/place_symmetric_buffers.h"

#include <unordered_map>

#include "ir/errors.h"

namespace mdfuser::hir {

namespace {

class Placer {
 public:
  void collect(Scope& scope) {
    forEachExpr(scope, [&](Expr* expr) {
      if (auto* alloc = dynamic_cast<Allocate*>(expr)) {
        allocation_[alloc->buffer()] = alloc;
      } else if (auto* comm = dynamic_cast<Communication*>(expr)) {
        if (comm->backend() == CommunicatorBackend::kCuda) {
          cuda_.push_back(comm);
        }
      } else if (std::optional<ViewOf> view = asView(expr)) {
        source_[view->view] = view->source;
      }
    });
  }

  void place() const {
    for (const Communication* comm : cuda_) {
      MDF_CHECK(
          comm->type() == CommunicationType::CollectivePermute,
          "the CUDA backend carries CollectivePermutes only, not ",
          comm->toString());
      const TensorView* root = comm->landing();
      for (auto it = source_.find(root); it != source_.end();
           it = source_.find(root)) {
        root = it->second;
      }
      auto it = allocation_.find(root);
      MDF_CHECK(
          it != allocation_.end(),
          comm->toString(),
          " lands in ",
          root->toString(),
          ", which no Allocate binds (a program input or output) and so "
          "cannot live in symmetric memory");
      it->second->makeSymmetric(comm->team());
    }
  }

  // The buffers the user placed in symmetric memory, shared with their
  // mesh. A tensor without a mesh has no peers to share with.
  void placeRequested() const {
    for (const auto& [tv, alloc] : allocation_) {
      if (tv->memoryType() == MemoryType::Symmetric && tv->hasDeviceMesh()) {
        alloc->makeSymmetric(tv->deviceMesh()->devices());
      }
    }
  }

 private:
  std::unordered_map<const TensorView*, Allocate*> allocation_;
  std::unordered_map<const TensorView*, const TensorView*> source_;
  std::vector<const Communication*> cuda_;
};

} // namespace

void placeSymmetricBuffers(HostIrContainer& hic, bool symmetric_memory) {
  Placer placer;
  placer.collect(hic.topLevel());
  placer.place();
  if (symmetric_memory) {
    placer.placeRequested();
  }
}

} // namespace mdfuser::hir
