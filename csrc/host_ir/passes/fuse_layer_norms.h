// SPDX-License-Identifier: MIT
#pragma once

#include "host_ir/host_ir_container.h"

namespace mdfuser::hir {

// Replaces a layer_norm written from primitives (as mdfuser.nn.layer_norm
// writes it) by one LayerNormOp, which runs ATen's fused kernel:
//
//   xf = cast(x, Float)                       (for Half and BFloat16 x)
//   centred = sub(xf, div(broadcast(sum(xf, dims)), n))
//   var = div(broadcast(sum(mul(centred, centred), dims)), n)
//   y = mul(centred, rsqrt(add(var, eps)))
//   y = mul(y, cast(weight, Float))           (optional)
//   y = add(y, cast(bias, Float))             (optional)
//   out = cast(y, x's dtype)                  (for Half and BFloat16 x)
//
//   =>   out = layer_norm(x, weight, bias, normalized_ndim, eps)
//
// only where it computes the same thing locally: `dims` are the trailing
// axes, every device and stream chunk holds them whole (unsplit in x and
// out, so no allreduce sits between the sums and the divisions), n is
// their element count, weight and bias have x's dtype, every statement is
// in one scope (but the upcasts of weight and bias, which may run before a
// Stream loop holding the rest: lowering hoists them there) and every
// intermediate is used by the pattern alone (not a program output). Other
// compositions are left as they are. Runs first, on the lowered program;
// `_disable_options=["fuse_layer_norms"]` turns it off.
void fuseLayerNorms(HostIrContainer& hic);

} // namespace mdfuser::hir
