// SPDX-License-Identifier: MIT
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

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
    // The ranks the work waits for; if one of them exits on an error, the
    // work ends the process without waiting for the deadline (setPeerCheck).
    std::vector<int64_t> peers;
  };

  // Of `ranks`, the first that exited on an error, as "rank 1 exited on an
  // error: ...", or an empty string. Called on the watchdog's thread; must
  // not throw.
  using PeerCheck = std::function<std::string(const std::vector<int64_t>&)>;

  static Watchdog& instance();

  // Watches `entry` from now until it finishes or `entry.timeout` passes.
  void watch(Entry entry);

  // About once a second, asks `check` about the peers of each entry watched
  // for more than a second: one that exited on an error will never complete
  // the work, so the process ends then, naming it, rather than at the
  // deadline. Replaces the previous check; nullptr stops checking.
  void setPeerCheck(PeerCheck check);

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
