// SPDX-License-Identifier: MIT
#include "ir/rfactor.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ir/container.h"
#include "ir/errors.h"
#include "ir/ops.h"

namespace mdfuser {

namespace {

bool contains(const std::vector<IterDomain*>& ids, const IterDomain* id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// The logical axis `id` derives from through splits; nullptr for a merge.
IterDomain* rootOf(IterDomain* id, const std::vector<IterDomain*>& logical) {
  while (!contains(logical, id)) {
    auto* split = dynamic_cast<Split*>(id->definition());
    if (split == nullptr) {
      return nullptr;
    }
    id = split->in();
  }
  return id;
}

} // namespace

TensorView* rFactor(
    TensorView* out, const std::vector<IterDomain*>& partial_reduces) {
  auto* op = dynamic_cast<TensorOp*>(out->definition());
  MDF_USER_CHECK(
      op != nullptr && op->outputs().size() == 1,
      "rfactor: ",
      out->toString(),
      " is not the single output of a reduction");
  const std::vector<IterDomain*>& loop = out->loop();
  for (IterDomain* id : partial_reduces) {
    MDF_USER_CHECK(
        contains(loop, id) && id->isReduction(),
        "rfactor: ",
        id->toString(),
        " is not a reduction loop axis of ",
        out->toString());
  }
  const std::vector<IterDomain*>& logical = out->logical();
  for (IterDomain* id : loop) {
    if (id->isReduction()) {
      MDF_USER_CHECK(
          rootOf(id, logical) != nullptr,
          "rfactor: the reduction axis ",
          id->toString(),
          " of ",
          out->toString(),
          " comes from a merge, which rfactor does not support");
    }
  }
  const std::unordered_set<const IterDomain*> reduce_here(
      partial_reduces.begin(), partial_reduces.end());
  IrContainer* container = out->container();

  // partial's root mirrors out's logical domain.
  std::unordered_map<IterDomain*, IterDomain*> to_partial;
  std::vector<IterDomain*> root;
  for (IterDomain* id : logical) {
    auto* copy = container->create<IterDomain>(id->extent(), id->iterType());
    to_partial[id] = copy;
    root.push_back(copy);
  }
  // Replay out's transforms; the outputs of splits of reduction axes are
  // rFactor products, iterations when they are not reduced here.
  for (Expr* e : transformsBetween(logical, loop)) {
    if (auto* s = dynamic_cast<Split*>(e)) {
      IterDomain* in = to_partial.at(s->in());
      if (!s->in()->isReduction()) {
        auto [outer, inner] = split(in, s->factor(), s->innerSplit());
        to_partial[s->outer()] = outer;
        to_partial[s->inner()] = inner;
        continue;
      }
      auto make = [&](IterDomain* like) {
        const bool leaf = contains(loop, like);
        const bool reduced = !leaf || reduce_here.count(like) != 0;
        return container->create<IterDomain>(
            like->extent(),
            reduced ? IterType::Reduction : IterType::Iteration,
            ParallelType::Serial,
            /*is_rfactor_product=*/true);
      };
      IterDomain* outer = make(s->outer());
      IterDomain* inner = make(s->inner());
      container->create<Split>(outer, inner, in, s->factor(), s->innerSplit());
      to_partial[s->outer()] = outer;
      to_partial[s->inner()] = inner;
    } else {
      auto* m = static_cast<Merge*>(e);
      to_partial[m->out()] =
          merge(to_partial.at(m->outer()), to_partial.at(m->inner()));
    }
  }
  // A reduction root that is a loop axis itself becomes an iteration axis
  // when it is not reduced here.
  for (size_t i = 0; i < logical.size(); ++i) {
    IterDomain* id = logical[i];
    if (id->isReduction() && contains(loop, id) && reduce_here.count(id) == 0) {
      auto* copy = container->create<IterDomain>(
          id->extent(), IterType::Iteration, ParallelType::Serial, true);
      to_partial[id] = copy;
      root[i] = copy;
    }
  }

  // partial's logical domain: each split reduction axis replaced by the
  // loop axes derived from it, in loop order.
  std::vector<IterDomain*> partial_logical;
  for (IterDomain* id : logical) {
    const bool split_reduction = id->isReduction() && !contains(loop, id);
    if (!split_reduction) {
      partial_logical.push_back(to_partial.at(id));
      continue;
    }
    for (IterDomain* leaf : loop) {
      if (rootOf(leaf, logical) == id) {
        partial_logical.push_back(to_partial.at(leaf));
      }
    }
  }
  std::vector<IterDomain*> partial_loop;
  for (IterDomain* id : loop) {
    IterDomain* copy = to_partial.at(id);
    copy->parallelize(id->parallelType());
    partial_loop.push_back(copy);
  }
  auto* partial = container->create<TensorView>(partial_logical, out->dtype());
  partial->setDomains(
      root, std::move(partial_logical), std::move(partial_loop));
  if (out->hasDeviceMesh()) {
    partial->setDeviceMesh(*out->deviceMesh());
  }

  // out reduces the rest: one new reduction axis per loop axis not reduced
  // here, at the place of the logical axis it comes from.
  std::unordered_map<IterDomain*, IterDomain*> reduced_later;
  for (IterDomain* id : loop) {
    if (id->isReduction() && reduce_here.count(id) == 0) {
      reduced_later[id] = container->create<IterDomain>(
          id->extent(), IterType::Reduction, id->parallelType());
    }
  }
  std::vector<IterDomain*> out_logical;
  for (IterDomain* id : logical) {
    if (!id->isReduction()) {
      out_logical.push_back(id);
      continue;
    }
    for (IterDomain* leaf : loop) {
      if (reduced_later.count(leaf) != 0 && rootOf(leaf, logical) == id) {
        out_logical.push_back(reduced_later.at(leaf));
      }
    }
  }
  std::vector<IterDomain*> out_loop;
  for (IterDomain* id : loop) {
    if (!id->isReduction()) {
      out_loop.push_back(id);
    } else if (reduced_later.count(id) != 0) {
      out_loop.push_back(reduced_later.at(id));
    }
  }

  const auto* original = dynamic_cast<ReductionOp*>(op);
  const OpType reduction = original != nullptr ? op->type() : OpType::Sum;
  const bool empty_is_identity =
      original != nullptr && original->emptyIsIdentity();
  op->unregisterAsDefinition();
  op->withTensors({partial}, op->tensorInputs())->registerAsDefinition();
  out->setDomains({}, std::move(out_logical), std::move(out_loop));
  container->create<ReductionOp>(reduction, out, partial, empty_is_identity)
      ->registerAsDefinition();
  return partial;
}

} // namespace mdfuser
