// SPDX-License-Identifier: MIT
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <c10/util/intrusive_ptr.h>

#include "host_ir/communication.h"
#include "runtime/launch.h"

namespace c10d {
class Backend;
class Store;
} // namespace c10d

namespace mdfuser {

// A peer did not answer in time, failed, or a collective failed. Messages
// name the rank, the operation and the time waited or the peer's error.
class CommunicationError : public std::runtime_error {
 public:
  enum class Cause {
    // A peer did not answer within the timeout.
    kTimeout,
    // A rank failed (it reported that failure itself): this rank's
    // communication stops until the ranks recover (Communicator::recover).
    kPeerFailed,
    // Anything else: a backend's error, a lost store, a peer that exited.
    kOther,
  };
  CommunicationError(const std::string& message, Cause cause)
      : std::runtime_error(message), cause_(cause) {}
  CommunicationError(const std::string& message, bool timed_out)
      : CommunicationError(
            message, timed_out ? Cause::kTimeout : Cause::kOther) {}
  bool timedOut() const {
    return cause_ == Cause::kTimeout;
  }
  Cause cause() const {
    return cause_;
  }

 private:
  Cause cause_;
};

// The processes of one job and the collective backends among them. The
// rendezvous store and each backend are created on first use; a team's
// backend is cached per (team, kind).
class Communicator {
 public:
  Communicator(LaunchInfo launch, CommunicatorOptions options);
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  ~Communicator();

  int64_t rank() const {
    return launch_.rank;
  }
  int64_t size() const {
    return launch_.size;
  }
  int64_t localRank() const {
    return launch_.local_rank;
  }
  int64_t localSize() const {
    return launch_.local_size;
  }
  bool isLaunched() const {
    return !launch_.launcher.empty();
  }
  // The GPU this rank's CUDA tensors live on, of the `gpus` its node has:
  // its local rank's, or that modulo the GPUs when processes share them
  // (CommunicatorOptions::share_devices).
  int64_t localGpu(int64_t gpus) const {
    return options_.share_devices && gpus > 0 ? localRank() % gpus
                                              : localRank();
  }
  const CommunicatorOptions& options() const {
    return options_;
  }

  // The backend running collectives among `team` (ranks, in rank order; this
  // rank must be one of them).
  c10d::Backend& backend(
      const std::vector<int64_t>& team, hir::CommunicatorBackend kind);

  // Every rank of the job, in rank order.
  std::vector<int64_t> world() const;

  // Joins the world's rendezvous, once: connects to the store, or starts it
  // on rank 0, and waits until every rank of the world did. Every rank of a
  // job that runs a fusion with a mesh joins, also those outside its mesh:
  // rank 0 serves the store, and the others' first wait counts every rank.
  void join();

  // Waits until every rank of the world arrives, or fails after the timeout
  // or when a rank fails meanwhile.
  void barrier();

  // The rendezvous store every rank has joined (created on first use), for a
  // library that runs beside mdfuser on the same processes, such as
  // torch.distributed: its keys live under mdfuser's prefix.
  c10::intrusive_ptr<c10d::Store> store();

  // Posts `value` for this rank and returns the value of every rank of
  // `team` (this rank included, in team order), through the rendezvous
  // store. Exchanges with a team are numbered, so every rank of it must make
  // the same sequence of them; `operation` names the exchange in the error
  // raised when a rank does not post within the timeout. With `patience`,
  // this rank is about to raise an error (its value, which the others read
  // from it) in run `run`: it waits that long at most, less once a member
  // that has not posted says it is stuck on this rank in that run (it runs
  // it without comparing; isStuckOnMe), and returns nothing when the
  // exchange did not complete.
  std::optional<std::vector<std::string>> exchange(
      const std::vector<int64_t>& team,
      const std::string& value,
      const std::string& operation,
      std::optional<std::chrono::milliseconds> patience = std::nullopt,
      uint64_t run = 0);

  // A value one rank computes for the whole job (the machine model): the
  // first rank to claim `key` gets true, computes it and publishes it; the
  // others read it, waiting for it up to the timeout (then a TimeoutError
  // naming this rank and `operation`).
  // Without peers, claims always succeed and nothing is stored.
  bool claimOnce(const std::string& key);
  void publish(const std::string& key, const std::string& value);
  std::string awaitPublished(
      const std::string& key, const std::string& operation);

  // ---- Failures and recovery (doc/runtime.md#failures) ----
  //
  // A failure on one rank (an error that escaped a run on it alone, or one
  // its program reports) may leave its peers waiting for it in a
  // collective, and their next communication would meet what it left in
  // flight. So a failure stops the communication of every rank: each wait
  // on a peer that does not end at once sees it and raises it, naming the
  // rank and its error, and every run raises it before it communicates,
  // until the ranks recover together.

  // The communication epoch: the number of the job's failures this rank
  // has recovered from. Every backend, exchange, barrier and symmetric
  // buffer belongs to one.
  int64_t epoch() const {
    return epoch_;
  }

  // This rank failed while its peers may be communicating with it: posts
  // `error` where their waits look, and abandons this rank's work of the
  // epoch (Watchdog::abandonBefore), which releases the GPU waits of its
  // teams. Only once this rank has joined; never throws.
  void reportFailure(const std::string& error);

  // Whether a rank knows that `epoch` ended in a failure (its next run
  // raises it): a predicate any thread may call, one read of the store a
  // call. A GPU wait of a rank that does not know is never released from
  // outside it (CudaBackend::releaser).
  std::function<bool(int64_t rank)> knowsEndOf(int64_t epoch) const;

  // Whether this rank knows of failures it has not recovered from. No read
  // of the store.
  bool stopped() const;
  // Raises the CommunicationError of those failures (cause kPeerFailed):
  // before a run communicates.
  void throwIfStopped();

  // A wait of this rank in `operation` cannot end when a rank of `team`
  // exited on an error (noteExitOnError), or any rank failed since this
  // rank's epoch: then throws the CommunicationError naming it (cause
  // kPeerFailed for a failure). Two reads of the store while neither
  // happened.
  void throwIfPeerFailed(
      const std::vector<int64_t>& team, const std::string& operation);

  // While this rank waits on `peers` for long (a collective stuck for a
  // second or more), it says so, about once a second, and withdraws it when
  // the wait ends (clearStuck): a rank whose run failed alone, and who
  // waits for its peers to read its error, then knows they will not (they
  // run a collective that waits for it instead). Never throws.
  // `run` is the token of the run the wait belongs to (FusionExecutorCache).
  void noteStuck(const std::vector<int64_t>& peers, uint64_t run);
  void clearStuck();
  // Whether `rank` says it is stuck waiting on this rank in run `run`.
  bool isStuckOnMe(int64_t rank, uint64_t run);

  // Every rank of the world, together, after failures: waits until all
  // have arrived (bounded by the timeout), then every rank goes on in the
  // epoch of all failures posted so far, with backends, exchanges and
  // symmetric buffers of its own: communication works again, and nothing a
  // failed run left in flight meets it. Without failures it is a barrier.
  void recover();

  // A wait on a peer failed (a collective, the store): a peer may be gone.
  // shutdown then aborts at once instead of waiting for every rank.
  void notePeerFailure() {
    peer_failed_ = true;
  }

  // This process is about to exit on an error its program did not catch
  // (Python's excepthook): posts `error` where peers look when their waits
  // fail, and makes shutdown leave at once. Peers may be
  // waiting for this rank in a collective; a graceful shutdown would wait
  // for them in turn until the timeout, and keep the launcher from ending
  // the job. Never throws.
  void noteExitOnError(const std::string& error);

  // Tears down backends (in creation order, as on every rank) and the store.
  // Gracefully when every rank arrives in time, by aborting otherwise, at
  // once after a peer failure; never hangs. Idempotent.
  void shutdown();

 private:
  struct State;
  State& state();
  // Refuses a store served by another job (LaunchInfo::jobString).
  void checkSameJob(c10d::Store& store, bool server, const std::string& where);
  // The error for a store that stopped answering in `operation`.
  CommunicationError lostStore(
      const std::string& operation, const std::exception& e);
  // The error for peers that did not reach `operation` within the timeout:
  // "rank r waited t s in <operation>, but <absent>".
  CommunicationError peersAbsent(
      const std::string& operation, const std::string& absent);
  // Moves this rank to `epoch`: the communication of the epochs before is
  // abandoned (NCCL's communicators aborted, the watchdog's work released).
  void advanceTo(int64_t epoch);
  // "the communication of rank 0 is stopped by failures: rank 1 failed:
  // ...", for the failures since this rank's epoch.
  std::string stoppedBy();

  LaunchInfo launch_;
  CommunicatorOptions options_;
  std::unique_ptr<State> state_;
  bool peer_failed_ = false;
  int64_t epoch_ = 0;
  // The failures this rank knows of, shared with the watchdog's thread.
  struct Known;
  std::shared_ptr<Known> known_;
};

} // namespace mdfuser
