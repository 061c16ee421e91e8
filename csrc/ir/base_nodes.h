// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mdfuser {

class Expr;
class IrCloner;
class IrContainer;

// Anything owned by an IrContainer. Every statement has a name: a number
// given in creation order, counted separately per counterKey(), so that
// printed IR never depends on pointer values.
class Statement {
 public:
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  virtual ~Statement() = default;

  IrContainer* container() const {
    return container_;
  }
  int64_t name() const {
    return name_;
  }
  // Position among all statements of the container, in creation order.
  // Statements are created after the statements they refer to, so sorting
  // by it sorts producers before consumers.
  int64_t creationIndex() const {
    return creation_index_;
  }

  // Statements sharing a key share a name counter: T0, T1, ... for tensors,
  // i0, i1, ... for symbolic integers.
  virtual std::string_view counterKey() const = 0;

  virtual std::string toString() const = 0;

  // Creates the equivalent statement in cloner.target(). Values referenced
  // by the statement are cloned through `cloner`; a Val's definition and uses
  // are restored afterwards by IrContainer::copyFrom.
  virtual Statement* cloneInto(IrCloner& cloner) const = 0;

 protected:
  explicit Statement(IrContainer* container) : container_(container) {}

 private:
  friend class IrContainer;
  friend class IrCloner;
  IrContainer* container_;
  int64_t name_ = -1;
  int64_t creation_index_ = -1;
};

// A value: a scalar, an iteration domain, a tensor, a stream.
class Val : public Statement {
 public:
  // The fusion-level expression that computes this value, or nullptr for
  // fusion inputs and free symbols. Host IR statements read and write values
  // without becoming their definitions: the host program is not SSA.
  Expr* definition() const {
    return definition_;
  }
  const std::vector<Expr*>& uses() const {
    return uses_;
  }

  void setDefinition(Expr* expr) {
    definition_ = expr;
  }
  void addUse(Expr* expr);
  void removeUse(Expr* expr);

 protected:
  using Statement::Statement;

 private:
  friend class IrContainer;
  Expr* definition_ = nullptr;
  std::vector<Expr*> uses_;
};

// An operation on values. Subclasses give their operands named accessors.
class Expr : public Statement {
 public:
  const std::vector<Val*>& inputs() const {
    return inputs_;
  }
  const std::vector<Val*>& outputs() const {
    return outputs_;
  }
  Val* input(size_t i) const;
  Val* output(size_t i) const;

  // A short name of the operation ("linear", "Split", "ForLoop"). Also the
  // key of its name counter.
  virtual std::string_view opName() const = 0;
  std::string_view counterKey() const override {
    return opName();
  }

  // Makes this expression the definition of its outputs and a use of its
  // inputs. Builders of fusion-level operations call it; host IR statements
  // reuse operation classes without it.
  void registerAsDefinition();
  // Undoes registerAsDefinition, e.g. when a pass replaces the expression.
  void unregisterAsDefinition();

 protected:
  // For nodes that rewire an operand in place; definitions and uses are
  // not updated.
  void setInput(size_t i, Val* val) {
    inputs_.at(i) = val;
  }

  Expr(
      IrContainer* container,
      std::vector<Val*> inputs,
      std::vector<Val*> outputs)
      : Statement(container),
        inputs_(std::move(inputs)),
        outputs_(std::move(outputs)) {}

 private:
  std::vector<Val*> inputs_;
  std::vector<Val*> outputs_;
};

} // namespace mdfuser
