// SPDX-License-Identifier: MIT
#include "host_ir/fused_matmul_communication.h"

#include <string>

#include "ir/container.h"
#include "ir/errors.h"

namespace mdfuser::hir {

FusedMatmulCommunication::FusedMatmulCommunication(
    IrContainer* container,
    std::string_view op,
    std::vector<int64_t> team,
    TensorView* in,
    TensorView* weight,
    TensorView* out,
    int64_t axis)
    : HostExpr(container, {in, weight}, {out}),
      team_(std::move(team)),
      axis_(axis) {
  MDF_CHECK(
      team_.size() >= 2,
      "an ",
      op,
      " runs over two devices or more, got team ",
      teamString(team_));
  MDF_CHECK(axis_ == 0, "an ", op, " cuts rows (axis 0), not ", axis_);
  MDF_CHECK(
      out != in && out != weight,
      "an ",
      op,
      " writes a buffer of its own: ",
      out->toString());
}

TensorView* FusedMatmulCommunication::in() const {
  return static_cast<TensorView*>(input(0));
}

TensorView* FusedMatmulCommunication::weight() const {
  return static_cast<TensorView*>(input(1));
}

TensorView* FusedMatmulCommunication::out() const {
  return static_cast<TensorView*>(output(0));
}

std::string FusedMatmulCommunication::toString() const {
  return out()->toString() + " = " + std::string(opName()) + "(" +
         in()->toString() + ", " + weight()->toString() +
         ", team=" + teamString(team_) +
         ", kernel=" + std::string(kernelName()) + ")";
}

AllgatherLinear::AllgatherLinear(
    IrContainer* container,
    std::vector<int64_t> team,
    TensorView* in,
    TensorView* weight,
    TensorView* out,
    int64_t axis)
    : FusedMatmulCommunication(
          container,
          "AllgatherLinear",
          std::move(team),
          in,
          weight,
          out,
          axis) {}

LinearReduceScatter::LinearReduceScatter(
    IrContainer* container,
    std::vector<int64_t> team,
    TensorView* in,
    TensorView* weight,
    TensorView* out,
    int64_t axis)
    : FusedMatmulCommunication(
          container,
          "LinearReduceScatter",
          std::move(team),
          in,
          weight,
          out,
          axis) {}

} // namespace mdfuser::hir
