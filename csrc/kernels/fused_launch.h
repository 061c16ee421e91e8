// SPDX-License-Identifier: MIT
#pragma once

// The launch of one fused statement's kernel, prepared once (the grid, the
// kernel's attributes, what the kernel keeps from call to call): what is
// left for a call is posting it with the call's operands. Each kernel's
// prepare function says the operands' shapes.

#include <cuda_runtime_api.h>

namespace mdfuser::kernels {

class FusedLaunch {
 public:
  virtual ~FusedLaunch() = default;

  // Posts the next call on `stream`, on `in`, `weight` and `out`
  // (row-major; their shapes are the kernel's).
  virtual cudaError_t launch(
      const void* in,
      const void* weight,
      void* out,
      cudaStream_t stream) const = 0;
};

} // namespace mdfuser::kernels
