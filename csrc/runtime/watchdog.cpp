// SPDX-License-Identifier: MIT
#include "runtime/watchdog.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#ifdef MDFUSER_HAS_CUDA
#include <cuda_runtime_api.h>
#endif

namespace mdfuser {

struct Watchdog::State {
  // One entry, shared by the two threads: the poller says when it is done.
  struct Watched {
    Entry entry;
    std::chrono::steady_clock::time_point start;
    std::chrono::steady_clock::time_point deadline;
    std::atomic<bool> done{false};
    // Its release started on a thread of its own (Entry::release_anywhere).
    bool released_anywhere = false;
  };
  using WatchedPtr = std::shared_ptr<Watched>;

  std::mutex mutex;
  std::condition_variable poll_wake;
  std::condition_variable supervise_wake;
  // Posted under `mutex`, taken over by each thread, which works on its own
  // list without holding the lock: a thread that posts work never waits for
  // a round of polling.
  std::list<WatchedPtr> to_poll;
  std::list<WatchedPtr> to_supervise;
  // Entries the supervisor is done with, destroyed by the poller outside
  // the lock: an entry may own CUDA resources (an event, NCCL's work) whose
  // destruction calls CUDA, which can wait as long as the stream the host
  // thread copies from (a `.cpu()` into pageable memory holds up every
  // other CUDA call of the process). The supervisor never calls CUDA, so
  // that it reads the store while such a copy waits for a failed peer.
  std::list<WatchedPtr> graveyard;
  // Standbys of epochs not yet abandoned; those of abandoned epochs, taken
  // over by the poller like `to_poll`, with the time they end.
  std::list<Standby> standby;
  std::list<std::pair<Standby, std::chrono::steady_clock::time_point>>
      releasing;
  PeerCheck peer_check;
  // Work of the epochs before this one is abandoned.
  int64_t live_epoch = 0;
  std::thread poller;
  std::thread supervisor;
  bool stop = false;
  // A thread waits for work, with nothing to look at: only then does a
  // post wake it (otherwise its next round takes the post, and posting
  // costs no wake-up at every ring step).
  bool poller_idle = false;
  bool supervisor_idle = false;

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
    if (poller_idle && !releasing.empty()) {
      poll_wake.notify_one();
    }
  }
};

namespace {

constexpr std::chrono::seconds kPeerCheckPeriod{1};
constexpr std::chrono::milliseconds kPollPeriod{20};
constexpr std::chrono::milliseconds kSupervisePeriod{100};
// How long a report waits for an entry's description, which may ask the
// GPU (a held-up CUDA call would otherwise hold up the report).
constexpr std::chrono::seconds kDescribeLimit{3};

// `describe()`, or a stand-in when it does not return within
// kDescribeLimit: it runs on a thread of its own, left behind then.
std::string describeWithin(const std::function<std::string()>& describe) {
  struct Result {
    std::mutex mutex;
    std::condition_variable ready;
    std::optional<std::string> text;
  };
  auto result = std::make_shared<Result>();
  std::thread([result, describe] {
    std::string text = describe();
    std::lock_guard<std::mutex> lock(result->mutex);
    result->text = std::move(text);
    result->ready.notify_one();
  }).detach();
  std::unique_lock<std::mutex> lock(result->mutex);
  if (result->ready.wait_for(
          lock, kDescribeLimit, [&] { return result->text.has_value(); })) {
    return *result->text;
  }
  return "work that a GPU stream waits for (its description waits on the "
         "GPU too)";
}

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
    state_->poll_wake.notify_one();
    state_->supervise_wake.notify_one();
  }
  for (std::thread* t : {&state_->poller, &state_->supervisor}) {
    if (t->joinable()) {
      t->join();
    }
  }
}

void Watchdog::watch(Entry entry) {
  auto watched = std::make_shared<State::Watched>();
  watched->start = std::chrono::steady_clock::now();
  watched->deadline = watched->start + entry.timeout;
  watched->entry = std::move(entry);
  std::lock_guard<std::mutex> lock(state_->mutex);
  startThreads();
  state_->to_poll.push_back(watched);
  state_->to_supervise.push_back(std::move(watched));
  if (state_->poller_idle) {
    state_->poll_wake.notify_one();
  }
  if (state_->supervisor_idle) {
    state_->supervise_wake.notify_one();
  }
}

void Watchdog::setPeerCheck(PeerCheck check) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->peer_check = std::move(check);
}

void Watchdog::abandonBefore(int64_t epoch) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  startThreads();
  state_->abandon(epoch);
}

void Watchdog::onAbandon(Standby standby) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  startThreads();
  state_->standby.remove_if(
      [](const Standby& other) { return other.owner.expired(); });
  state_->standby.push_back(std::move(standby));
  state_->abandon(state_->live_epoch);
}

void Watchdog::startThreads() {
  // Once the destructor has asked the threads to stop, none starts again:
  // between its joins the poller is no longer joinable while the
  // supervisor still is, and assigning a thread to a joinable one would
  // end the process.
  if (state_->stop) {
    return;
  }
  if (!state_->poller.joinable()) {
    state_->poller = std::thread([this] { poll(); });
    state_->supervisor = std::thread([this] { supervise(); });
  }
}

void Watchdog::poll() {
  State& s = *state_;
  std::list<State::WatchedPtr> watched;
  std::list<std::pair<Standby, std::chrono::steady_clock::time_point>>
      releasing;
  std::list<State::WatchedPtr> dead;
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
  while (true) {
    int64_t live_epoch = 0;
    {
      std::unique_lock<std::mutex> lock(s.mutex);
      if (watched.empty() && releasing.empty()) {
        s.poller_idle = true;
        s.poll_wake.wait(lock, [&s] {
          return s.stop || !s.to_poll.empty() || !s.releasing.empty();
        });
        s.poller_idle = false;
      } else {
        s.poll_wake.wait_for(lock, kPollPeriod, [&s] { return s.stop; });
      }
      if (s.stop) {
        return;
      }
      watched.splice(watched.end(), s.to_poll);
      releasing.splice(releasing.end(), s.releasing);
      dead.splice(dead.end(), s.graveyard);
      live_epoch = s.live_epoch;
    }
    dead.clear();
    const auto now = std::chrono::steady_clock::now();
    for (auto it = releasing.begin(); it != releasing.end();) {
      makeCurrent(it->first.device);
      if (now > it->second || it->first.release()) {
        it = releasing.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = watched.begin(); it != watched.end();) {
      const Entry& entry = (*it)->entry;
      makeCurrent(entry.device);
      if (entry.finished() ||
          (entry.epoch < live_epoch && entry.release && entry.release())) {
        // Done, or abandoned and ended without its peers.
        (*it)->done = true;
        it = watched.erase(it);
        continue;
      }
      ++it;
    }
  }
}

void Watchdog::supervise() {
  State& s = *state_;
  std::list<State::WatchedPtr> watched;
  auto last_peer_check = std::chrono::steady_clock::now();
  while (true) {
    // Taken from the state only when a round of peer checks is due.
    PeerCheck peer_check;
    int64_t live_epoch = 0;
    {
      std::unique_lock<std::mutex> lock(s.mutex);
      for (auto it = watched.begin(); it != watched.end();) {
        if ((*it)->done.load()) {
          s.graveyard.push_back(std::move(*it));
          it = watched.erase(it);
        } else {
          ++it;
        }
      }
      if (watched.empty()) {
        s.supervisor_idle = true;
        s.supervise_wake.wait(
            lock, [&s] { return s.stop || !s.to_supervise.empty(); });
        s.supervisor_idle = false;
      } else {
        s.supervise_wake.wait_for(
            lock, kSupervisePeriod, [&s] { return s.stop; });
      }
      if (s.stop) {
        s.graveyard.splice(s.graveyard.end(), watched);
        return;
      }
      watched.splice(watched.end(), s.to_supervise);
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
    for (const State::WatchedPtr& w : watched) {
      const Entry& entry = w->entry;
      if (w->done) {
        continue;
      }
      if (now > w->deadline) {
        endProcess(
            describeWithin(entry.describe),
            "more than " +
                std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                   entry.timeout)
                                   .count()) +
                " s");
      }
      if (check_peers && !entry.peers.empty() && entry.epoch >= live_epoch &&
          now - w->start >= kPeerCheckPeriod) {
        const PeerNews news = peer_check(entry.peers, entry.epoch, entry.run);
        if (!news.exited.empty()) {
          endProcess(describeWithin(entry.describe), news.exited);
        }
        if (!news.failed.empty()) {
          // The epoch is over: its work, this entry's and the rest, is
          // released from the poller's next round on.
          std::fprintf(
              stderr,
              "[mdfuser] %s; %s: releasing the work of its epoch\n",
              describeWithin(entry.describe).c_str(),
              news.failed.c_str());
          std::fflush(stderr);
          live_epoch = std::max(live_epoch, entry.epoch + 1);
          std::lock_guard<std::mutex> lock(s.mutex);
          s.abandon(live_epoch);
        }
      }
    }
    for (const State::WatchedPtr& w : watched) {
      if (!w->done && w->entry.release_anywhere && !w->released_anywhere &&
          w->entry.epoch < live_epoch) {
        w->released_anywhere = true;
        std::thread([release = w->entry.release] { (void)release(); }).detach();
      }
    }
  }
}

} // namespace mdfuser
