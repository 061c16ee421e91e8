// SPDX-License-Identifier: MIT
//
// The Communicator's failures (doc/runtime.md#failures): the errors of waits
// on peers, the failures it reports and learns of, the epochs they end,
// the ranks stuck on peers, and the recovery of every rank together.
#include <algorithm>
#include <functional>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>

#include "ir/errors.h"
#include "runtime/communicator.h"
#include "runtime/communicator_state.h"
#include "runtime/failures.h"
#include "runtime/rendezvous.h"
#include "runtime/watchdog.h"

namespace mdfuser {

using communicator_detail::kStuckFreshMs;
using communicator_detail::nowMs;
using communicator_detail::stuckRecord;

namespace {

// The error of `rank` stopping its wait in `operation` because a member of
// `team` has exited, or nothing while none has.
std::optional<CommunicationError> peerExited(
    c10d::Store& store,
    const std::vector<int64_t>& team,
    int64_t rank,
    const std::string& operation) {
  const std::optional<PeerFailure> exit = exitedAmong(store, team, rank);
  if (!exit) {
    return std::nullopt;
  }
  return CommunicationError(
      detail::concat(
          "rank ",
          rank,
          " stopped waiting in ",
          operation,
          ": ",
          describeExit(*exit)),
      /*timed_out=*/false);
}

} // namespace

CommunicationError Communicator::lostStore(
    const std::string& operation, const std::exception& e) {
  peer_failed_ = true;
  return CommunicationError(
      detail::concat(
          "rank ",
          rank(),
          " lost the rendezvous store at ",
          state_->store_address,
          " (served by ",
          state_->store_host,
          ") in ",
          operation,
          "; ",
          state_->store_host,
          " has probably exited, see its error: ",
          messageOf(e)),
      /*timed_out=*/false);
}

void Communicator::noteExitOnError(const std::string& error) {
  peer_failed_ = true;
  if (size() == 1 || !state_->store || state_->shut_down) {
    return;
  }
  postExit(*state_->store, rank(), error);
  reportFailure(error);
}

void Communicator::reportFailure(const std::string& error) {
  if (size() == 1 || !state_->store || state_->shut_down) {
    return;
  }
  const int64_t failures = postFailure(*state_->store, rank(), error);
  {
    std::lock_guard<std::mutex> lock(known_->mutex);
    known_->failures = std::max(known_->failures, failures);
  }
  postKnown(*state_->store, rank(), failures);
  // This rank's work of the epoch is over, and its peers' waits on it are
  // released from here too, once they know (Watchdog::onAbandon): theirs
  // may be held up.
  Watchdog::instance().abandonBefore(epoch_ + 1);
}

std::function<bool(int64_t)> Communicator::knowsEndOf(int64_t epoch) const {
  if (size() == 1 || !state_->store) {
    return [](int64_t) { return false; };
  }
  return [store = state_->store, epoch](int64_t rank) {
    try {
      return knownBy(*store, rank) > epoch;
    } catch (const std::exception&) {
      return false;
    }
  };
}

void Communicator::advanceTo(int64_t epoch) {
  epoch_ = epoch;
  state_->barriers = 0;
  state_->exchanges.clear();
  // NCCL's kernels of the abandoned epochs may wait for a peer that has
  // moved on: aborting their communicators ends them.
  for (State::Entry& entry : state_->backends) {
    if (entry.epoch < epoch && entry.kind == hir::CommunicatorBackend::kNccl &&
        entry.backend) {
      try {
        entry.backend->abort();
      } catch (const std::exception&) {
      }
    }
  }
  Watchdog::instance().abandonBefore(epoch);
}

std::string Communicator::stoppedBy() {
  std::string failures;
  try {
    failures = describeFailures(failuresSince(*state_->store, epoch_));
  } catch (const std::exception&) {
    failures = "the rendezvous store is gone";
  }
  return detail::concat(
      "the communication of rank ",
      rank(),
      " is stopped by failures: ",
      failures);
}

bool Communicator::stopped() const {
  std::lock_guard<std::mutex> lock(known_->mutex);
  return known_->failures > epoch_;
}

void Communicator::throwIfStopped() {
  bool released = false;
  {
    std::lock_guard<std::mutex> lock(known_->mutex);
    if (known_->failures <= epoch_) {
      return;
    }
    released = known_->released;
  }
  throw CommunicationError(
      detail::concat(
          stoppedBy(),
          released ? "; the watchdog released this rank's waits on them, so "
                     "the outputs of its runs since then are wrong"
                   : "",
          ". Call Communicator.recover() on every rank to communicate "
          "again"),
      CommunicationError::Cause::kPeerFailed);
}

void Communicator::throwIfPeerFailed(
    const std::vector<int64_t>& team, const std::string& operation) {
  int64_t failures = 0;
  try {
    if (std::optional<CommunicationError> error =
            peerExited(*state().store, team, rank(), operation)) {
      peer_failed_ = true;
      throw *error;
    }
    failures = failureCount(*state_->store);
  } catch (const CommunicationError&) {
    throw;
  } catch (const std::exception& e) {
    throw lostStore(operation, e);
  }
  if (failures <= epoch_) {
    return;
  }
  {
    std::lock_guard<std::mutex> lock(known_->mutex);
    known_->failures = std::max(known_->failures, failures);
  }
  std::string failed;
  try {
    failed = describeFailures(failuresSince(*state_->store, epoch_));
  } catch (const std::exception& e) {
    throw lostStore(operation, e);
  }
  throw CommunicationError(
      detail::concat(
          "rank ", rank(), " stopped waiting in ", operation, ": ", failed),
      CommunicationError::Cause::kPeerFailed);
}

void Communicator::noteStuck(const std::vector<int64_t>& peers, uint64_t run) {
  if (size() == 1 || !state_->store || state_->shut_down) {
    return;
  }
  const std::string record = stuckRecord(peers, run);
  try {
    state_->store->set(
        "stuck/" + std::to_string(rank()),
        std::vector<uint8_t>(record.begin(), record.end()));
  } catch (const std::exception&) {
  }
}

void Communicator::clearStuck() {
  if (size() == 1 || !state_->store || state_->shut_down) {
    return;
  }
  try {
    state_->store->deleteKey("stuck/" + std::to_string(rank()));
  } catch (const std::exception&) {
  }
}

bool Communicator::isStuckOnMe(int64_t other, uint64_t run) {
  const std::string key = "stuck/" + std::to_string(other);
  try {
    if (!state().store->check({key})) {
      return false;
    }
    const std::vector<uint8_t> bytes = state_->store->get(key);
    std::istringstream record(std::string(bytes.begin(), bytes.end()));
    int64_t stamp = 0;
    uint64_t stuck_run = 0;
    record >> stamp >> stuck_run;
    if (nowMs() - stamp > kStuckFreshMs || stuck_run != run) {
      return false;
    }
    int64_t peer = 0;
    while (record >> peer) {
      if (peer == rank()) {
        return true;
      }
    }
  } catch (const std::exception&) {
  }
  return false;
}

void Communicator::recover() {
  if (size() == 1) {
    return;
  }
  State& s = state();
  const int64_t n = s.recoveries++;
  const std::string operation = detail::concat("recovery ", n);
  const std::string key = detail::concat("recover/", n);
  int64_t arrived = 0;
  int64_t epoch = 0;
  try {
    const bool everyone =
        arriveAndWait(*s.store, key, size(), options_.timeout, arrived, [&] {
          if (std::optional<CommunicationError> error =
                  peerExited(*s.store, world(), rank(), operation)) {
            peer_failed_ = true;
            throw *error;
          }
        });
    if (!everyone) {
      throw peersAbsent(
          operation,
          detail::concat("only ", arrived, " of ", size(), " ranks arrived"));
    }
    // Rank 0 names the epoch: the failures posted when every rank had
    // arrived, before any could post another.
    const std::string epoch_key = key + "/epoch";
    if (rank() == 0) {
      const std::string count = std::to_string(failureCount(*s.store));
      s.store->set(epoch_key, std::vector<uint8_t>(count.begin(), count.end()));
    }
    if (!pollUntil(
            [&] { return s.store->check({epoch_key}); },
            options_.timeout,
            std::chrono::milliseconds(20))) {
      throw peersAbsent(operation, "rank 0 did not name the epoch");
    }
    const std::vector<uint8_t> bytes = s.store->get(epoch_key);
    epoch = std::stoll(std::string(bytes.begin(), bytes.end()));
  } catch (const CommunicationError&) {
    throw;
  } catch (const std::exception& e) {
    throw lostStore(operation, e);
  }
  if (epoch != epoch_) {
    advanceTo(epoch);
  }
  std::lock_guard<std::mutex> lock(known_->mutex);
  known_->failures = epoch;
  known_->released = false;
}

CommunicationError Communicator::peersAbsent(
    const std::string& operation, const std::string& absent) {
  peer_failed_ = true;
  return CommunicationError(
      detail::concat(
          "rank ",
          rank(),
          " waited ",
          seconds(options_.timeout),
          " s in ",
          operation,
          ", but ",
          absent),
      /*timed_out=*/true);
}

} // namespace mdfuser
