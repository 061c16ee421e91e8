// SPDX-License-Identifier: MIT
#include "ir/container.h"

#include <algorithm>

#include "ir/errors.h"

namespace mdfuser {

void Val::addUse(Expr* expr) {
  if (std::find(uses_.begin(), uses_.end(), expr) == uses_.end()) {
    uses_.push_back(expr);
  }
}

void Val::removeUse(Expr* expr) {
  uses_.erase(std::remove(uses_.begin(), uses_.end(), expr), uses_.end());
}

Val* Expr::input(size_t i) const {
  MDF_CHECK_LT(i, inputs_.size(), "input index out of range for ", opName());
  return inputs_[i];
}

Val* Expr::output(size_t i) const {
  MDF_CHECK_LT(i, outputs_.size(), "output index out of range for ", opName());
  return outputs_[i];
}

void Expr::registerAsDefinition() {
  // Each family's builder names the operand first (requireSameFusion);
  // this holds for every operation, whatever built it.
  for (size_t i = 0; i < inputs_.size(); ++i) {
    MDF_USER_CHECK(
        inputs_[i]->container() == container(),
        opName(),
        ": operand ",
        i,
        " ",
        inputs_[i]->toString(),
        " belongs to another fusion; an operation takes values of one "
        "FusionDefinition");
  }
  for (Val* out : outputs_) {
    out->setDefinition(this);
  }
  for (Val* in : inputs_) {
    in->addUse(this);
  }
}

void Expr::unregisterAsDefinition() {
  for (Val* out : outputs_) {
    if (out->definition() == this) {
      out->setDefinition(nullptr);
    }
  }
  for (Val* in : inputs_) {
    in->removeUse(this);
  }
}

void IrContainer::adopt(std::unique_ptr<Statement> statement) {
  MDF_CHECK(statement->container() == this);
  int64_t& counter = counters_[std::string(statement->counterKey())];
  statement->name_ = counter++;
  statement->creation_index_ = static_cast<int64_t>(statements_.size());
  statements_.push_back(std::move(statement));
}

void IrContainer::copyFrom(const IrContainer& other, IrCloner& cloner) {
  MDF_CHECK(cloner.target() == this);
  for (const auto& statement : other.statements_) {
    cloner.clone(statement.get());
  }
  for (const auto& statement : other.statements_) {
    const auto* val = dynamic_cast<const Val*>(statement.get());
    if (val == nullptr) {
      continue;
    }
    Val* copy = cloner.clone(val);
    copy->definition_ = cloner.clone(val->definition());
    copy->uses_ = cloner.clone(val->uses());
  }
  counters_ = other.counters_;
}

Statement* IrCloner::cloneStatement(const Statement* statement) {
  auto it = clones_.find(statement);
  if (it != clones_.end()) {
    return it->second;
  }
  Statement* copy = statement->cloneInto(*this);
  MDF_CHECK(copy->container() == target_);
  copy->name_ = statement->name_;
  clones_.emplace(statement, copy);
  return copy;
}

} // namespace mdfuser
