// SPDX-License-Identifier: MIT
#pragma once

#include "runtime/kernels.h"

namespace mdfuser {

// linear (LinearOp): one 2-D GEMM over all the input's leading axes, its
// rows in the output buffer's memory order, the bias in cuBLASLt's
// epilogue (addmm) or, output-shaped, as the C operand (a ring adding the
// partial sum it received); a weight [A, B, K] runs a GEMM per A into the
// output [A, batch..., B].
void linearKernel(KernelCall& call);

// matmul (MatmulOp): torch.matmul's broadcasting of the batch axes, on
// contiguous operands.
void matmulKernel(KernelCall& call);

} // namespace mdfuser
