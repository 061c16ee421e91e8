// SPDX-License-Identifier: MIT
#include "runtime/failures.h"

#include <exception>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "ir/errors.h"

namespace mdfuser {

namespace {

std::vector<uint8_t> bytesOf(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

std::string textOf(const std::vector<uint8_t>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

std::string failureKey(int64_t i) {
  return "failure/" + std::to_string(i);
}

std::string knownKey(int64_t rank) {
  return "knows/" + std::to_string(rank);
}

} // namespace

bool postExit(c10d::Store& store, int64_t rank, const std::string& error) {
  try {
    store.set("exited/" + std::to_string(rank), bytesOf(error));
    store.add("exited", 1);
    return true;
  } catch (const std::exception&) {
    // The store is gone: the peers learn of this rank by its absence.
    return false;
  }
}

int64_t postFailure(
    c10d::Store& store, int64_t rank, const std::string& error) {
  try {
    // A number first, then the record, then the count: a rank that sees the
    // count finds every record numbered below it written, or about to be.
    const int64_t i = store.add("failure_numbers", 1) - 1;
    store.set(failureKey(i), bytesOf(std::to_string(rank) + "\n" + error));
    return store.add("failures", 1);
  } catch (const std::exception&) {
    return 0;
  }
}

void postKnown(c10d::Store& store, int64_t rank, int64_t failures) {
  try {
    // Only this rank writes its key: a read, then a raise if it is one.
    if (knownBy(store, rank) < failures) {
      store.set(knownKey(rank), bytesOf(std::to_string(failures)));
    }
  } catch (const std::exception&) {
  }
}

int64_t knownBy(c10d::Store& store, int64_t rank) {
  const std::string key = knownKey(rank);
  return store.check({key}) ? std::stoll(textOf(store.get(key))) : 0;
}

std::optional<PeerFailure> exitedAmong(
    c10d::Store& store, const std::vector<int64_t>& ranks, int64_t me) {
  if (store.add("exited", 0) == 0) {
    return std::nullopt;
  }
  for (int64_t r : ranks) {
    const std::string key = "exited/" + std::to_string(r);
    if (r == me || !store.check({key})) {
      continue;
    }
    return PeerFailure{r, textOf(store.get(key))};
  }
  return std::nullopt;
}

int64_t failureCount(c10d::Store& store) {
  return store.add("failures", 0);
}

std::vector<PeerFailure> failuresSince(c10d::Store& store, int64_t first) {
  std::vector<PeerFailure> failures;
  const int64_t numbered = store.add("failure_numbers", 0);
  for (int64_t i = first; i < numbered; ++i) {
    if (!store.check({failureKey(i)})) {
      continue;
    }
    const std::string record = textOf(store.get(failureKey(i)));
    const size_t newline = record.find('\n');
    failures.push_back(
        {std::stoll(record.substr(0, newline)), record.substr(newline + 1)});
  }
  return failures;
}

std::string describeExit(const PeerFailure& exit) {
  return detail::concat(
      "rank ", exit.rank, " exited on an error: ", exit.error);
}

std::string describeFailures(const std::vector<PeerFailure>& failures) {
  std::string s;
  for (const PeerFailure& f : failures) {
    s += detail::concat(
        s.empty() ? "" : "; ", "rank ", f.rank, " failed: ", f.error);
  }
  return s;
}

} // namespace mdfuser
