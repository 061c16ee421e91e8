// SPDX-License-Identifier: MIT
#pragma once

// The handle on a posted collective, whichever backend posted it (c10d's
// through runtime/collectives.h, or the CUDA backend's moves).

#include <chrono>
#include <functional>
#include <vector>

#include <c10/util/intrusive_ptr.h>

namespace c10d {
class Work;
} // namespace c10d

namespace mdfuser {

// A posted collective. wait() makes the caller's current stream (CUDA) or
// the host (CPU) wait for it, then runs what must follow it on this rank
// (copies out of staging buffers). Failures of the backend propagate as
// the backend's exceptions; the evaluator adds rank and operation.
class PendingCollective {
 public:
  PendingCollective() = default;
  PendingCollective(
      std::vector<c10::intrusive_ptr<c10d::Work>> works,
      std::function<void()> epilogue);

  void wait();
  // wait() where it blocks the host (Gloo, CPU tensors), with `interrupt`
  // called about every `period` until the backend finishes: it may throw to
  // stop waiting (a peer failed). The backend's own wait then goes on, on a
  // thread of its own, until it finishes or its timeout ends it.
  void waitInterruptibly(
      const std::function<void()>& interrupt, std::chrono::milliseconds period);
  // True when nothing was posted (for example, a team of one).
  bool empty() const {
    return works_.empty() && !epilogue_;
  }
  // The backend's handles of what was posted.
  const std::vector<c10::intrusive_ptr<c10d::Work>>& works() const {
    return works_;
  }

 private:
  std::vector<c10::intrusive_ptr<c10d::Work>> works_;
  std::function<void()> epilogue_;
};

} // namespace mdfuser
