// SPDX-License-Identifier: MIT
#include "ir/ops/tensor_op.h"

#include "ir/container.h"
#include "ir/errors.h"

namespace mdfuser {

TensorOp::TensorOp(
    IrContainer* container,
    OpType type,
    std::vector<Val*> inputs,
    std::vector<Val*> outputs)
    : Expr(container, std::move(inputs), std::move(outputs)), type_(type) {
  for (Val* out : this->outputs()) {
    MDF_CHECK(
        dynamic_cast<TensorView*>(out) != nullptr,
        opName(),
        " outputs tensors only, got ",
        out->toString());
  }
}

std::vector<TensorView*> TensorOp::outs() const {
  std::vector<TensorView*> result;
  for (Val* out : outputs()) {
    result.push_back(static_cast<TensorView*>(out));
  }
  return result;
}

std::vector<AxisMapping> TensorOp::mapAxisByAxis(
    const TensorView* producer, const TensorView* consumer) {
  const std::vector<IterDomain*> p = producer->logicalNoReductions();
  const std::vector<IterDomain*>& c = consumer->maybeRoot();
  std::vector<AxisMapping> result;
  for (size_t i = 0; i < p.size() && i < c.size(); ++i) {
    result.push_back({p[i], c[i]});
  }
  return result;
}

std::vector<TensorView*> TensorOp::tensorInputs() const {
  std::vector<TensorView*> result;
  for (Val* in : inputs()) {
    if (auto* tv = dynamic_cast<TensorView*>(in)) {
      result.push_back(tv);
    }
  }
  return result;
}

TensorOp* TensorOp::withTensors(
    const std::vector<TensorView*>& outputs,
    const std::vector<TensorView*>& tensor_inputs) const {
  MDF_CHECK_EQ(outputs.size(), this->outputs().size());
  std::vector<Val*> ins = inputs();
  size_t next = 0;
  for (Val*& in : ins) {
    if (dynamic_cast<TensorView*>(in) != nullptr) {
      MDF_CHECK_LT(
          next, tensor_inputs.size(), "too few tensors for ", opName());
      in = tensor_inputs[next++];
    }
  }
  MDF_CHECK_EQ(next, tensor_inputs.size(), "too many tensors for ", opName());
  return recreate(
      container(),
      std::move(ins),
      std::vector<Val*>(outputs.begin(), outputs.end()));
}

std::string TensorOp::toString() const {
  // The outputs one per line, then "= op(" with one argument per line,
  // arguments aligned.
  std::string s;
  for (Val* out : outputs()) {
    s += out->toString() + "\n";
  }
  const std::string head = "   = " + std::string(opName()) + "(";
  s += head;
  const std::string pad(head.size(), ' ');
  std::vector<std::string> args;
  for (size_t i = 0; i < numPrintedOperands(); ++i) {
    args.push_back(inputs()[i]->toString());
  }
  for (std::string& attribute : attributes()) {
    args.push_back(std::move(attribute));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (i > 0) {
      s += ",\n" + pad;
    }
    s += args[i];
  }
  return s + ")";
}

Statement* TensorOp::cloneInto(IrCloner& cloner) const {
  return recreate(
      cloner.target(), cloner.clone(inputs()), cloner.clone(outputs()));
}

} // namespace mdfuser
