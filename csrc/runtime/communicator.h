// SPDX-License-Identifier: MIT
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <c10/util/intrusive_ptr.h>

#include "host_ir/nodes.h"

namespace c10d {
class Backend;
class Store;
} // namespace c10d

namespace mdfuser {

// A peer did not answer in time, or a collective failed. Messages name the
// rank, the operation and the time waited.
class CommunicationError : public std::runtime_error {
 public:
  CommunicationError(const std::string& message, bool timed_out)
      : std::runtime_error(message), timed_out_(timed_out) {}
  bool timedOut() const {
    return timed_out_;
  }

 private:
  bool timed_out_;
};

// Who this process is, as its launcher says: OMPI_COMM_WORLD_{RANK, SIZE,
// LOCAL_RANK, LOCAL_SIZE} under mpirun, RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE under torchrun, SLURM_PROCID, SLURM_NTASKS,
// SLURM_LOCALID under srun. Open MPI's variables win over torchrun's, and
// torchrun's over SLURM's (torchrun and mpirun may run inside an srun step,
// whose variables then describe the step, not the job's processes); Open
// MPI and torchrun variables that disagree are a user error. Without any, a
// world of one process.
struct LaunchInfo {
  int64_t rank = 0;
  int64_t size = 1;
  int64_t local_rank = 0;
  int64_t local_size = 1;
  // "mpirun", "torchrun", or empty when no launcher started this process.
  std::string launcher;
  // torchrun's agent already serves the rendezvous store; every rank is a
  // client then.
  bool agent_store = false;
  // The launcher's id of this job (Open MPI's job id, torchrun's run id,
  // SLURM's job and step ids), empty when it gives none. Keeps a job from
  // joining another's rendezvous store.
  std::string job_id;

  // User error when a variable is set but malformed or inconsistent.
  static LaunchInfo fromEnvironment();

  // "mpirun job 12 of 2 ranks": who may share a rendezvous store.
  std::string jobString() const;
};

// The first host of a SLURM node list: "node[03-05,9],gpu1" is "node03".
std::string firstHostOf(const std::string& nodelist);

struct CommunicatorOptions {
  // Rendezvous store address: MASTER_ADDR; else, under srun, the first host
  // of SLURM_STEP_NODELIST (or SLURM_JOB_NODELIST); default "localhost".
  std::string master_addr = "localhost";
  // Port of the rendezvous store mdfuser hosts on rank 0: MDFUSER_PORT,
  // else MASTER_PORT, default 29500.
  int port = 29500;
  // Port of a store the launcher hosts (torchrun's agent store):
  // MASTER_PORT, default 29500. MDFUSER_PORT cannot move that one.
  int launcher_port = 29500;
  // Bound on every wait for a peer (collectives, barriers, shutdown, and the
  // rendezvous unless rendezvous_timeout says otherwise):
  // MDFUSER_TIMEOUT_S seconds, default 300.
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
  // Bound on reaching the rendezvous store and on waiting there for every
  // rank to join: MDFUSER_RENDEZVOUS_TIMEOUT_S seconds, default the
  // timeout. Processes start further apart than they later wait for each
  // other (imports, a loaded host): a job that wants short bounds on its
  // collectives may still give its start a long one.
  std::chrono::milliseconds rendezvous_timeout = std::chrono::seconds(300);
  // Run NCCL collectives on high-priority streams, so that their blocks are
  // scheduled ahead of queued compute: MDFUSER_NCCL_HIGH_PRIORITY=1.
  bool nccl_high_priority = false;
  // Let the processes of a node share its GPUs: local rank r uses GPU r
  // modulo the GPUs there are, rather than GPU r: MDFUSER_SHARE_DEVICES=1.
  // NCCL refuses two ranks on one GPU, so only Gloo and the CUDA backend
  // communicate then; it tests the CUDA backend on a machine of one GPU.
  bool share_devices = false;

  static CommunicatorOptions fromEnvironment();
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

  // Waits until every rank of the world arrives, or fails after the timeout.
  void barrier();

  // The rendezvous store every rank has joined (created on first use), for a
  // library that runs beside mdfuser on the same processes, such as
  // torch.distributed: its keys live under mdfuser's prefix.
  c10::intrusive_ptr<c10d::Store> store();

  // Posts `value` for this rank and returns the value of every rank of
  // `team` (this rank included, in team order), through the rendezvous
  // store. Exchanges with a team are numbered, so every rank of it must make
  // the same sequence of them; `operation` names the exchange in the error
  // raised when a rank does not post within the timeout. With `post_only`,
  // this rank posts and returns nothing: it is about to raise an error, and
  // the others read it from its value.
  std::vector<std::string> exchange(
      const std::vector<int64_t>& team,
      const std::string& value,
      const std::string& operation,
      bool post_only = false);

  // Posts `error`, the last run this rank failed, where its peers look
  // when they time out waiting for it. Only once this rank has joined (the
  // store exists); never throws.
  void reportFailedRun(const std::string& error);
  // After a run that succeeded: withdraws this rank's report, if any, so
  // that later errors do not quote it.
  void clearFailedRun();
  // "; rank 1 reported a failed run: <error>" for each of `ranks` that
  // posted one, without waiting; empty when none did or the store is gone.
  std::string failedRunsOf(const std::vector<int64_t>& ranks);

  // A wait on a peer failed (a collective, the store): a peer may be gone.
  // shutdown then aborts at once instead of waiting for every rank.
  void notePeerFailure() {
    peer_failed_ = true;
  }

  // This process is about to exit on an error its program did not catch
  // (Python's excepthook): posts `error` where peers look when their waits
  // fail (reportFailedRun), and makes shutdown leave at once. Peers may be
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
  // Posts `error` at `kind`/<this rank> in the store, where peers look,
  // once this rank has joined it; false where it could not. Never throws.
  bool postForPeers(const std::string& kind, const std::string& error);
  // Throws when a rank of `ranks` exited on an error (noteExitOnError)
  // while this rank waits for it in `operation` through the store: waiting
  // on would only end at the timeout. One read of a counter while none did.
  void throwIfExited(
      const std::vector<int64_t>& ranks, const std::string& operation);

  LaunchInfo launch_;
  CommunicatorOptions options_;
  std::unique_ptr<State> state_;
  bool peer_failed_ = false;
  bool failure_reported_ = false;
};

} // namespace mdfuser
