// SPDX-License-Identifier: MIT
#pragma once

#include "runtime/kernels.h"

namespace mdfuser {

// The kernels of sdpfa_fwd and sdpfa_bwd (OpType::SdpaFwd, SdpaBwd).
//
// Without dropout, ATen's fused kernels: on CUDA cuDNN's for large problems
// and flash attention otherwise, on the CPU flash attention's CPU variant.
// With dropout, on CUDA flash attention, which draws its mask from torch's
// CUDA generator and returns the state it drew it from (rng_state, written
// to philox_seed) for its backward to draw it again; on the CPU, where
// ATen's kernels take no dropout, attention as its matrix products with the
// mask of sdpaDropoutKeep, the forward seeded as an unseeded uniform is
// (KernelCall::rng_base), the backward from the philox_seed it is given.
// Operands of five dimensions, [D, B, H/D, S, E], run as [D * B, H/D, S, E].
void sdpaFwdKernel(KernelCall& call);
void sdpaBwdKernel(KernelCall& call);

} // namespace mdfuser
