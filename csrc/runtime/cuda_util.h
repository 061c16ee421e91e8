// SPDX-License-Identifier: MIT
#pragma once

// What the CUDA-only parts of the runtime (the CUDA backend, CUDA graphs)
// share: checked runtime calls, events, capture status.
#ifdef MDFUSER_HAS_CUDA

#include <memory>
#include <mutex>
#include <vector>

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

// A new event without timing, owned by the caller.
inline cudaEvent_t createEvent() {
  cudaEvent_t event = nullptr;
  MDF_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return event;
}

inline Event recordEvent(cudaStream_t stream) {
  cudaEvent_t event = createEvent();
  Event owned(event, [](cudaEvent_t e) { cudaEventDestroy(e); });
  MDF_CUDA_CHECK(cudaEventRecord(event, stream));
  return owned;
}

// Events like recordEvent's, taken from a free list that each event goes
// back to when its last owner drops it (on any thread): what is recorded
// at every ring step saves creating and destroying an event there. An
// event is recorded only when taken, so a wait enqueued on it earlier
// (which reads its state when enqueued) is never changed by its reuse.
class EventPool {
 public:
  Event record(cudaStream_t stream) {
    cudaEvent_t event = nullptr;
    {
      std::lock_guard<std::mutex> lock(free_->mutex);
      if (!free_->events.empty()) {
        event = free_->events.back();
        free_->events.pop_back();
      }
    }
    if (event == nullptr) {
      event = createEvent();
    }
    // The free list outlives the pool while its events are out.
    Event owned(event, [free = free_](cudaEvent_t e) {
      std::lock_guard<std::mutex> lock(free->mutex);
      free->events.push_back(e);
    });
    MDF_CUDA_CHECK(cudaEventRecord(event, stream));
    return owned;
  }

 private:
  struct FreeList {
    std::mutex mutex;
    std::vector<cudaEvent_t> events;
    ~FreeList() {
      for (cudaEvent_t e : events) {
        cudaEventDestroy(e);
      }
    }
  };
  std::shared_ptr<FreeList> free_ = std::make_shared<FreeList>();
};

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
