// SPDX-License-Identifier: MIT
#pragma once

#include <memory>
#include <vector>

#include "host_ir/host_ir_container.h"

namespace mdfuser::test {

// An allreduce over `team`, as lowering describes one.
inline hir::CommunicationSpec allreduce(std::vector<int64_t> team) {
  hir::CommunicationSpec spec;
  spec.type = CommunicationType::Allreduce;
  spec.team = team;
  spec.senders = team;
  spec.receivers = std::move(team);
  return spec;
}

// A ring step over `team`: each member sends to the next, receives from the
// previous.
inline hir::CommunicationSpec collectivePermute(std::vector<int64_t> team) {
  hir::CommunicationSpec spec;
  spec.type = CommunicationType::CollectivePermute;
  spec.team = std::move(team);
  return spec;
}

// Builds a program over float tensors of static shapes: inputs come from
// input(), other tensors from tensor(), statements from the container.
class ProgramBuilder {
 public:
  ProgramBuilder() : fusion_(std::make_unique<Fusion>()) {}

  TensorView* input(std::vector<int64_t> shape) {
    return fusion_->defineTensor(shape, {}, DataType::Float);
  }
  TensorView* tensor(std::vector<int64_t> shape) {
    std::vector<IterDomain*> ids;
    for (int64_t extent : shape) {
      ids.push_back(
          fusion_->create<IterDomain>(constant(fusion_.get(), extent)));
    }
    return fusion_->create<TensorView>(ids, DataType::Float);
  }
  void output(TensorView* tv) {
    fusion_->addOutput(tv);
  }
  std::unique_ptr<hir::HostIrContainer> build() {
    return std::make_unique<hir::HostIrContainer>(std::move(fusion_));
  }

 private:
  std::unique_ptr<Fusion> fusion_;
};

} // namespace mdfuser::test
