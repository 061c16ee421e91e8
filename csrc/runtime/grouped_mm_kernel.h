// SPDX-License-Identifier: MIT
#pragma once

#include "runtime/kernels.h"

namespace mdfuser {

// grouped_mm (GroupedMmOp) on this device's parts of its operands: one ATen
// GEMM per group held, written into the group's rows, columns or matrix of
// the output; everything else is zero (the partial sum of a device holding
// other experts, rows past the last offset). The offsets are read on the
// host, checked (non-negative, non-decreasing, within the ragged axis:
// ValueError naming them otherwise) and give each group's range. With an
// expert-sharded operand, heldIndices says which groups this device holds.
// On CUDA, BFloat16 [M, K] x [G, K, N] with every group held runs as one
// torch._grouped_mm where the device has it (sm90), falling back to the
// loop where it refuses the operands.
void groupedMmKernel(KernelCall& call);

} // namespace mdfuser
