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
// Two threads, started on the first watch(): one polls every entry about
// every 20 ms, the other enforces the deadlines and asks about peers; they
// never block the threads that post work.
class Watchdog {
 public:
  struct Entry {
    // True once the work has finished, or failed in a way its user sees.
    // Called on the poller.
    std::function<bool()> finished;
    // What the report says, e.g. "rank 0 in Allreduce (Communication 3)
    // with team (0 1) on NCCL: ...". Called for a report (the deadline, a
    // peer's exit or failure), on a thread of its own.
    std::function<std::string()> describe;
    std::chrono::milliseconds timeout{0};
    // The GPU whose work `finished` queries (made current on the poller),
    // or -1.
    int device = -1;
    // The ranks the work waits for; if one of them exits on an error, the
    // work ends the process without waiting for the deadline (setPeerCheck).
    std::vector<int64_t> peers;
    // The communication epoch the work was posted in (Communicator::epoch),
    // and the run that posted it (the token FusionExecutorCache gives each
    // run of a fusion, the same on every rank).
    int64_t epoch = 0;
    uint64_t run = 0;
    // Lets abandoned work run to its end without its peers: called on the
    // poller at every poll until `finished`, or until it returns
    // true (the work is over: an aborted NCCL communicator, whose work
    // cannot be queried afterwards); the CUDA backend's moves return false
    // and are released until their events complete. Null: the work cannot
    // be released, and only its deadline ends it.
    std::function<bool()> release;
    // Whether `release` may also run on a thread of its own (an NCCL
    // abort): once the epoch is abandoned the supervisor starts it so,
    // once, should the poller be held up.
    bool release_anywhere = false;
  };

  // What became of the peers an entry waits for, as errors name it: "rank 1
  // exited on an error: ..." (the process ends), "rank 1 failed: ..." (a
  // rank failed since the entry's epoch began, Communicator::reportFailure:
  // the work of that epoch is released), or neither.
  struct PeerNews {
    std::string exited;
    std::string failed;
  };
  // Asked about `ranks`, `epoch` and `run` of an entry waiting a second or
  // more. Called on the supervisor (never held up by CUDA); must not
  // throw.
  using PeerCheck = std::function<PeerNews(
      const std::vector<int64_t>& ranks, int64_t epoch, uint64_t run)>;

  static Watchdog& instance();

  // Watches `entry` from now until it finishes or `entry.timeout` passes.
  void watch(Entry entry);

  // About once a second, asks `check` about the peers of each entry watched
  // for more than a second: one that exited on an error will never complete
  // the work, so the process ends then, naming it, rather than at the
  // deadline; after a failure since the entry's epoch began, the work of
  // that epoch is released (abandonBefore). Replaces the previous check;
  // nullptr stops checking.
  void setPeerCheck(PeerCheck check);

  // The work of every epoch before `epoch` is abandoned: released (its
  // `release`) until it finishes, and so is work of those epochs posted
  // later. Its deadline still holds. Any thread.
  void abandonBefore(int64_t epoch);

  // What to do for the peers once `epoch` is abandoned, whether or not this
  // rank has work of it watched: a rank that reported the failure has none,
  // and a peer's stream may wait on it. From then on `release` is called on
  // the poller at every poll, for `duration` or until it returns
  // true. Any thread; a standby whose epoch is already abandoned starts at
  // once.
  struct Standby {
    int64_t epoch = 0;
    // Made current on the poller, or -1.
    int device = -1;
    std::chrono::milliseconds duration{0};
    std::function<bool()> release;
    // What the release works for: the standby is dropped, never started,
    // once it is gone.
    std::weak_ptr<const void> owner;
  };
  void onAbandon(Standby standby);

  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  struct State;
  Watchdog();
  ~Watchdog();
  // The poller asks each entry whether it finished and releases abandoned
  // work: CUDA calls, which a host thread elsewhere in the process can hold
  // up (one copying into pageable memory from a stream that waits). The
  // supervisor never calls CUDA: deadlines and peer checks hold while the
  // poller is held up (descriptions that ask the GPU are awaited a few
  // seconds, then stood in for).
  void poll();
  void supervise();
  // Under the state's mutex.
  void startThreads();

  std::unique_ptr<State> state_;
};

} // namespace mdfuser
