// SPDX-License-Identifier: MIT
#include "ir/tensor_view.h"

#include <algorithm>

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
  if (contiguity_.empty()) {
    contiguity_.assign(logicalNoReductions().size(), true);
  }
  MDF_CHECK_EQ(contiguity_.size(), logicalNoReductions().size());
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
  const int64_t pos = normalizeAxis(axis);
  MDF_USER_CHECK(
      factor > 0,
      "split factor must be positive, got ",
      factor,
      " for axis ",
      axis,
      " of ",
      toString());
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
  auto [outer, inner] =
      mdfuser::split(id, constant(container(), factor), inner_split);
  loop_[pos] = inner;
  loop_.insert(loop_.begin() + pos, outer);
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
                  (memory_type_ == MemoryType::Global ? "_g_" : "_l_") +
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
  return tv;
}

} // namespace mdfuser
