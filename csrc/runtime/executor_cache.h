// SPDX-License-Identifier: MIT
#pragma once

#include <map>
#include <memory>
#include <ostream>
#include <vector>

#include <ATen/core/Tensor.h>

#include "host_ir/host_ir_container.h"
#include "ir/errors.h"
#include "ir/fusion.h"
#include "runtime/cuda_graphs.h"
#include "runtime/options.h"

namespace mdfuser {

class Communicator;
class CudaBackend;
class HostIrEvaluator;

// Compiles a fusion definition into host programs, one per input signature
// (sizes, strides, dtypes, device) and set of options, and runs them. Compiling
// clones the definition, runs the fusion passes, lowers to host IR and runs the
// host passes; the definition itself is frozen and never changes.
class FusionExecutorCache {
 public:
  // `definition` must outlive the cache.
  explicit FusionExecutorCache(Fusion& definition);
  ~FusionExecutorCache();

  // Runs the fusion on this rank's local shards and the values of its
  // scalar inputs (in the order defined), and returns its local output
  // shards. Every user error is raised before any communication.
  std::vector<at::Tensor> run(
      const std::vector<at::Tensor>& inputs,
      Communicator& communicator,
      const DumpOptions& dump = {},
      const ExecuteOptions& options = {},
      const std::vector<Literal::Value>& scalars = {});

  // After a run that failed on this rank, perhaps on this rank only (its
  // peers may be inside that run's collectives): the next run compares
  // with the others first, so that it cannot pair its collectives with the
  // failed run's. run() notes its own failures.
  void noteFailedRun() {
    agreed_.clear();
  }

  // A run failed on this rank with `error` before it reached run() (the
  // Python layer's checks of execute's arguments): the ranks that compare
  // read it and raise it too; if some do not (they run a collective that
  // waits for this rank), this rank's failure is reported to them.
  void failBeforeRun(Communicator& communicator, const UserError& error);

  int64_t numPrograms() const {
    return static_cast<int64_t>(programs_.size());
  }
  // How many times this rank compared its inputs' signature with the other
  // ranks of the fusion's mesh (runtime/agreement.h): at the first run, and
  // whenever it differs from the previous run's.
  int64_t numAgreements() const {
    return agreements_;
  }
  // How the programs replayed as CUDA graphs ran, summed.
  ProgramGraphs::Stats graphStats() const;
  // The host program of the most recent run; null before the first. Its
  // fusion's outputs carry the shardings the passes gave them.
  const hir::HostIrContainer* lastProgram() const;

 private:
  struct Program;

  std::vector<at::Tensor> runOrThrow(
      const std::vector<at::Tensor>& inputs,
      const std::vector<Literal::Value>& scalars,
      Communicator& communicator,
      const DumpOptions& dump,
      const ExecuteOptions& options);

  std::unique_ptr<Program> compile(
      const std::vector<at::Tensor>& inputs,
      Communicator& communicator,
      const DumpOptions& dump,
      const ExecuteOptions& options);

  // A run whose inputs are not the ones the ranks agreed on last (or whose
  // program is not compiled yet): local checks and compilation, then, when
  // the inputs' agreement signature differs from the last one agreed on,
  // the agreement check with the other ranks, before anything runs.
  // `program` is the compiled program of `key`, or null.
  std::vector<at::Tensor> runChecked(
      Program* program,
      std::vector<int64_t> key,
      std::vector<int64_t> agreement,
      const std::vector<at::Tensor>& inputs,
      const std::vector<Literal::Value>& scalars,
      Communicator& communicator,
      const DumpOptions& dump,
      const ExecuteOptions& options,
      uint64_t rng_base);

  // Moves the CUDA backend and the graphs of an epoch the ranks recovered
  // from out of the way (Communicator::epoch), and compares before the
  // next run.
  void syncEpoch(const Communicator& communicator);

  // Posts this rank's `error` in the agreement check of `teams` and waits a
  // little for the others to read it: whether they did.
  bool shareError(
      Communicator& communicator,
      const std::vector<std::vector<int64_t>>& teams,
      const UserError& error,
      uint64_t run);

  // The token of the `index`-th run of this fusion: its random operations'
  // seed, and how waits name the run (Watchdog::Entry::run); the same on
  // every rank that ran the fusion as often.
  uint64_t runToken(int64_t index) const {
    return definition_hash_ ^
           (static_cast<uint64_t>(index) * 0x9e3779b97f4a7c15ULL);
  }

  Fusion& definition_;
  // Seeds random operations without rng_seed: a hash of the definition and
  // the number of runs so far, the same on every rank that runs the same
  // definition the same number of times, new at every run.
  uint64_t definition_hash_ = 0;
  int64_t runs_ = 0;
  // The CUDA communication backend every program of this fusion shares
  // (see HostIrEvaluator), created on first use; outlives the programs.
  std::unique_ptr<CudaBackend> cuda_;
  std::map<std::vector<int64_t>, std::unique_ptr<Program>> programs_;
  const Program* last_ = nullptr;
  int64_t agreements_ = 0;
  // The agreement signature (options, input dtypes, device types, sizes) of
  // the last run: a run with another compares it with the other ranks
  // first, so that ranks that switch signatures differently learn of it
  // before any collective instead of exchanging mismatched data.
  std::vector<int64_t> agreed_;
  // The fusion has a mesh: its runs may communicate.
  bool communicates_ = false;
  // The communication epoch of `cuda_` and of the programs' graphs.
  int64_t epoch_ = 0;
  // The error of the run being raised came out of the agreement check, on
  // every rank of the team alike: it is no failure of this rank alone.
  bool error_agreed_ = false;
};

} // namespace mdfuser
