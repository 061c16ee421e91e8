// SPDX-License-Identifier: MIT
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace mdfuser {

// The value of environment variable `name`; unset when empty.
std::optional<std::string> env(const char* name);

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

} // namespace mdfuser
