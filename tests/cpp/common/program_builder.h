// SPDX-License-Identifier: MIT
#pragma once

#include <memory>
#include <vector>

#include "host_ir/host_ir_container.h"

namespace mdfuser::test {

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
