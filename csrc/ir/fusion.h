// SPDX-License-Identifier: MIT
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/container.h"
#include "ir/literal.h"
#include "ir/tensor_view.h"

namespace mdfuser {

class TensorOp;

// A single-device program on global shapes: inputs, outputs and the tensor
// operations between them, plus the schedule (splits, parallel types,
// meshes) that the user attached to its tensors.
class Fusion : public IrContainer {
 public:
  // Two extents that an operation requires to be equal (or the first to be
  // a multiple of the second, or at most the second), checked when inputs
  // arrive because either may be symbolic.
  struct ExtentConstraint {
    enum class Kind { kEqual, kDivisible, kAtMost };
    Scalar* lhs;
    Scalar* rhs;
    std::string what;
    Kind kind = Kind::kEqual;
    // kAtMost: what `rhs` is, e.g. "its extent".
    std::string rhs_what;
  };

  Fusion() = default;

  // A new input tensor. `shape` holds a static extent, -1 for one known
  // only at run time, or 1 for a broadcast axis; `contiguity` is empty (all
  // contiguous) or has one entry per axis.
  TensorView* defineTensor(
      const std::vector<int64_t>& shape,
      std::vector<std::optional<bool>> contiguity,
      DataType dtype);

  // A new scalar input of `dtype`, whose value each execute gives
  // (define_scalar(None, dtype)).
  Literal* defineScalarInput(DataType dtype);

  void addInput(TensorView* tv);
  void addOutput(TensorView* tv);
  // The input tensors.
  const std::vector<TensorView*>& inputs() const {
    return inputs_;
  }
  // The scalar inputs, in the order defined.
  const std::vector<Literal*>& scalarInputs() const {
    return scalar_inputs_;
  }
  // Every input, tensors and scalars, in the order defined: the order of
  // execute's arguments.
  const std::vector<Val*>& allInputs() const {
    return all_inputs_;
  }
  const std::vector<TensorView*>& outputs() const {
    return outputs_;
  }
  bool isInput(const Val* val) const;
  bool isOutput(const Val* val) const;

  // Tensor operations the outputs depend on, producers before consumers.
  std::vector<TensorOp*> exprs() const;
  // Every tensor the outputs depend on, inputs included, in the order of
  // exprs() (every output of an operation with several).
  std::vector<TensorView*> allTensors() const;

  void addExtentConstraint(Scalar* lhs, Scalar* rhs, std::string what);
  // `lhs` must be a multiple of `rhs`.
  void addDivisibilityConstraint(Scalar* lhs, Scalar* rhs, std::string what);
  // `lhs` must be at most `rhs`: "<what> is 5, past <rhs_what> 3", e.g.
  // "slice: the end of dimension 0", "its extent".
  void addBoundConstraint(
      Scalar* lhs, Scalar* rhs, std::string what, std::string rhs_what);
  const std::vector<ExtentConstraint>& extentConstraints() const {
    return constraints_;
  }

  // A frozen fusion refuses schedule changes: it has been compiled.
  void freeze() {
    frozen_ = true;
  }
  bool isFrozen() const {
    return frozen_;
  }

  // A deep copy with the same names. The copy is not frozen.
  std::unique_ptr<Fusion> clone() const;

  // Inputs, outputs, the transforms of every tensor and the operations.
  std::string toString() const;

 private:
  std::vector<TensorView*> inputs_;
  std::vector<Literal*> scalar_inputs_;
  std::vector<Val*> all_inputs_;
  std::vector<TensorView*> outputs_;
  std::vector<ExtentConstraint> constraints_;
  bool frozen_ = false;
};

// The fusion that owns `tv`. Internal error when it has none.
Fusion* fusionOf(const Val* val);

} // namespace mdfuser
