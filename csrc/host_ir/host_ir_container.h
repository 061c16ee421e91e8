// SPDX-License-Identifier: MIT
#pragma once

#include <memory>
#include <string>
#include <vector>

// A host program's statements, of every kind.
#include "host_ir/communication.h"
#include "host_ir/fused_matmul_communication.h"
#include "host_ir/nodes.h"
#include "ir/fusion.h"

namespace mdfuser::hir {

// A host program: inputs, outputs and a top-level scope of statements. It
// owns the fusion it was lowered from, whose container also holds every
// host statement and value, so tensor and axis names stay those of the
// fusion.
class HostIrContainer {
 public:
  explicit HostIrContainer(std::unique_ptr<Fusion> fusion);

  template <typename T, typename... Args>
  T* create(Args&&... args) {
    return fusion_->create<T>(std::forward<Args>(args)...);
  }
  IrContainer* ir() const {
    return fusion_.get();
  }
  // The fusion the program was lowered from.
  const Fusion& fusion() const {
    return *fusion_;
  }

  const std::vector<TensorView*>& inputs() const {
    return fusion_->inputs();
  }
  const std::vector<TensorView*>& outputs() const {
    return fusion_->outputs();
  }
  bool isInput(const Val* val) const {
    return fusion_->isInput(val);
  }
  bool isOutput(const Val* val) const {
    return fusion_->isOutput(val);
  }

  Scope& topLevel() {
    return top_level_;
  }
  const Scope& topLevel() const {
    return top_level_;
  }

  // One line per statement, two spaces per nesting level; see
  // doc/host_ir.md.
  std::string toString() const;

 private:
  std::unique_ptr<Fusion> fusion_;
  Scope top_level_;
};

} // namespace mdfuser::hir
