// SPDX-License-Identifier: MIT
#pragma once

// Checks of CUDA runtime calls, for the CUDA-only parts of the runtime.
#ifdef MDFUSER_HAS_CUDA

#include <cuda_runtime_api.h>

#include "ir/errors.h"

// An internal error naming the call and CUDA's message when `call` fails.
#define MDF_CUDA_CHECK(call)            \
  do {                                  \
    const cudaError_t status_ = (call); \
    MDF_CHECK(                          \
        status_ == cudaSuccess,         \
        #call,                          \
        " failed: ",                    \
        cudaGetErrorString(status_));   \
  } while (false)

#endif
