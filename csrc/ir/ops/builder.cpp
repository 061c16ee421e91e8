// SPDX-License-Identifier: MIT
#include "ir/ops/builder.h"

#include "ir/container.h"
#include "ir/errors.h"
#include "ir/fusion.h"

namespace mdfuser::ops {

TensorView* requireTensor(
    Val* val, std::string_view op, std::string_view role) {
  MDF_TYPE_CHECK(val != nullptr, op, ": ", role, " must be a tensor, got None");
  auto* tv = dynamic_cast<TensorView*>(val);
  MDF_TYPE_CHECK(
      tv != nullptr,
      op,
      ": ",
      role,
      " must be a tensor, got ",
      val->toString());
  return tv;
}

void requireSameFusion(const std::vector<Val*>& operands, std::string_view op) {
  const Val* first = nullptr;
  for (const Val* val : operands) {
    if (val == nullptr) {
      continue;
    }
    if (first == nullptr) {
      first = val;
      continue;
    }
    MDF_USER_CHECK(
        val->container() == first->container(),
        op,
        ": ",
        val->toString(),
        " belongs to another fusion than ",
        first->toString(),
        "; an operation takes values of one FusionDefinition");
  }
  if (first != nullptr) {
    const auto* fusion = dynamic_cast<const Fusion*>(first->container());
    MDF_USER_CHECK(
        fusion == nullptr || !fusion->isFrozen(),
        op,
        ": the fusion has already been executed; define a new "
        "FusionDefinition to add operations");
  }
}

void requireEqualExtents(Scalar* a, Scalar* b, const std::string& what) {
  if (a->isConst() && b->isConst()) {
    MDF_USER_CHECK(
        a->value() == b->value(),
        what,
        " must match, got ",
        a->value(),
        " and ",
        b->value());
    return;
  }
  if (a != b) {
    fusionOf(a)->addExtentConstraint(a, b, what);
  }
}

IterDomain* freshAxis(IterDomain* like, IterType type) {
  return like->container()->create<IterDomain>(like->extent(), type);
}

TensorView* newTensor(
    IrContainer* container, std::vector<IterDomain*> logical, DataType dtype) {
  return container->create<TensorView>(std::move(logical), dtype);
}

int64_t normalizeDim(int64_t axis, int64_t n, std::string_view op) {
  MDF_USER_CHECK(
      axis >= -n && axis < n,
      op,
      ": dimension ",
      axis,
      " is out of range for a tensor of ",
      n,
      " dimensions (valid: ",
      -n,
      " to ",
      n - 1,
      ")");
  return axis < 0 ? axis + n : axis;
}

std::string listString(const std::vector<int64_t>& values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    s += (i > 0 ? ", " : "") + std::to_string(values[i]);
  }
  return s + "]";
}

} // namespace mdfuser::ops
