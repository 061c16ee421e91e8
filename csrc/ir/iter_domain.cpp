// SPDX-License-Identifier: MIT
#include "ir/iter_domain.h"

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "ir/container.h"
#include "ir/errors.h"

namespace mdfuser {

IterDomain::IterDomain(
    IrContainer* container,
    Scalar* extent,
    IterType iter_type,
    ParallelType parallel_type,
    bool is_rfactor_product)
    : Val(container),
      extent_(extent),
      iter_type_(iter_type),
      parallel_type_(parallel_type),
      is_rfactor_product_(is_rfactor_product) {
  MDF_CHECK(extent != nullptr);
}

bool IterDomain::isExpanded() const {
  return isBroadcast() && !(extent_->isConst() && extent_->value() == 1);
}

IterDomain* IterDomain::cloneWithoutTransforms() const {
  return container()->create<IterDomain>(
      extent_, iter_type_, parallel_type_, is_rfactor_product_);
}

std::string IterDomain::toString() const {
  std::string s;
  switch (iter_type_) {
    case IterType::Iteration:
      s = "i";
      break;
    case IterType::Reduction:
      s = "r";
      break;
    case IterType::Broadcast:
      s = "b";
      break;
  }
  s += idString(parallel_type_);
  s += std::to_string(name());
  s += "{" +
       (isExpanded() ? "1 ex " + extent_->toString() : extent_->toString()) +
       "}";
  if (is_rfactor_product_) {
    s += "rf";
  }
  if (swizzle_.has_value()) {
    s += " swizzle1d(" + std::string(parallelTypeName(*swizzle_)) + ")";
  }
  return s;
}

Statement* IterDomain::cloneInto(IrCloner& cloner) const {
  auto* id = cloner.target()->create<IterDomain>(
      cloner.clone(extent_), iter_type_, parallel_type_, is_rfactor_product_);
  id->swizzle_ = swizzle_;
  return id;
}

Split::Split(
    IrContainer* container,
    IterDomain* outer,
    IterDomain* inner,
    IterDomain* in,
    Scalar* factor,
    bool inner_split)
    : Expr(container, {in}, {outer, inner}),
      factor_(factor),
      inner_split_(inner_split) {
  registerAsDefinition();
}

IterDomain* Split::in() const {
  return static_cast<IterDomain*>(input(0));
}
IterDomain* Split::outer() const {
  return static_cast<IterDomain*>(output(0));
}
IterDomain* Split::inner() const {
  return static_cast<IterDomain*>(output(1));
}

std::string Split::toString() const {
  return std::string(inner_split_ ? "Inner" : "Outer") +
         " split: " + in()->toString() + " by factor " + factor_->toString() +
         " -> " + outer()->toString() + ", " + inner()->toString();
}

Statement* Split::cloneInto(IrCloner& cloner) const {
  return cloner.target()->create<Split>(
      cloner.clone(outer()),
      cloner.clone(inner()),
      cloner.clone(in()),
      cloner.clone(factor_),
      inner_split_);
}

Merge::Merge(
    IrContainer* container,
    IterDomain* out,
    IterDomain* outer,
    IterDomain* inner)
    : Expr(container, {outer, inner}, {out}) {
  registerAsDefinition();
}

IterDomain* Merge::outer() const {
  return static_cast<IterDomain*>(input(0));
}
IterDomain* Merge::inner() const {
  return static_cast<IterDomain*>(input(1));
}
IterDomain* Merge::out() const {
  return static_cast<IterDomain*>(output(0));
}

std::string Merge::toString() const {
  return "Merge: " + outer()->toString() + " and " + inner()->toString() +
         " -> " + out()->toString();
}

Statement* Merge::cloneInto(IrCloner& cloner) const {
  return cloner.target()->create<Merge>(
      cloner.clone(out()), cloner.clone(outer()), cloner.clone(inner()));
}

std::pair<IterDomain*, IterDomain*> split(
    IterDomain* in, Scalar* factor, bool inner_split) {
  IrContainer* container = in->container();
  Scalar* quotient = ceilDiv(in->extent(), factor);
  Scalar* outer_extent = inner_split ? quotient : factor;
  Scalar* inner_extent = inner_split ? factor : quotient;
  auto* outer = container->create<IterDomain>(outer_extent, in->iterType());
  auto* inner = container->create<IterDomain>(inner_extent, in->iterType());
  container->create<Split>(outer, inner, in, factor, inner_split);
  return {outer, inner};
}

IterDomain* merge(IterDomain* outer, IterDomain* inner) {
  IrContainer* container = outer->container();
  IterType type = IterType::Iteration;
  if (outer->isReduction() || inner->isReduction()) {
    type = IterType::Reduction;
  } else if (outer->isBroadcast() && inner->isBroadcast()) {
    type = IterType::Broadcast;
  }
  auto* out = container->create<IterDomain>(
      mul(outer->extent(), inner->extent()), type);
  container->create<Merge>(out, outer, inner);
  return out;
}

std::vector<Expr*> transformsBetween(
    const std::vector<IterDomain*>& from, const std::vector<IterDomain*>& to) {
  const std::unordered_set<const IterDomain*> sources(from.begin(), from.end());
  // Whether `id` is in `from` or derives from it, memoized.
  std::unordered_map<const IterDomain*, bool> reaches;
  std::function<bool(const IterDomain*)> derives = [&](const IterDomain* id) {
    if (sources.count(id) != 0) {
      return true;
    }
    if (auto it = reaches.find(id); it != reaches.end()) {
      return it->second;
    }
    bool result = false;
    if (Expr* def = id->definition(); dynamic_cast<Split*>(def) != nullptr ||
                                      dynamic_cast<Merge*>(def) != nullptr) {
      for (Val* in : def->inputs()) {
        result = result || derives(static_cast<const IterDomain*>(in));
      }
    }
    reaches[id] = result;
    return result;
  };

  std::unordered_set<Expr*> seen;
  std::vector<Expr*> result;
  std::vector<IterDomain*> stack(to.begin(), to.end());
  while (!stack.empty()) {
    IterDomain* id = stack.back();
    stack.pop_back();
    if (sources.count(id) != 0 || !derives(id)) {
      continue;
    }
    Expr* def = id->definition();
    if (seen.insert(def).second) {
      result.push_back(def);
      for (Val* in : def->inputs()) {
        stack.push_back(static_cast<IterDomain*>(in));
      }
    }
  }
  std::sort(result.begin(), result.end(), [](Expr* a, Expr* b) {
    return a->creationIndex() < b->creationIndex();
  });
  return result;
}

} // namespace mdfuser
