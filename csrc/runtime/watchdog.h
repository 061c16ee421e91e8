// SPDX-License-Identifier: MIT
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace mdfuser {

// Watches communication that a GPU stream waits for and that only peers can
// complete. Work that has not finished by its deadline is reported on
// stderr, and the process ends: a stream blocked on a peer that never comes
// cannot be unblocked, so the alternative is a hang (NCCL's own watchdog
// ends the process the same way).
//
// One thread, started on the first watch(), polls every entry about every
// 20 ms; it never blocks the threads that post work.
class Watchdog {
 public:
  struct Entry {
    // True once the work has finished, or failed in a way its user sees.
    // Called on the watchdog's thread.
    std::function<bool()> finished;
    // What the report says, e.g. "rank 0 in Allreduce (Communication 3)
    // with team (0 1) on NCCL: ...". Called at most once, on the watchdog's
    // thread, after the deadline.
    std::function<std::string()> describe;
    std::chrono::milliseconds timeout{0};
    // The GPU whose work `finished` queries (made current on the watchdog's
    // thread), or -1.
    int device = -1;
  };

  static Watchdog& instance();

  // Watches `entry` from now until it finishes or `entry.timeout` passes.
  void watch(Entry entry);

  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  struct State;
  Watchdog();
  ~Watchdog();
  void loop();

  std::unique_ptr<State> state_;
};

} // namespace mdfuser
