// SPDX-License-Identifier: MIT
#include "ir/ops/composite.h"

#include "ir/errors.h"
#include "ir/ops/broadcast.h"
#include "ir/ops/builder.h"
#include "ir/ops/pointwise.h"
#include "ir/ops/reduction.h"
#include "ir/ops/squeeze.h"

namespace mdfuser {

namespace {

void requireFloating(const TensorView* in, std::string_view op) {
  MDF_TYPE_CHECK(
      isFloatingType(in->dtype()),
      op,
      " takes floating-point tensors, got ",
      in->dtype(),
      " for ",
      in->toString(),
      "; cast it first");
}

// The number of elements each result reduces: the product of the global
// extents of `dims`.
Scalar* count(const TensorView* in, const std::vector<int64_t>& dims) {
  const std::vector<IterDomain*> ids = in->logicalNoReductions();
  Scalar* n = constant(in->container(), 1);
  for (int64_t d : dims) {
    n = mul(n, ids[d]->extent());
  }
  return n;
}

// The computation type: Float for Half and BFloat16.
TensorView* upcast(TensorView* in) {
  return isReducedPrecision(in->dtype()) ? cast(in, DataType::Float) : in;
}

} // namespace

TensorView* mean(
    TensorView* in, const std::vector<int64_t>& dims, bool keepdim) {
  ops::requireTensor(in, "mean", "input");
  requireFloating(in, "mean");
  const auto rank = static_cast<int64_t>(in->logicalNoReductions().size());
  const std::vector<int64_t> reduced = reductionDims(dims, rank, "mean");
  TensorView* sum = reduce(OpType::Sum, upcast(in), reduced, keepdim);
  // A Float result for Half and BFloat16, as nvFuser's mean (a division of
  // a sum) gives.
  return binaryOp(OpType::Div, sum, count(in, reduced));
}

std::pair<TensorView*, TensorView*> varMean(
    TensorView* in,
    const std::vector<int64_t>& dims,
    int64_t correction,
    bool keepdim) {
  ops::requireTensor(in, "var_mean", "input");
  requireFloating(in, "var_mean");
  MDF_USER_CHECK(
      correction >= 0, "var_mean: correction must be >= 0, got ", correction);
  const std::vector<IterDomain*> ids = in->logicalNoReductions();
  const auto rank = static_cast<int64_t>(ids.size());
  const std::vector<int64_t> reduced = reductionDims(dims, rank, "var_mean");
  TensorView* x = upcast(in);
  Scalar* n = count(in, reduced);

  TensorView* mean_kept =
      binaryOp(OpType::Div, reduce(OpType::Sum, x, reduced, true), n);
  TensorView* diff = binaryOp(OpType::Sub, x, mean_kept);
  TensorView* sq_sum =
      reduce(OpType::Sum, binaryOp(OpType::Mul, diff, diff), reduced, keepdim);
  Scalar* dof =
      max(sub(n, constant(in->container(), correction)),
          constant(in->container(), 0));
  TensorView* var = binaryOp(OpType::Div, sq_sum, dof);

  TensorView* mean_out = keepdim ? mean_kept : squeeze(mean_kept, reduced);
  return {var, mean_out};
}

} // namespace mdfuser
