// SPDX-License-Identifier: MIT
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

#include "ir/ops/tensor_op.h"
#include "ir/scalar_eval.h"

namespace mdfuser {

// One compute operation with its values bound: what a kernel runs on.
struct KernelCall {
  const TensorOp& op;
  // Per operand of op: the tensor bound to a tensor operand (undefined for
  // the others).
  std::vector<at::Tensor> tensors;
  // Per operand of op: the value of a literal or extent operand.
  std::vector<c10::Scalar> scalars;
  // The buffers bound to op's outputs, in order; kernels write into them.
  std::vector<at::Tensor> outputs;
  // Values of the program's symbolic extents.
  const ScalarEvaluator& extents;
  // Where uniform and normal without rng_seed draw from: a value the same
  // on every rank and new at each execution (FusionExecutorCache::run).
  uint64_t rng_base = 0;
  // This process's device (its rank): where a kernel whose values depend on
  // which part of the global tensor it holds (grouped_mm's experts,
  // attention's dropout mask on the CPU) finds its part.
  int64_t device = 0;
};

// Runs `call` through the kernel of its operation type: one ATen call
// (an `*_out` where ATen has one) per operation. The table from operation
// type to kernel is in kernels.cpp.
//
// Random operations (uniform, normal) fill their whole global tensor from a
// generator of torch's kind for the device (CPU: Mersenne Twister, CUDA:
// Philox) seeded with a mix of (rng_seed, rng_offset), or, without a seed,
// of `rng_base` and the operation's output: the same values on every rank,
// so a replicated tensor agrees everywhere and a sharded one is cut from
// one global tensor. Values differ between CPU and CUDA and from nvFuser's.
void runKernel(KernelCall& call);

// The result of a layout operation (permute, slice, squeeze, broadcast,
// reshape) on `call.tensors[0]` as a view of it, without writing anything
// (a reshape that no view can express copies). `call.outputs` is unused.
at::Tensor layoutView(const KernelCall& call);

} // namespace mdfuser
