// SPDX-License-Identifier: MIT
#include "ir/fusion.h"

#include <algorithm>
#include <functional>
#include <sstream>
#include <unordered_set>

#include "ir/errors.h"
#include "ir/ops.h"

namespace mdfuser {

TensorView* Fusion::defineTensor(
    const std::vector<int64_t>& shape,
    std::vector<std::optional<bool>> contiguity,
    DataType dtype) {
  MDF_USER_CHECK(
      !isFrozen(),
      "cannot define a tensor in a fusion that has already been executed");
  MDF_USER_CHECK(
      contiguity.empty() || contiguity.size() == shape.size(),
      "define_tensor: contiguity has ",
      contiguity.size(),
      " entries but shape has ",
      shape.size(),
      " axes");
  std::vector<IterDomain*> logical;
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t extent = shape[i];
    MDF_USER_CHECK(
        extent >= -1,
        "define_tensor: axis ",
        i,
        " has extent ",
        extent,
        "; expected a size >= 0, or -1 for a size known only at run time");
    if (extent == 1) {
      logical.push_back(
          create<IterDomain>(constant(this, 1), IterType::Broadcast));
      continue;
    }
    Scalar* e = extent == -1 ? symbol(this) : constant(this, extent);
    logical.push_back(create<IterDomain>(e));
  }
  auto* tv =
      create<TensorView>(std::move(logical), dtype, std::move(contiguity));
  addInput(tv);
  return tv;
}

Literal* Fusion::defineScalarInput(DataType dtype) {
  MDF_USER_CHECK(
      !isFrozen(),
      "cannot define a scalar input in a fusion that has already been "
      "executed");
  auto* scalar = create<Literal>(dtype);
  scalar_inputs_.push_back(scalar);
  all_inputs_.push_back(scalar);
  return scalar;
}

void Fusion::addInput(TensorView* tv) {
  MDF_CHECK(tv->container() == this);
  MDF_CHECK(!isInput(tv), tv->toString(), " is already an input");
  inputs_.push_back(tv);
  all_inputs_.push_back(tv);
}

void Fusion::addOutput(TensorView* tv) {
  MDF_TYPE_CHECK(tv != nullptr, "add_output: expected a tensor, got None");
  MDF_USER_CHECK(
      tv->container() == this,
      "add_output: ",
      tv->toString(),
      " belongs to another fusion");
  MDF_USER_CHECK(
      !isFrozen(),
      "cannot add an output to a fusion that has already been executed");
  MDF_USER_CHECK(
      !isOutput(tv), "add_output: ", tv->toString(), " is already an output");
  outputs_.push_back(tv);
}

bool Fusion::isInput(const Val* val) const {
  return std::find(all_inputs_.begin(), all_inputs_.end(), val) !=
         all_inputs_.end();
}

bool Fusion::isOutput(const Val* val) const {
  return std::find(outputs_.begin(), outputs_.end(), val) != outputs_.end();
}

std::vector<TensorOp*> Fusion::exprs() const {
  std::vector<TensorOp*> order;
  std::unordered_set<const TensorOp*> visited;
  std::function<void(const TensorView*)> visit = [&](const TensorView* tv) {
    auto* op = dynamic_cast<TensorOp*>(tv->definition());
    if (op == nullptr || isInput(tv) || !visited.insert(op).second) {
      return;
    }
    for (TensorView* in : op->tensorInputs()) {
      visit(in);
    }
    order.push_back(op);
  };
  for (const TensorView* out : outputs_) {
    visit(out);
  }
  return order;
}

std::vector<TensorView*> Fusion::allTensors() const {
  std::vector<TensorView*> result(inputs_.begin(), inputs_.end());
  for (TensorOp* op : exprs()) {
    for (TensorView* out : op->outs()) {
      result.push_back(out);
    }
  }
  return result;
}

void Fusion::addExtentConstraint(Scalar* lhs, Scalar* rhs, std::string what) {
  constraints_.push_back(
      {lhs, rhs, std::move(what), ExtentConstraint::Kind::kEqual, ""});
}

void Fusion::addDivisibilityConstraint(
    Scalar* lhs, Scalar* rhs, std::string what) {
  constraints_.push_back(
      {lhs, rhs, std::move(what), ExtentConstraint::Kind::kDivisible, ""});
}

void Fusion::addBoundConstraint(
    Scalar* lhs, Scalar* rhs, std::string what, std::string rhs_what) {
  constraints_.push_back(
      {lhs,
       rhs,
       std::move(what),
       ExtentConstraint::Kind::kAtMost,
       std::move(rhs_what)});
}

std::unique_ptr<Fusion> Fusion::clone() const {
  auto copy = std::make_unique<Fusion>();
  IrCloner cloner(copy.get());
  copy->copyFrom(*this, cloner);
  copy->inputs_ = cloner.clone(inputs_);
  copy->scalar_inputs_ = cloner.clone(scalar_inputs_);
  copy->all_inputs_ = cloner.clone(all_inputs_);
  copy->outputs_ = cloner.clone(outputs_);
  for (const ExtentConstraint& c : constraints_) {
    copy->constraints_.push_back(
        {cloner.clone(c.lhs), cloner.clone(c.rhs), c.what, c.kind, c.rhs_what});
  }
  return copy;
}

namespace {

std::string idList(const std::vector<IterDomain*>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    s += (i > 0 ? ", " : "") + ids[i]->toString();
  }
  return s + "]";
}

void printTransforms(std::ostream& os, const TensorView* tv) {
  os << "  " << tv->toString() << "\n";
  if (tv->hasRoot()) {
    os << "    root: " << idList(tv->root()) << "\n";
    for (Expr* transform : transformsBetween(tv->root(), tv->logical())) {
      os << "      " << transform->toString() << "\n";
    }
  }
  os << "    logical: " << idList(tv->logical()) << "\n";
  for (Expr* transform : transformsBetween(tv->logical(), tv->loop())) {
    os << "      " << transform->toString() << "\n";
  }
  os << "    loop: " << idList(tv->loop()) << "\n";
}

void printIndented(std::ostream& os, const std::string& text) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    os << "  " << line << "\n";
  }
}

} // namespace

std::string Fusion::toString() const {
  std::ostringstream ss;
  ss << "%Fusion {\n";
  ss << "inputs:\n";
  for (const Val* input : all_inputs_) {
    ss << "  " << input->toString() << "\n";
  }
  ss << "outputs:\n";
  for (const TensorView* tv : outputs_) {
    ss << "  " << tv->toString() << "\n";
  }
  ss << "transforms:\n";
  for (const TensorView* tv : allTensors()) {
    printTransforms(ss, tv);
  }
  ss << "operations:\n";
  for (const TensorOp* op : exprs()) {
    printIndented(ss, op->toString());
  }
  ss << "} // %Fusion\n";
  return ss.str();
}

Fusion* fusionOf(const Val* val) {
  auto* fusion = dynamic_cast<Fusion*>(val->container());
  MDF_CHECK(fusion != nullptr, val->toString(), " is not in a Fusion");
  return fusion;
}

} // namespace mdfuser
