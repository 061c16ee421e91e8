// SPDX-License-Identifier: MIT
#include "runtime/watchdog.h"

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
    std::chrono::steady_clock::time_point deadline;
  };

  std::mutex mutex;
  std::condition_variable wake;
  // Posted under `mutex`, taken over by the watchdog's thread, which polls
  // its own list without holding the lock: a thread that posts work never
  // waits for a round of polling.
  std::list<Watched> incoming;
  std::thread thread;
  bool stop = false;
};

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
  const auto deadline = std::chrono::steady_clock::now() + entry.timeout;
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (!state_->thread.joinable()) {
    state_->thread = std::thread([this] { loop(); });
  }
  state_->incoming.push_back({std::move(entry), deadline});
  state_->wake.notify_one();
}

void Watchdog::loop() {
  State& s = *state_;
  std::list<State::Watched> watched;
#ifdef MDFUSER_HAS_CUDA
  int current_device = -1;
#endif
  while (true) {
    {
      std::unique_lock<std::mutex> lock(s.mutex);
      if (watched.empty()) {
        s.wake.wait(lock, [&s] { return s.stop || !s.incoming.empty(); });
      } else {
        s.wake.wait_for(
            lock, std::chrono::milliseconds(20), [&s] { return s.stop; });
      }
      if (s.stop) {
        return;
      }
      watched.splice(watched.end(), s.incoming);
    }
    const auto now = std::chrono::steady_clock::now();
    for (auto it = watched.begin(); it != watched.end();) {
      const Entry& entry = it->entry;
#ifdef MDFUSER_HAS_CUDA
      if (entry.device >= 0 && entry.device != current_device) {
        current_device = entry.device;
        cudaSetDevice(current_device);
      }
#endif
      if (entry.finished()) {
        it = watched.erase(it);
        continue;
      }
      if (now > it->deadline) {
        const std::string what = entry.describe();
        std::fprintf(
            stderr,
            "[mdfuser] %s (more than %lld s); the stream cannot go on, "
            "ending the process\n",
            what.c_str(),
            static_cast<long long>(
                std::chrono::duration_cast<std::chrono::seconds>(entry.timeout)
                    .count()));
        std::fflush(stderr);
        std::abort();
      }
      ++it;
    }
  }
}

} // namespace mdfuser
