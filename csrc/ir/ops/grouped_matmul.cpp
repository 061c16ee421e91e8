// SPDX-License-Identifier: MIT
#include "ir/ops/grouped_matmul.h"

#include "ir/container.h"
#include "ir/errors.h"
#include "ir/ops/builder.h"

namespace mdfuser {

namespace {

constexpr const char* kName = "grouped_mm";

GroupedMmOp::Form formOf(size_t a_rank, size_t b_rank) {
  if (a_rank == 2 && b_rank == 3) {
    return GroupedMmOp::Form::kRaggedRows;
  }
  if (a_rank == 3 && b_rank == 2) {
    return GroupedMmOp::Form::kRaggedCols;
  }
  MDF_CHECK(a_rank == 2 && b_rank == 2, a_rank, " x ", b_rank);
  return GroupedMmOp::Form::kRaggedK;
}

} // namespace

GroupedMmOp::GroupedMmOp(
    IrContainer* container,
    TensorView* out,
    TensorView* a,
    TensorView* b,
    TensorView* offsets)
    : TensorOp(container, OpType::GroupedMm, {a, b, offsets}, {out}) {}

TensorView* GroupedMmOp::a() const {
  return static_cast<TensorView*>(input(0));
}
TensorView* GroupedMmOp::b() const {
  return static_cast<TensorView*>(input(1));
}
TensorView* GroupedMmOp::offsets() const {
  return static_cast<TensorView*>(input(2));
}

GroupedMmOp::Form GroupedMmOp::form() const {
  return formOf(
      a()->logicalNoReductions().size(), b()->logicalNoReductions().size());
}

TensorView* GroupedMmOp::grouped() const {
  switch (form()) {
    case Form::kRaggedRows:
      return b();
    case Form::kRaggedCols:
      return a();
    case Form::kRaggedK:
      return nullptr;
  }
  MDF_UNREACHABLE("unknown grouped_mm form");
}

std::vector<AxisMapping> GroupedMmOp::mapProducerToConsumer(
    const TensorView* producer, const TensorView* consumer) const {
  MDF_CHECK(consumer == out(), consumer->toString(), " is not an output");
  // out root: [M, N, rK, rG] in the first two forms, [G, M, N] in kRaggedK.
  const std::vector<IterDomain*>& c = consumer->maybeRoot();
  const std::vector<IterDomain*> p = producer->logicalNoReductions();
  if (producer == offsets()) {
    return {};
  }
  MDF_CHECK(
      producer == a() || producer == b(),
      producer->toString(),
      " is not an operand");
  const bool is_a = producer == a();
  switch (form()) {
    case Form::kRaggedRows:
      // a [M (ragged), K], b [G, K, N]
      if (is_a) {
        return {{p[1], c[2]}};
      }
      return {{p[0], c[3]}, {p[1], c[2]}, {p[2], c[1]}};
    case Form::kRaggedCols:
      // a [G, M, K], b [K, N (ragged)]
      if (is_a) {
        return {{p[0], c[3]}, {p[1], c[0]}, {p[2], c[2]}};
      }
      return {{p[0], c[2]}};
    case Form::kRaggedK:
      // a [M, K (ragged)], b [K (ragged), N]
      if (is_a) {
        return {{p[0], c[1]}};
      }
      return {{p[1], c[2]}};
  }
  MDF_UNREACHABLE("unknown grouped_mm form");
}

std::vector<TensorView*> GroupedMmOp::shardingPriority() const {
  if (form() == Form::kRaggedCols) {
    return {a(), b()};
  }
  return {b(), a()};
}

TensorOp* GroupedMmOp::recreate(
    IrContainer* container,
    std::vector<Val*> inputs,
    std::vector<Val*> outputs) const {
  MDF_CHECK(inputs.size() == 3 && outputs.size() == 1);
  return container->create<GroupedMmOp>(
      static_cast<TensorView*>(outputs[0]),
      static_cast<TensorView*>(inputs[0]),
      static_cast<TensorView*>(inputs[1]),
      static_cast<TensorView*>(inputs[2]));
}

TensorView* groupedMm(TensorView* a, TensorView* b, TensorView* offsets) {
  ops::requireTensor(a, kName, "mat1");
  ops::requireTensor(b, kName, "mat2");
  ops::requireTensor(offsets, kName, "offsets");
  ops::requireSameFusion({a, b, offsets}, kName);
  const std::vector<IterDomain*> a_ids = a->logicalNoReductions();
  const std::vector<IterDomain*> b_ids = b->logicalNoReductions();
  const std::vector<IterDomain*> o_ids = offsets->logicalNoReductions();
  MDF_TYPE_CHECK(
      offsets->dtype() == DataType::Int32,
      "grouped_mm: offsets must be Int32 (the cumulative end of each group, "
      "as torch._grouped_mm takes them), got ",
      offsets->dtype(),
      " for ",
      offsets->toString());
  MDF_USER_CHECK(
      o_ids.size() == 1,
      "grouped_mm: offsets must be 1-dimensional [groups], got ",
      o_ids.size(),
      " dimensions in ",
      offsets->toString());
  MDF_USER_CHECK(
      (a_ids.size() == 2 && (b_ids.size() == 2 || b_ids.size() == 3)) ||
          (a_ids.size() == 3 && b_ids.size() == 2),
      "grouped_mm: takes mat1 [M, K] with mat2 [G, K, N] or [K, N], or mat1 "
      "[G, M, K] with mat2 [K, N]; got ",
      a_ids.size(),
      " and ",
      b_ids.size(),
      " dimensions in ",
      a->toString(),
      " and ",
      b->toString(),
      a_ids.size() == 3 && b_ids.size() == 3
          ? " (two 3-dimensional operands are a batched matmul: use matmul)"
          : "");
  MDF_TYPE_CHECK(
      a->dtype() == b->dtype(),
      "grouped_mm: mat1 and mat2 must have the same dtype, got ",
      a->dtype(),
      " for ",
      a->toString(),
      " and ",
      b->dtype(),
      " for ",
      b->toString());
  MDF_TYPE_CHECK(
      isFloatingType(a->dtype()),
      "grouped_mm takes floating-point mat1 and mat2, got ",
      a->dtype(),
      " for ",
      a->toString());
  const GroupedMmOp::Form form = formOf(a_ids.size(), b_ids.size());
  IterDomain* b_k = b_ids[b_ids.size() - 2];
  ops::requireEqualExtents(
      a_ids.back()->extent(),
      b_k->extent(),
      "grouped_mm: K of mat1 (its last axis) and of mat2 (axis -2)");

  std::vector<IterDomain*> out_ids;
  switch (form) {
    case GroupedMmOp::Form::kRaggedRows:
      ops::requireEqualExtents(
          o_ids[0]->extent(),
          b_ids[0]->extent(),
          "grouped_mm: the groups of offsets and of mat2 (its first axis)");
      out_ids = {
          ops::freshAxis(a_ids[0], IterType::Iteration),
          ops::freshAxis(b_ids[2], IterType::Iteration),
          ops::freshAxis(a_ids[1], IterType::Reduction),
          ops::freshAxis(b_ids[0], IterType::Reduction)};
      break;
    case GroupedMmOp::Form::kRaggedCols:
      ops::requireEqualExtents(
          o_ids[0]->extent(),
          a_ids[0]->extent(),
          "grouped_mm: the groups of offsets and of mat1 (its first axis)");
      out_ids = {
          ops::freshAxis(a_ids[1], IterType::Iteration),
          ops::freshAxis(b_ids[1], IterType::Iteration),
          ops::freshAxis(a_ids[2], IterType::Reduction),
          ops::freshAxis(a_ids[0], IterType::Reduction)};
      break;
    case GroupedMmOp::Form::kRaggedK:
      out_ids = {
          ops::freshAxis(o_ids[0], IterType::Iteration),
          ops::freshAxis(a_ids[0], IterType::Iteration),
          ops::freshAxis(b_ids[1], IterType::Iteration)};
      break;
  }
  TensorView* out = ops::newTensor(a->container(), out_ids, a->dtype());
  a->container()
      ->create<GroupedMmOp>(out, a, b, offsets)
      ->registerAsDefinition();
  return out;
}

} // namespace mdfuser
