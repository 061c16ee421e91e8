// SPDX-License-Identifier: MIT
#pragma once

// What the Communicator's files share (runtime/communicator.cpp and
// communicator_*.cpp): its state behind the rendezvous store, the failures
// it knows of, and the record a rank posts while it is stuck on peers.

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "runtime/communicator.h"

namespace mdfuser {
namespace communicator_detail {

inline int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// "stuck/<rank>": the time the rank last said it waits, the run it waits
// in and the ranks it waits on. Fresh for this long after it was said
// (said about once a second while the wait lasts).
constexpr int64_t kStuckFreshMs = 2500;

inline std::string stuckRecord(
    const std::vector<int64_t>& peers, uint64_t run) {
  std::string record = std::to_string(nowMs()) + " " + std::to_string(run);
  for (int64_t p : peers) {
    record += " " + std::to_string(p);
  }
  return record;
}

} // namespace communicator_detail

struct Communicator::State {
  struct Entry {
    std::string key;
    c10::intrusive_ptr<c10d::Backend> backend;
    hir::CommunicatorBackend kind;
    int64_t epoch = 0;
  };

  c10::intrusive_ptr<c10d::Store> store;
  // This process serves the store: it must outlive every client's last
  // request.
  bool hosts_store = false;
  // host:port of the store, and who serves it, for messages.
  std::string store_address;
  std::string store_host;
  std::vector<Entry> backends;
  // Barriers and exchanges (per team) made so far in this epoch, and
  // recoveries ever.
  int64_t barriers = 0;
  std::map<std::string, int64_t> exchanges;
  int64_t recoveries = 0;
  bool shut_down = false;
};

// The job's failures this rank knows of (its count of them), and whether
// the watchdog released work of this rank because of one; written by the
// watchdog's thread too.
struct Communicator::Known {
  std::mutex mutex;
  int64_t failures = 0;
  bool released = false;
};

} // namespace mdfuser
