// SPDX-License-Identifier: MIT
#pragma once

#include "host_ir/host_ir_container.h"

namespace mdfuser::hir {

// Folds a cast to Half or BFloat16 into the pointwise operation it reads:
//
//   t = add(a, b)            (Float: Half and BFloat16 operands widen)
//   out = cast(t, BFloat16)
//
//   =>   out = add(a, b)     (computes in Float, writes BFloat16)
//
// so that arithmetic written as nvFuser scripts write it (compute in
// Float, cast back) runs as one ATen kernel of the narrow dtype, which
// computes in Float and rounds once, as nvFuser's fused kernel does. Only
// where that is the same computation: the operation computes in Float and
// writes it (an operation whose PromotionKind widens Half and BFloat16),
// its tensor operands are floating, `t` is read by the cast alone and is
// no program output, and both statements are in one scope. Runs after
// FuseLayerNorms, whose pattern ends in such a cast.
void foldCasts(HostIrContainer& hic);

} // namespace mdfuser::hir
