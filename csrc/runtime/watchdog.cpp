// SPDX-License-Identifier: MIT
#include "runtime/watchdog.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

#ifdef MDFUSER_HAS_CUDA
#include <cuda_runtime_api.h>
#endif

namespace mdfuser {

struct Watchdog::State {
  struct Watched {
    Entry entry;
    std::chrono::steady_clock::time_point start;
    std::chrono::steady_clock::time_point deadline;
  };

  std::mutex mutex;
  std::condition_variable wake;
  // Posted under `mutex`, taken over by the watchdog's thread, which polls
  // its own list without holding the lock: a thread that posts work never
  // waits for a round of polling.
  std::list<Watched> incoming;
  // Standbys of epochs not yet abandoned; those of abandoned epochs, taken
  // over by the thread like `incoming`, with the time they end.
  std::list<Standby> standby;
  std::list<std::pair<Standby, std::chrono::steady_clock::time_point>>
      releasing;
  PeerCheck peer_check;
  // Work of the epochs before this one is abandoned.
  int64_t live_epoch = 0;
  std::thread thread;
  bool stop = false;
  // The thread waits for work, with nothing to poll: only then does a
  // post wake it (otherwise its next poll, within kPollPeriod, takes the
  // post, and posting costs no wake-up at every ring step).
  bool idle = false;

  // Under `mutex`: epochs before `epoch` are abandoned; their standbys
  // start.
  void abandon(int64_t epoch) {
    live_epoch = std::max(live_epoch, epoch);
    const auto now = std::chrono::steady_clock::now();
    for (auto it = standby.begin(); it != standby.end();) {
      if (it->epoch < live_epoch) {
        const auto end = now + it->duration;
        releasing.emplace_back(std::move(*it), end);
        it = standby.erase(it);
      } else {
        ++it;
      }
    }
    if (idle && !releasing.empty()) {
      wake.notify_one();
    }
  }
};

namespace {

constexpr std::chrono::seconds kPeerCheckPeriod{1};
constexpr std::chrono::milliseconds kPollPeriod{20};

[[noreturn]] void endProcess(const std::string& what, const std::string& why) {
  std::fprintf(
      stderr,
      "[mdfuser] %s (%s); the stream cannot go on, ending the process\n",
      what.c_str(),
      why.c_str());
  std::fflush(stderr);
  std::abort();
}

} // namespace

Watchdog& Watchdog::instance() {
  static Watchdog watchdog;
  return watchdog;
}

Watchdog::Watchdog() : state_(std::make_unique<State>()) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stop = true;
    state_->wake.notify_one();
  }
  if (state_->thread.joinable()) {
    state_->thread.join();
  }
}

void Watchdog::watch(Entry entry) {
  const auto now = std::chrono::steady_clock::now();
  const auto deadline = now + entry.timeout;
  std::lock_guard<std::mutex> lock(state_->mutex);
  startThread();
  state_->incoming.push_back({std::move(entry), now, deadline});
  if (state_->idle) {
    state_->wake.notify_one();
  }
}

void Watchdog::setPeerCheck(PeerCheck check) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->peer_check = std::move(check);
}

void Watchdog::abandonBefore(int64_t epoch) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  startThread();
  state_->abandon(epoch);
}

void Watchdog::onAbandon(Standby standby) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  startThread();
  state_->standby.remove_if(
      [](const Standby& other) { return other.owner.expired(); });
  state_->standby.push_back(std::move(standby));
  state_->abandon(state_->live_epoch);
}

void Watchdog::startThread() {
  if (!state_->thread.joinable()) {
    state_->thread = std::thread([this] { loop(); });
  }
}

void Watchdog::loop() {
  State& s = *state_;
  std::list<State::Watched> watched;
  std::list<std::pair<Standby, std::chrono::steady_clock::time_point>>
      releasing;
#ifdef MDFUSER_HAS_CUDA
  int current_device = -1;
#endif
  auto makeCurrent = [&](int device) {
#ifdef MDFUSER_HAS_CUDA
    if (device >= 0 && device != current_device) {
      current_device = device;
      cudaSetDevice(current_device);
    }
#else
    (void)device;
#endif
  };
  auto last_peer_check = std::chrono::steady_clock::now();
  while (true) {
    // Taken from the state only when a round of peer checks is due.
    PeerCheck peer_check;
    int64_t live_epoch = 0;
    {
      std::unique_lock<std::mutex> lock(s.mutex);
      if (watched.empty() && releasing.empty()) {
        s.idle = true;
        s.wake.wait(lock, [&s] {
          return s.stop || !s.incoming.empty() || !s.releasing.empty();
        });
        s.idle = false;
      } else {
        s.wake.wait_for(lock, kPollPeriod, [&s] { return s.stop; });
      }
      if (s.stop) {
        return;
      }
      watched.splice(watched.end(), s.incoming);
      releasing.splice(releasing.end(), s.releasing);
      live_epoch = s.live_epoch;
      if (std::chrono::steady_clock::now() - last_peer_check >=
          kPeerCheckPeriod) {
        peer_check = s.peer_check;
      }
    }
    const auto now = std::chrono::steady_clock::now();
    const bool check_peers = static_cast<bool>(peer_check);
    if (check_peers) {
      last_peer_check = now;
    }
    for (auto it = releasing.begin(); it != releasing.end();) {
      makeCurrent(it->first.device);
      if (now > it->second || it->first.release()) {
        it = releasing.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = watched.begin(); it != watched.end();) {
      const Entry& entry = it->entry;
      makeCurrent(entry.device);
      if (entry.finished()) {
        it = watched.erase(it);
        continue;
      }
      if (entry.epoch < live_epoch && entry.release && entry.release()) {
        // Abandoned, and ended without its peers.
        it = watched.erase(it);
        continue;
      }
      if (now > it->deadline) {
        endProcess(
            entry.describe(),
            "more than " +
                std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                   entry.timeout)
                                   .count()) +
                " s");
      }
      if (check_peers && !entry.peers.empty() && entry.epoch >= live_epoch &&
          now - it->start >= kPeerCheckPeriod) {
        const PeerNews news = peer_check(entry.peers, entry.epoch, entry.run);
        if (!news.exited.empty()) {
          endProcess(entry.describe(), news.exited);
        }
        if (!news.failed.empty()) {
          // The epoch is over: its work, this entry's and the rest, is
          // released from the next poll on.
          std::fprintf(
              stderr,
              "[mdfuser] %s; %s: releasing the work of its epoch\n",
              entry.describe().c_str(),
              news.failed.c_str());
          std::fflush(stderr);
          live_epoch = std::max(live_epoch, entry.epoch + 1);
          std::lock_guard<std::mutex> lock(s.mutex);
          s.abandon(live_epoch);
        }
      }
      ++it;
    }
  }
}

} // namespace mdfuser
