// SPDX-License-Identifier: MIT
//
// The Communicator's meetings through the rendezvous store: the world's
// barrier, a team's exchanges of values, and values one rank computes and
// publishes for the whole job.
#include <algorithm>
#include <optional>

#include "ir/errors.h"
#include "runtime/communicator.h"
#include "runtime/communicator_state.h"
#include "runtime/rendezvous.h"

namespace mdfuser {

void Communicator::barrier() {
  if (size() == 1) {
    return;
  }
  State& s = state();
  {
    const int64_t n = s.barriers++;
    const std::string operation = detail::concat("barrier ", n);
    const std::string key = detail::concat("barrier/", epoch_, "/", n);
    int64_t arrived = 0;
    bool everyone = false;
    try {
      everyone =
          arriveAndWait(*s.store, key, size(), options_.timeout, arrived, [&] {
            throwIfPeerFailed(world(), operation);
          });
    } catch (const CommunicationError&) {
      throw;
    } catch (const std::exception& e) {
      throw lostStore(operation, e);
    }
    if (!everyone) {
      throw peersAbsent(
          operation,
          detail::concat("only ", arrived, " of ", size(), " ranks arrived"));
    }
  }
}

std::optional<std::vector<std::string>> Communicator::exchange(
    const std::vector<int64_t>& team,
    const std::string& value,
    const std::string& operation,
    std::optional<std::chrono::milliseconds> patience,
    uint64_t run) {
  MDF_CHECK(
      std::find(team.begin(), team.end(), rank()) != team.end(),
      "rank ",
      rank(),
      " is not in the team ",
      hir::teamString(team));
  State& s = state();
  const std::string team_name = hir::teamString(team);
  const int64_t number = s.exchanges[team_name]++;
  const int64_t epoch = epoch_;
  auto prefixOf = [&](int64_t n) {
    return detail::concat("exchange/", epoch, team_name, "/", n, "/");
  };
  const std::string prefix = prefixOf(number);
  std::vector<std::string> keys;
  for (int64_t r : team) {
    keys.push_back(prefix + std::to_string(r));
  }
  // The exchange as errors name it.
  const std::string what = detail::concat(operation, " with team ", team_name);
  auto lost_store = [&](const std::exception& e) { return lostStore(what, e); };
  try {
    s.store->set(
        prefix + std::to_string(rank()),
        std::vector<uint8_t>(value.begin(), value.end()));
  } catch (const std::exception& e) {
    throw lost_store(e);
  }
  // Polled rather than waited for in the store, which logs its own
  // timeouts.
  const auto deadline =
      std::chrono::steady_clock::now() + patience.value_or(options_.timeout);
  Backoff backoff(std::chrono::milliseconds(20));
  bool complete = false;
  // With patience: whether a member that has not posted says it is stuck
  // in a collective, which it runs instead of this exchange.
  auto absent_member_is_stuck = [&] {
    for (size_t i = 0; i < team.size(); ++i) {
      if (team[i] != rank() && !s.store->check({keys[i]}) &&
          isStuckOnMe(team[i], run)) {
        return true;
      }
    }
    return false;
  };
  try {
    while (!(complete = s.store->check(keys)) &&
           std::chrono::steady_clock::now() < deadline) {
      backoff.pause();
      if (!backoff.slow()) {
        continue;
      }
      if (patience.has_value() && absent_member_is_stuck()) {
        return std::nullopt;
      }
      try {
        throwIfPeerFailed(team, what);
      } catch (const CommunicationError& e) {
        // A rank whose run fails alone posts its error first, which every
        // member then reads: the exchange is complete.
        if (e.cause() != CommunicationError::Cause::kPeerFailed ||
            !(complete = s.store->check(keys))) {
          if (patience.has_value()) {
            return std::nullopt;
          }
          throw;
        }
        break;
      }
    }
  } catch (const CommunicationError&) {
    throw;
  } catch (const std::exception& e) {
    throw lost_store(e);
  }
  if (!complete && patience.has_value()) {
    return std::nullopt;
  }
  if (!complete) {
    std::vector<int64_t> missing;
    try {
      for (size_t i = 0; i < team.size(); ++i) {
        if (!s.store->check({keys[i]})) {
          missing.push_back(team[i]);
        }
      }
    } catch (const std::exception& e) {
      throw lost_store(e);
    }
    throw peersAbsent(what, ranksString(missing) + " did not take part");
  }
  std::vector<std::string> values;
  try {
    for (const std::vector<uint8_t>& bytes : s.store->multiGet(keys)) {
      values.emplace_back(bytes.begin(), bytes.end());
    }
    // Every member posted this exchange, so every member has read the
    // previous one: this rank's value there is no longer needed. Without
    // this, a workload that alternates signatures would grow the store by a
    // key per rank at every run.
    if (number > 0) {
      s.store->deleteKey(prefixOf(number - 1) + std::to_string(rank()));
    }
  } catch (const std::exception& e) {
    throw lost_store(e);
  }
  return values;
}

bool Communicator::claimOnce(const std::string& key) {
  if (size() == 1) {
    return true;
  }
  const std::string what = "claiming " + key;
  try {
    return state().store->add("once/" + key + "/claim", 1) == 1;
  } catch (const std::exception& e) {
    throw lostStore(what, e);
  }
}

void Communicator::publish(const std::string& key, const std::string& value) {
  if (size() == 1) {
    return;
  }
  try {
    state().store->set(
        "once/" + key, std::vector<uint8_t>(value.begin(), value.end()));
  } catch (const std::exception& e) {
    throw lostStore("publishing " + key, e);
  }
}

std::string Communicator::awaitPublished(
    const std::string& key, const std::string& operation) {
  MDF_CHECK(size() > 1, "nothing is published without peers");
  State& s = state();
  const std::string full = "once/" + key;
  try {
    const bool published = pollUntil(
        [&] { return s.store->check({full}); },
        options_.timeout,
        std::chrono::milliseconds(20),
        [&] {
          // A failure posted anywhere (the measuring rank's among them)
          // ends the wait; but a rank may publish and then fail, and what
          // it published stands: the key is looked at again after the
          // failure was seen, as it may have been published in between.
          try {
            throwIfPeerFailed(std::vector<int64_t>{rank()}, operation);
          } catch (const CommunicationError&) {
            if (!s.store->check({full})) {
              throw;
            }
          }
        });
    if (!published) {
      throw peersAbsent(
          operation, "the rank that measures it did not publish it");
    }
    const std::vector<uint8_t> bytes = s.store->get(full);
    return std::string(bytes.begin(), bytes.end());
  } catch (const CommunicationError&) {
    throw;
  } catch (const std::exception& e) {
    throw lostStore(operation, e);
  }
}

} // namespace mdfuser
