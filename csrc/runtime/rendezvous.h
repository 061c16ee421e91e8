// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <c10/util/intrusive_ptr.h>

namespace c10d {
class Store;
struct TCPStoreOptions;
} // namespace c10d

// Reaching the rendezvous store and waiting in it: the primitives the
// communicator's joins, barriers and exchanges are made of.
namespace mdfuser {

// Pauses between polls of the store (each poll is one round trip to it).
// A peer is usually a fraction of a millisecond behind: the first 2 ms are
// polled every 20 us, so that a wait overshoots its arrival by little;
// from then on the pauses double from 50 us up to `cap`, as the wait may
// be long.
class Backoff {
 public:
  explicit Backoff(std::chrono::microseconds cap) : cap_(cap) {}
  void pause() {
    if (!slow()) {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      return;
    }
    std::this_thread::sleep_for(next_);
    next_ = std::min(next_ * 2, cap_);
  }
  // Past the quick polls: a wait worth a second look at why.
  bool slow() const {
    return std::chrono::steady_clock::now() - start_ >= kQuickPolls;
  }

 private:
  static constexpr std::chrono::milliseconds kQuickPolls{2};
  const std::chrono::steady_clock::time_point start_ =
      std::chrono::steady_clock::now();
  std::chrono::microseconds next_{50};
  std::chrono::microseconds cap_;
};

// A TCPStore, server or client, within `timeout`. Its constructor can block
// longer: in its connect retries, or without end in a read when something
// that is no store holds the port. So it runs on a thread of its own; past
// the timeout this rank gives up, and the thread, if still blocked, ends
// with the process.
c10::intrusive_ptr<c10d::Store> connectStore(
    const std::string& host,
    const c10d::TCPStoreOptions& options,
    std::chrono::milliseconds timeout);

// Polls `ready` (a look at the store) until it holds, with Backoff pauses
// of at most `cap`, and returns true; false once `timeout` passed without
// (nullopt: no bound). Once the wait is slow, `on_slow` runs after each
// pause, before the next poll; it may throw to stop waiting.
bool pollUntil(
    const std::function<bool()>& ready,
    std::optional<std::chrono::milliseconds> timeout,
    std::chrono::microseconds cap,
    const std::function<void()>& on_slow = nullptr);

// Adds this rank to `key` and waits until `count` ranks did. Returns false
// on timeout. `check`, if given, runs at each slow poll and may throw to
// stop waiting.
bool arriveAndWait(
    c10d::Store& store,
    const std::string& key,
    int64_t count,
    std::chrono::milliseconds timeout,
    int64_t& arrived,
    const std::function<void()>& check = nullptr);

// For messages: seconds as a number, an error's message without the C++
// backtrace torch appends, and "rank 1" or "ranks 1, 3".
double seconds(std::chrono::milliseconds ms);
std::string messageOf(const std::exception& e);
std::string ranksString(const std::vector<int64_t>& ranks);

} // namespace mdfuser
