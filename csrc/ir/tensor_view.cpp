// SPDX-License-Identifier: MIT
#include "ir/tensor_view.h"

#include <algorithm>
#include <unordered_map>

#include "ir/container.h"
#include "ir/errors.h"
#include "ir/fusion.h"

namespace mdfuser {

TensorView::TensorView(
    IrContainer* container,
    std::vector<IterDomain*> logical,
    DataType dtype,
    std::vector<std::optional<bool>> contiguity,
    MemoryType memory_type)
    : Val(container),
      logical_(logical),
      loop_(std::move(logical)),
      contiguity_(std::move(contiguity)),
      dtype_(dtype),
      memory_type_(memory_type) {
  const std::vector<IterDomain*> ids = logicalNoReductions();
  if (contiguity_.empty()) {
    contiguity_.assign(ids.size(), true);
  }
  MDF_CHECK_EQ(contiguity_.size(), ids.size());
  // Static extents whose product no int64 holds would wrap in every
  // element count after this.
  int64_t count = 1;
  bool empty = false;
  bool overflows = false;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i]->isBroadcast()) {
      contiguity_[i] = std::nullopt;
    }
    const Scalar* extent = ids[i]->extent();
    if (extent->isConst()) {
      empty = empty || extent->value() == 0;
      overflows =
          overflows || __builtin_mul_overflow(count, extent->value(), &count);
    }
  }
  if (!empty && overflows) {
    std::string extents;
    for (const IterDomain* id : ids) {
      extents += (extents.empty() ? "" : ", ") + id->extent()->toString();
    }
    MDF_USER_ERROR(
        "a tensor of extents [",
        extents,
        "] would hold more than 2^63 - 1 elements");
  }
}

std::string_view memoryTypeName(MemoryType type) {
  switch (type) {
    case MemoryType::Global:
      return "global";
    case MemoryType::Local:
      return "local";
    case MemoryType::Symmetric:
      return "symmetric";
    case MemoryType::Shared:
      return "shared";
    case MemoryType::Tensor:
      return "tensor";
  }
  return "?";
}

namespace {

std::string_view memoryTypeMark(MemoryType type) {
  switch (type) {
    case MemoryType::Local:
      return "_l_";
    case MemoryType::Symmetric:
      return "_sym_";
    default:
      return "_g_";
  }
}

} // namespace

void TensorView::setMemoryType(MemoryType memory_type) {
  checkMutable();
  MDF_USER_CHECK(
      memory_type == MemoryType::Global || memory_type == MemoryType::Symmetric,
      "set_memory_type: MemoryType.",
      memoryTypeName(memory_type),
      " is not available for ",
      toString(),
      ": mdfuser runs every operation as an ATen kernel on buffers of their "
      "own, which live in global memory (MemoryType.global) or, for the "
      "CUDA communication backend, in symmetric memory "
      "(MemoryType.symmetric)");
  memory_type_ = memory_type;
}

void TensorView::setStrideOrder(std::vector<int64_t> stride_order) {
  const size_t n = logicalNoReductions().size();
  if (!stride_order.empty()) {
    std::vector<bool> seen(n, false);
    MDF_USER_CHECK(
        stride_order.size() == n,
        "define_tensor: stride_order has ",
        stride_order.size(),
        " entries but the tensor has ",
        n,
        " dimensions");
    for (int64_t rank : stride_order) {
      MDF_USER_CHECK(
          rank >= 0 && rank < static_cast<int64_t>(n) && !seen[rank],
          "define_tensor: stride_order must be a permutation of 0..",
          n - 1,
          ", got ",
          rank,
          " out of range or twice");
      seen[rank] = true;
    }
  }
  stride_order_ = std::move(stride_order);
}

void TensorView::setCpuScalar(bool is_cpu) {
  MDF_USER_CHECK(
      !is_cpu || logicalNoReductions().empty(),
      "define_tensor: is_cpu=True is only for 0-dimensional tensors (CPU "
      "scalars next to CUDA tensors), but ",
      toString(),
      " has ",
      logicalNoReductions().size(),
      " dimensions");
  is_cpu_scalar_ = is_cpu;
}

std::vector<IterDomain*> TensorView::logicalNoReductions() const {
  std::vector<IterDomain*> result;
  for (IterDomain* id : logical_) {
    if (!id->isReduction()) {
      result.push_back(id);
    }
  }
  return result;
}

int64_t TensorView::normalizeAxis(int64_t axis) const {
  const int64_t n = nDims();
  MDF_USER_CHECK(
      axis >= -n && axis < n,
      "axis ",
      axis,
      " is out of range for ",
      toString(),
      ", which has ",
      n,
      " loop axes (valid: ",
      -n,
      " to ",
      n - 1,
      ")");
  return axis < 0 ? axis + n : axis;
}

IterDomain* TensorView::axis(int64_t axis) const {
  return loop_[normalizeAxis(axis)];
}

void TensorView::checkMutable() const {
  const auto* fusion = dynamic_cast<const Fusion*>(container());
  MDF_USER_CHECK(
      fusion == nullptr || !fusion->isFrozen(),
      "T",
      name(),
      " belongs to a fusion that has already been executed; its schedule "
      "can no longer change. Define a new FusionDefinition instead.");
}

TensorView* TensorView::split(int64_t axis, int64_t factor, bool inner_split) {
  checkMutable();
  MDF_USER_CHECK(
      factor > 0,
      "split factor must be positive, got ",
      factor,
      " for axis ",
      axis,
      " of ",
      toString());
  return splitBy(axis, constant(container(), factor), inner_split);
}

TensorView* TensorView::outerSplitChosen(int64_t axis) {
  checkMutable();
  return splitBy(axis, chosenCount(container()), /*inner_split=*/false);
}

TensorView* TensorView::splitBy(
    int64_t axis, Scalar* factor, bool inner_split) {
  const int64_t pos = normalizeAxis(axis);
  IterDomain* id = loop_[pos];
  MDF_USER_CHECK(
      id->parallelType() == ParallelType::Serial,
      "axis ",
      axis,
      " of ",
      toString(),
      " is already parallelized on ",
      parallelTypeName(id->parallelType()),
      "; split an axis before parallelizing it");
  auto [outer, inner] = mdfuser::split(id, factor, inner_split);
  loop_[pos] = inner;
  loop_.insert(loop_.begin() + pos, outer);
  return this;
}

TensorView* TensorView::swizzle1d(int64_t axis, ParallelType parallel_type) {
  checkMutable();
  MDF_USER_CHECK(
      isDeviceParallel(parallel_type),
      "swizzle1d: the parallel type must be a device one (mesh_x, mesh_y or "
      "mesh_z), whose index on each device decides where it starts; got ",
      parallelTypeName(parallel_type),
      " for axis ",
      axis,
      " of ",
      toString());
  IterDomain* id = loop_[normalizeAxis(axis)];
  const auto* split = dynamic_cast<const Split*>(id->definition());
  MDF_USER_CHECK(
      split != nullptr && split->outer() == id && !split->innerSplit(),
      "swizzle1d: axis ",
      axis,
      " of ",
      toString(),
      " must be the outer part of an outer split (outer_split(axis, d)), "
      "whose extent is the number of parts it swizzles");
  MDF_USER_CHECK(
      !id->swizzle().has_value(),
      "swizzle1d: axis ",
      axis,
      " of ",
      toString(),
      " is already swizzled");
  id->setSwizzle(parallel_type);
  return this;
}

TensorView* TensorView::merge(int64_t outer, int64_t inner) {
  checkMutable();
  const int64_t o = normalizeAxis(outer);
  const int64_t i = normalizeAxis(inner);
  MDF_USER_CHECK(
      i == o + 1,
      "merge: axes ",
      outer,
      " and ",
      inner,
      " of ",
      toString(),
      " must be adjacent, outer first");
  for (int64_t pos : {o, i}) {
    MDF_USER_CHECK(
        loop_[pos]->parallelType() == ParallelType::Serial,
        "merge: axis ",
        pos,
        " of ",
        toString(),
        " is parallelized on ",
        parallelTypeName(loop_[pos]->parallelType()),
        "; merge axes before parallelizing them");
  }
  IterDomain* merged = mdfuser::merge(loop_[o], loop_[i]);
  loop_.erase(loop_.begin() + i);
  loop_[o] = merged;
  return this;
}

TensorView* TensorView::reorder(const std::map<int64_t, int64_t>& old_to_new) {
  checkMutable();
  const int64_t n = nDims();
  std::vector<IterDomain*> result(n, nullptr);
  std::vector<bool> taken(n, false);
  for (auto [from, to] : old_to_new) {
    const int64_t f = normalizeAxis(from);
    const int64_t t = normalizeAxis(to);
    MDF_USER_CHECK(
        result[t] == nullptr && !taken[f],
        "reorder: ",
        "position ",
        to,
        " or axis ",
        from,
        " is named twice in the map");
    result[t] = loop_[f];
    taken[f] = true;
  }
  size_t next = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (taken[i]) {
      continue;
    }
    while (result[next] != nullptr) {
      ++next;
    }
    result[next] = loop_[i];
  }
  loop_ = std::move(result);
  return this;
}

void TensorView::parallelize(int64_t axis, ParallelType parallel_type) {
  checkMutable();
  const int64_t pos = normalizeAxis(axis);
  IterDomain* id = loop_[pos];
  if (id->parallelType() == parallel_type) {
    return;
  }
  MDF_USER_CHECK(
      id->parallelType() == ParallelType::Serial ||
          parallel_type == ParallelType::Serial,
      "axis ",
      axis,
      " of ",
      toString(),
      " is already parallelized on ",
      parallelTypeName(id->parallelType()),
      "; it cannot also be parallelized on ",
      parallelTypeName(parallel_type));
  if (parallel_type != ParallelType::Serial) {
    for (int64_t i = 0; i < nDims(); ++i) {
      // A reduction axis and an iteration axis on one device type say that
      // the partial sums are scattered along the latter (a reduce-scatter).
      // The partial sums follow from the producers' shardings, so the
      // reduction's annotation is dropped and the iteration axis kept.
      if (loop_[i]->parallelType() == parallel_type &&
          isDeviceParallel(parallel_type) &&
          loop_[i]->isReduction() != id->isReduction()) {
        if (id->isReduction()) {
          return;
        }
        loop_[i]->parallelize(ParallelType::Serial);
        continue;
      }
      MDF_USER_CHECK(
          loop_[i]->parallelType() != parallel_type,
          "axis ",
          i,
          " of ",
          toString(),
          " is already parallelized on ",
          parallelTypeName(parallel_type),
          "; a tensor can have only one axis per parallel type, so axis ",
          axis,
          " cannot be parallelized on it too");
    }
  }
  // A broadcast axis holds one element, which one device (or one stream
  // chunk) holds whole: scripts written for any number of devices
  // parallelize it when run on one. On more, the schedule's validation
  // refuses to split it.
  MDF_USER_CHECK(
      !(id->isReduction() && parallel_type == ParallelType::Stream),
      "axis ",
      axis,
      " of ",
      toString(),
      " is a reduction; reductions cannot be stream-parallel");
  id->parallelize(parallel_type);
}

void TensorView::setDeviceMesh(const DeviceMesh& mesh) {
  checkMutable();
  mesh_ = mesh;
}

void TensorView::setDomains(
    std::vector<IterDomain*> root,
    std::vector<IterDomain*> logical,
    std::vector<IterDomain*> loop) {
  root_ = std::move(root);
  logical_ = std::move(logical);
  loop_ = std::move(loop);
  MDF_CHECK_EQ(
      contiguity_.size(),
      logicalNoReductions().size(),
      "new domains change the number of non-reduction axes of T",
      name());
}

void TensorView::setLoop(std::vector<IterDomain*> loop) {
  loop_ = std::move(loop);
}

std::string TensorView::toString() const {
  std::string s = "T" + std::to_string(name()) +
                  std::string(memoryTypeMark(memory_type_)) +
                  std::string(typeString(dtype_)) + "[";
  for (size_t i = 0; i < loop_.size(); ++i) {
    if (i > 0) {
      s += ", ";
    }
    s += loop_[i]->toString();
  }
  s += "]";
  if (mesh_.has_value()) {
    s += " (" + mesh_->toString() + ")";
  }
  return s;
}

Statement* TensorView::cloneInto(IrCloner& cloner) const {
  auto* tv = cloner.target()->create<TensorView>(
      cloner.clone(logical_), dtype_, contiguity_, memory_type_);
  tv->root_ = cloner.clone(root_);
  tv->loop_ = cloner.clone(loop_);
  tv->mesh_ = mesh_;
  tv->stride_order_ = stride_order_;
  tv->is_cpu_scalar_ = is_cpu_scalar_;
  return tv;
}

} // namespace mdfuser

namespace mdfuser {

TensorView* newTensorLike(
    const TensorView* tv, bool keep_reductions, bool with_schedule) {
  IrContainer* container = tv->container();
  std::unordered_map<const IterDomain*, IterDomain*> copies;
  std::vector<IterDomain*> logical;
  for (IterDomain* id : tv->logical()) {
    if (id->isReduction() && !keep_reductions) {
      continue;
    }
    auto* copy = container->create<IterDomain>(id->extent(), id->iterType());
    copies[id] = copy;
    logical.push_back(copy);
  }
  auto* result = container->create<TensorView>(logical, tv->dtype());
  if (tv->hasDeviceMesh()) {
    result->setDeviceMesh(*tv->deviceMesh());
  }
  if (!with_schedule) {
    return result;
  }
  for (Expr* e : transformsBetween(tv->logical(), tv->loop())) {
    if (auto* s = dynamic_cast<Split*>(e)) {
      auto it = copies.find(s->in());
      if (it == copies.end()) {
        continue;
      }
      auto [outer, inner] = split(it->second, s->factor(), s->innerSplit());
      copies[s->outer()] = outer;
      copies[s->inner()] = inner;
    } else {
      auto* m = static_cast<Merge*>(e);
      auto o = copies.find(m->outer());
      auto i = copies.find(m->inner());
      if (o == copies.end() || i == copies.end()) {
        continue;
      }
      copies[m->out()] = merge(o->second, i->second);
    }
  }
  std::vector<IterDomain*> loop;
  for (IterDomain* id : tv->loop()) {
    auto it = copies.find(id);
    if (it == copies.end()) {
      continue;
    }
    it->second->parallelize(id->parallelType());
    loop.push_back(it->second);
  }
  result->setLoop(std::move(loop));
  return result;
}

} // namespace mdfuser
