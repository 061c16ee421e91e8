// SPDX-License-Identifier: MIT
#pragma once

// What the CUDA-only parts of the runtime (the CUDA backend, CUDA graphs)
// share: checked runtime calls, events, capture status.
#ifdef MDFUSER_HAS_CUDA

#include <memory>

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

namespace mdfuser {

// A CUDA event without timing, destroyed with its last owner (the destroy
// is deferred by CUDA until the work it marks is done).
using Event = std::shared_ptr<CUevent_st>;

inline Event recordEvent(cudaStream_t stream) {
  cudaEvent_t event = nullptr;
  MDF_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  Event owned(event, [](cudaEvent_t e) { cudaEventDestroy(e); });
  MDF_CUDA_CHECK(cudaEventRecord(event, stream));
  return owned;
}

// Whether the work `event` marks has finished, or the device failed, which
// the work's user sees; for the watchdog's polls.
inline bool eventFinished(const Event& event) {
  const bool running = cudaEventQuery(event.get()) == cudaErrorNotReady;
  (void)cudaGetLastError();
  return !running;
}

// Whether work enqueued on `stream` now is captured into a CUDA graph
// rather than run.
inline bool isCapturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  MDF_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status == cudaStreamCaptureStatusActive;
}

} // namespace mdfuser

#endif
