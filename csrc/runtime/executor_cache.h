// SPDX-License-Identifier: MIT
#pragma once

#include <map>
#include <memory>
#include <ostream>
#include <vector>

#include <ATen/core/Tensor.h>

#include "host_ir/host_ir_container.h"
#include "ir/fusion.h"
#include "runtime/options.h"

namespace mdfuser {

class Communicator;
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

  // Runs the fusion on this rank's local shards and returns its local
  // output shards. Every user error is raised before any communication.
  std::vector<at::Tensor> run(
      const std::vector<at::Tensor>& inputs,
      Communicator& communicator,
      const DumpOptions& dump = {},
      const ExecuteOptions& options = {});

  int64_t numPrograms() const {
    return static_cast<int64_t>(programs_.size());
  }
  // How many times this rank compared a new input signature with the other
  // ranks of the fusion's mesh (runtime/agreement.h).
  int64_t numAgreements() const {
    return agreements_;
  }
  // The host program of the most recent run; null before the first. Its
  // fusion's outputs carry the shardings the passes gave them.
  const hir::HostIrContainer* lastProgram() const;

 private:
  struct Program;

  std::unique_ptr<Program> compile(
      const std::vector<at::Tensor>& inputs,
      Communicator& communicator,
      const DumpOptions& dump,
      const ExecuteOptions& options);

  // The first run of an input signature: local checks and compilation, then
  // the agreement check with the other ranks, before anything runs.
  std::vector<at::Tensor> runNewSignature(
      std::vector<int64_t> key,
      const std::vector<at::Tensor>& inputs,
      Communicator& communicator,
      const DumpOptions& dump,
      const ExecuteOptions& options,
      uint64_t rng_base);

  Fusion& definition_;
  // Seeds random operations without rng_seed: a hash of the definition and
  // the number of runs so far, the same on every rank that runs the same
  // definition the same number of times, new at every run.
  uint64_t definition_hash_ = 0;
  int64_t runs_ = 0;
  std::map<std::vector<int64_t>, std::unique_ptr<Program>> programs_;
  const Program* last_ = nullptr;
  int64_t agreements_ = 0;
};

} // namespace mdfuser
