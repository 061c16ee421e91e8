// SPDX-License-Identifier: MIT
//
// The Communicator's life: joining the world's rendezvous store (started by
// rank 0 or torchrun's agent), and the shutdown that tears its backends and
// the store down. Its backends, failures and store exchanges are in
// communicator_backends.cpp, communicator_failures.cpp and
// communicator_exchanges.cpp.
#include "runtime/communicator.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "ir/errors.h"
#include "runtime/communicator_state.h"
#include "runtime/failures.h"
#include "runtime/rendezvous.h"
#include "runtime/watchdog.h"

namespace mdfuser {

namespace {

// How long the store's host serves its peers at exit after a failure.
constexpr std::chrono::milliseconds kStoreGraceAfterFailure{5000};

} // namespace

using communicator_detail::stuckRecord;

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

void Communicator::join() {
  if (size() > 1) {
    state();
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
