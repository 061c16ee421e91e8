// SPDX-License-Identifier: MIT
#include "passes/decompose_reshardings.h"

#include <algorithm>
#include <unordered_map>

#include "ir/container.h"
#include "ir/errors.h"
#include "ir/ops.h"
#include "multidevice/sharding.h"

namespace mdfuser {

namespace {

// The device parallel type on a reduction loop axis of `tv`, if any.
std::optional<ParallelType> deviceReduction(const TensorView* tv) {
  for (IterDomain* id : tv->loop()) {
    if (id->isReduction() && id->isDeviceParallel()) {
      return id->parallelType();
    }
  }
  return std::nullopt;
}

// Builds the partial tensor of `out`: the same domains, except that the
// split of the device-reduced axis moves between root and logical, with its
// device part turned into an iteration axis.
TensorView* makePartial(TensorView* out, const ParallelAxis& reduced) {
  IrContainer* container = out->container();
  std::unordered_map<IterDomain*, IterDomain*> to_partial;
  std::vector<IterDomain*> root;
  for (IterDomain* id : out->logical()) {
    auto* copy = container->create<IterDomain>(id->extent(), id->iterType());
    to_partial[id] = copy;
    root.push_back(copy);
  }

  std::vector<IterDomain*> logical = root;
  for (Split* s : splitsBetween(out->logical(), out->loop())) {
    IterDomain* in = to_partial.at(s->in());
    IterDomain* outer = nullptr;
    IterDomain* inner = nullptr;
    if (s == reduced.split) {
      auto make = [&](IterDomain* like) {
        const bool on_devices = like == reduced.loop;
        return container->create<IterDomain>(
            like->extent(),
            on_devices ? IterType::Iteration : IterType::Reduction,
            ParallelType::Serial,
            /*is_rfactor_product=*/true);
      };
      outer = make(s->outer());
      inner = make(s->inner());
      container->create<Split>(outer, inner, in, s->factor(), s->innerSplit());
      auto pos = std::find(logical.begin(), logical.end(), in);
      pos = logical.erase(pos);
      logical.insert(pos, {outer, inner});
    } else {
      std::tie(outer, inner) = split(in, s->factor(), s->innerSplit());
    }
    to_partial[s->outer()] = outer;
    to_partial[s->inner()] = inner;
  }

  std::vector<IterDomain*> loop;
  for (IterDomain* id : out->loop()) {
    IterDomain* copy = to_partial.at(id);
    copy->parallelize(id->parallelType());
    loop.push_back(copy);
  }
  auto* partial = container->create<TensorView>(logical, out->dtype());
  partial->setDomains(std::move(root), std::move(logical), std::move(loop));
  if (out->hasDeviceMesh()) {
    partial->setDeviceMesh(*out->deviceMesh());
  }
  return partial;
}

// Rewrites `out`'s domains for the cross-device sum: the device-reduced
// axis becomes a reduction over the devices only.
void reduceOverDevices(TensorView* out, const ParallelAxis& reduced) {
  auto* over_devices = out->container()->create<IterDomain>(
      reduced.loop->extent(),
      IterType::Reduction,
      reduced.loop->parallelType());
  std::vector<IterDomain*> logical = out->logical();
  std::replace(logical.begin(), logical.end(), reduced.source, over_devices);
  std::vector<IterDomain*> loop;
  for (IterDomain* id : out->loop()) {
    if (id == reduced.loop) {
      loop.push_back(over_devices);
    } else if (id != reduced.split->outer() && id != reduced.split->inner()) {
      loop.push_back(id);
    }
  }
  out->setDomains({}, std::move(logical), std::move(loop));
}

void rFactor(TensorOp* op, ParallelType pt) {
  TensorView* out = op->out();
  ParallelAxis reduced = findParallelAxis(out, pt, out->logical());
  MDF_USER_CHECK(
      reduced.split != nullptr,
      "the reduction axis ",
      reduced.loop->toString(),
      " of ",
      out->toString(),
      " is parallelized on ",
      parallelTypeName(pt),
      " without a split; split the reduced axis by the number of devices "
      "and parallelize the outer part");

  const auto* linear_op = dynamic_cast<const LinearOp*>(op);
  MDF_USER_CHECK(
      linear_op == nullptr || linear_op->bias() == nullptr,
      "linear reduces over in_features sharded on ",
      parallelTypeName(pt),
      ", and its bias would be added once per device; mdfuser cannot split "
      "a linear with bias this way yet. Add the bias after the linear, or "
      "shard out_features instead:\n",
      op->toString());
  TensorView* partial = makePartial(out, reduced);
  op->unregisterAsDefinition();
  op->withOperands(partial, op->tensorInputs())->registerAsDefinition();
  reduceOverDevices(out, reduced);
  out->container()->create<ReductionOp>(out, partial)->registerAsDefinition();
}

} // namespace

void decomposeReshardings(Fusion* fusion) {
  for (TensorOp* op : fusion->exprs()) {
    if (dynamic_cast<ReductionOp*>(op) != nullptr) {
      continue;
    }
    if (std::optional<ParallelType> pt = deviceReduction(op->out())) {
      rFactor(op, *pt);
    }
  }
}

} // namespace mdfuser
