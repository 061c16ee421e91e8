// SPDX-License-Identifier: MIT
#include "runtime/communicator.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <sstream>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "ir/errors.h"
#include "runtime/failures.h"
#include "runtime/rendezvous.h"
#include "runtime/watchdog.h"

namespace mdfuser {

namespace {

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// "stuck/<rank>": the time the rank last said it waits, the run it waits
// in and the ranks it waits on. Fresh for this long after it was said
// (said about once a second while the wait lasts).
constexpr int64_t kStuckFreshMs = 2500;
// How long the store's host serves its peers at exit after a failure.
constexpr std::chrono::milliseconds kStoreGraceAfterFailure{5000};

std::string stuckRecord(const std::vector<int64_t>& peers, uint64_t run) {
  std::string record = std::to_string(nowMs()) + " " + std::to_string(run);
  for (int64_t p : peers) {
    record += " " + std::to_string(p);
  }
  return record;
}

} // namespace

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

Communicator::Communicator(LaunchInfo launch, CommunicatorOptions options)
    : launch_(std::move(launch)),
      options_(std::move(options)),
      state_(std::make_unique<State>()),
      known_(std::make_shared<Known>()) {}

Communicator::~Communicator() {
  try {
    shutdown();
  } catch (...) {
    // Destructors must not throw; shutdown already bounds every wait.
  }
}

Communicator::State& Communicator::state() {
  MDF_USER_CHECK(
      !state_->shut_down,
      "the communicator of rank ",
      rank(),
      " has been shut down");
  if (state_->store) {
    return *state_;
  }
  // Under torchrun every rank joins the agent's store; otherwise rank 0
  // hosts one.
  const bool server = rank() == 0 && !launch_.agent_store;
  const int port = launch_.agent_store ? options_.launcher_port : options_.port;
  const std::string where = options_.master_addr + ":" + std::to_string(port);
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(port);
  store_options.isServer = server;
  store_options.waitWorkers = false;
  store_options.timeout = options_.timeout;
  c10::intrusive_ptr<c10d::Store> tcp;
  try {
    tcp = connectStore(
        options_.master_addr, store_options, options_.rendezvous_timeout);
  } catch (const std::exception& e) {
    throw CommunicationError(
        detail::concat(
            "rank ",
            rank(),
            " of a world of ",
            size(),
            " could not ",
            server ? "start" : "reach",
            " the rendezvous store at ",
            where,
            " within ",
            seconds(options_.rendezvous_timeout),
            " s",
            server ? " (is the port in use? set MDFUSER_PORT or MASTER_PORT)"
                   : " (is rank 0 running? set MASTER_ADDR and MASTER_PORT "
                     "to its address)",
            ": ",
            messageOf(e)),
        /*timed_out=*/!server);
  }
  if (!launch_.agent_store) {
    checkSameJob(*tcp, server, where);
  }
  const std::string run = env("TORCHELASTIC_RESTART_COUNT").value_or("0");
  auto store = c10::make_intrusive<c10d::PrefixStore>("mdfuser/" + run, tcp);
  int64_t joined = 0;
  if (!arriveAndWait(
          *store, "joined", size(), options_.rendezvous_timeout, joined)) {
    throw CommunicationError(
        detail::concat(
            "only ",
            joined,
            " of ",
            size(),
            " ranks joined the rendezvous at ",
            where,
            " within ",
            seconds(options_.rendezvous_timeout),
            " s (this is rank ",
            rank(),
            "); start all ",
            size(),
            " ranks, e.g. mpirun -np ",
            size(),
            " or torchrun --nproc-per-node ",
            size()),
        /*timed_out=*/true);
  }
  state_->store = store;
  // Work a GPU stream waits for ends the process when a peer it waits for
  // exits on an error, not at the deadline, and is released when a rank
  // fails in its epoch (the watchdog's thread reads the store; TCPStore
  // serializes its clients' requests).
  Watchdog::instance().setPeerCheck([store, me = rank(), known = known_](
                                        const std::vector<int64_t>& ranks,
                                        int64_t epoch,
                                        uint64_t waiting_run) {
    Watchdog::PeerNews news;
    try {
      if (std::optional<PeerFailure> exit = exitedAmong(*store, ranks, me)) {
        news.exited = describeExit(*exit);
        return news;
      }
      // Stuck for a second: said, for a rank that waits for this one
      // to read its error (Communicator::isStuckOnMe); it ages out.
      const std::string record = stuckRecord(ranks, waiting_run);
      store->set(
          "stuck/" + std::to_string(me),
          std::vector<uint8_t>(record.begin(), record.end()));
      const int64_t failures = failureCount(*store);
      if (failures <= epoch) {
        return news;
      }
      news.failed = describeFailures(failuresSince(*store, epoch));
      {
        std::lock_guard<std::mutex> lock(known->mutex);
        known->failures = std::max(known->failures, failures);
        known->released = true;
      }
      // This rank's next run raises them: peers may release its waits.
      postKnown(*store, me, failures);
    } catch (const std::exception&) {
    }
    return news;
  });
  state_->hosts_store = server;
  state_->store_address = where;
  state_->store_host = launch_.agent_store ? "torchrun's agent" : "rank 0";
  return *state_;
}

void Communicator::checkSameJob(
    c10d::Store& store, bool server, const std::string& where) {
  // The store's host names its job; a rank of another job that reached
  // this port learns it at once instead of joining.
  const std::string key = "mdfuser/job";
  const std::string job = launch_.jobString();
  try {
    if (server) {
      store.set(key, std::vector<uint8_t>(job.begin(), job.end()));
      return;
    }
    if (!pollUntil(
            [&] { return store.check({key}); },
            options_.rendezvous_timeout,
            std::chrono::milliseconds(50))) {
      // Not an mdfuser store: the rendezvous wait reports it.
      return;
    }
    const std::vector<uint8_t> theirs = store.get(key);
    const std::string served(theirs.begin(), theirs.end());
    if (served != job) {
      throw CommunicationError(
          detail::concat(
              "rank ",
              rank(),
              " (",
              job,
              ") reached the rendezvous store at ",
              where,
              ", but it serves another job (",
              served,
              "): another job is running on this port. Give this job a "
              "free port with MDFUSER_PORT (or MASTER_PORT)"),
          /*timed_out=*/false);
    }
  } catch (const CommunicationError&) {
    throw;
  } catch (const std::exception& e) {
    throw CommunicationError(
        detail::concat(
            "rank ",
            rank(),
            " lost the rendezvous store at ",
            where,
            " while joining: ",
            messageOf(e)),
        /*timed_out=*/false);
  }
}

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
    if (std::optional<PeerFailure> exit =
            exitedAmong(*state().store, team, rank())) {
      peer_failed_ = true;
      throw CommunicationError(
          detail::concat(
              "rank ",
              rank(),
              " stopped waiting in ",
              operation,
              ": ",
              describeExit(*exit)),
          /*timed_out=*/false);
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
          if (std::optional<PeerFailure> exit =
                  exitedAmong(*s.store, world(), rank())) {
            peer_failed_ = true;
            throw CommunicationError(
                detail::concat(
                    "rank ",
                    rank(),
                    " stopped waiting in ",
                    operation,
                    ": ",
                    describeExit(*exit)),
                /*timed_out=*/false);
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

c10d::Backend& Communicator::backend(
    const std::vector<int64_t>& team, hir::CommunicatorBackend kind) {
  auto me = std::find(team.begin(), team.end(), rank());
  MDF_CHECK(
      me != team.end(),
      "rank ",
      rank(),
      " is not in the team ",
      hir::teamString(team));
  // Each epoch has backends of its own (and store keys of its own to make
  // them with): work a failed run left in an earlier epoch's never meets
  // this one's.
  const std::string key = detail::concat(
      hir::backendName(kind),
      hir::teamString(team),
      epoch_ == 0 ? "" : "#" + std::to_string(epoch_));
  State& s = state();
  for (const State::Entry& entry : s.backends) {
    if (entry.key == key) {
      return *entry.backend;
    }
  }

  auto store = c10::make_intrusive<c10d::PrefixStore>(key, s.store);
  const int team_rank = static_cast<int>(me - team.begin());
  const int team_size = static_cast<int>(team.size());
  c10::intrusive_ptr<c10d::Backend> backend;
  try {
    switch (kind) {
      case hir::CommunicatorBackend::kGloo: {
#ifdef USE_C10D_GLOO
        auto gloo_options =
            c10d::ProcessGroupGloo::Options::create(options_.timeout);
        const std::string& addr = options_.master_addr;
        if (std::optional<std::string> ifname = env("GLOO_SOCKET_IFNAME")) {
          gloo_options->devices.push_back(
              c10d::ProcessGroupGloo::createDeviceForInterface(*ifname));
        } else if (addr == "localhost" || addr == "127.0.0.1") {
          gloo_options->devices.push_back(
              c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
        } else {
          gloo_options->devices.push_back(
              c10d::ProcessGroupGloo::createDefaultDevice());
        }
        backend = c10::make_intrusive<c10d::ProcessGroupGloo>(
            store, team_rank, team_size, gloo_options);
#else
        MDF_USER_ERROR("this PyTorch build has no Gloo backend");
#endif
        break;
      }
      case hir::CommunicatorBackend::kNccl: {
#ifdef USE_C10D_NCCL
        auto nccl_options = c10d::ProcessGroupNCCL::Options::create(
            options_.nccl_high_priority);
        // mdfuser's watchdog reports a collective that does not finish
        // within the timeout, naming the rank, the operation and the team
        // (runtime/watchdog.h); c10d's, whose message names neither, waits
        // longer.
        nccl_options->timeout = options_.timeout + std::chrono::seconds(10);
        nccl_options->group_name = key;
        nccl_options->group_desc =
            detail::concat("mdfuser team ", hir::teamString(team));
        backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(
            store, team_rank, team_size, nccl_options);
#else
        MDF_USER_ERROR("this PyTorch build has no NCCL backend");
#endif
        break;
      }
      case hir::CommunicatorBackend::kCuda:
        MDF_UNREACHABLE(
            "the CUDA backend is no c10d backend: the evaluator posts its "
            "moves through runtime/cuda_backend.h");
    }
  } catch (const UserError&) {
    throw;
  } catch (const std::exception& e) {
    peer_failed_ = true;
    throw CommunicationError(
        detail::concat(
            "rank ",
            rank(),
            " could not create the ",
            hir::backendName(kind),
            " backend for team ",
            hir::teamString(team),
            " within ",
            seconds(options_.timeout),
            " s: ",
            messageOf(e)),
        /*timed_out=*/false);
  }
  s.backends.push_back({key, backend, kind, epoch_});
  return *backend;
}

void Communicator::join() {
  if (size() > 1) {
    state();
  }
}

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

std::vector<int64_t> Communicator::world() const {
  std::vector<int64_t> ranks(size());
  std::iota(ranks.begin(), ranks.end(), 0);
  return ranks;
}

c10::intrusive_ptr<c10d::Store> Communicator::store() {
  return state().store;
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

void Communicator::shutdown() {
  if (state_->shut_down) {
    return;
  }
  state_->shut_down = true;
  Watchdog::instance().setPeerCheck(nullptr);
  bool everyone_arrived = true;
  if (state_->store && peer_failed_) {
    // A peer may be gone: waiting for it would only add a timeout. The
    // others are told this rank is done, and the backends are aborted.
    everyone_arrived = false;
    try {
      if (state_->hosts_store) {
        // The peers still waiting learn of the failure from this rank's
        // store within a second or so: it serves them a few seconds more
        // (a peer that is gone costs that grace once), so that their
        // errors name the failure rather than a lost store.
        int64_t arrived = 0;
        arriveAndWait(
            *state_->store,
            "shutdown",
            size(),
            std::min(options_.timeout, kStoreGraceAfterFailure),
            arrived);
      } else {
        state_->store->add("shutdown", 1);
      }
    } catch (const std::exception&) {
      // The store is gone too.
    }
  } else if (state_->store) {
    try {
      int64_t arrived = 0;
      everyone_arrived = arriveAndWait(
          *state_->store, "shutdown", size(), options_.timeout, arrived);
    } catch (const std::exception&) {
      everyone_arrived = false;
    }
  }
  // Every rank created its backends in the same order; tear them down in
  // that order. A rank that never arrived may hold a collective open, so
  // backends are aborted rather than shut down gracefully then.
  for (State::Entry& entry : state_->backends) {
    const bool abandoned = entry.epoch < epoch_;
    try {
      if (everyone_arrived && !abandoned) {
        entry.backend->shutdown();
      } else {
        entry.backend->abort();
      }
    } catch (const std::exception&) {
      // Best effort: the process is going away.
    }
    if (abandoned) {
      // A backend of an abandoned epoch may have a thread waiting in a
      // collective its peers left (Gloo's waits end only at their
      // timeout), which its destructor would join: it is left to the
      // process's exit.
      (void)entry.backend.release();
    }
  }
  state_->backends.clear();
  if (state_->store && everyone_arrived) {
    // Clients say they are done with the store; its host waits for them,
    // so that no client's last request meets a closed socket.
    try {
      if (state_->hosts_store) {
        int64_t released = 0;
        arriveAndWait(
            *state_->store, "released", size(), options_.timeout, released);
      } else {
        state_->store->add("released", 1);
      }
    } catch (const std::exception&) {
      // A peer is gone; nothing is left to protect.
    }
  }
  state_->store.reset();
}

} // namespace mdfuser
