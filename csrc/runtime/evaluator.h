// SPDX-License-Identifier: MIT
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/Scalar.h>

#include "host_ir/host_ir_container.h"
#include "ir/scalar_eval.h"
#include "runtime/options.h"
#include "runtime/streams.h"

namespace mdfuser {

class Communicator;
class CudaBackend;
class ProgramGraphs;

// Interprets a host program on one device: ATen *_out calls into the
// buffers the program allocates, c10d collectives for communications, and
// stream switches and waits that are real on CUDA and no-ops on the CPU.
// Keeps its worker streams, and its symmetric buffers, from run to run.
class HostIrEvaluator {
 public:
  // `communicator` may be null when the program has no communication.
  // `cuda` is where the CUDA communication backend lives, created on first
  // use: the programs of one fusion share it (FusionExecutorCache), so that
  // a rank that compiles a program of its own (other input strides, which
  // the ranks do not compare) keeps the flags and symmetric buffers its
  // peers use; null gives the evaluator one of its own.
  // `graphs` replays the program as CUDA graphs (ProgramGraphs) where it
  // can: kOn as asked, kDefault falling back to the statements where a
  // capture fails.
  HostIrEvaluator(
      const hir::HostIrContainer& hic,
      c10::Device device,
      Communicator* communicator,
      std::unique_ptr<CudaBackend>* cuda = nullptr,
      ExecuteOptions::Choice graphs = ExecuteOptions::Choice::kOff);
  ~HostIrEvaluator();

  // `extents` binds the symbols of the input extents (see bindInputs);
  // `rng_base` seeds the random operations without a seed (KernelCall);
  // `scalars` are the values of the fusion's scalar inputs, in order, each
  // of the kind its dtype holds (Literal::fits). The caller's current
  // stream is current again when run returns or throws.
  std::vector<at::Tensor> run(
      const std::vector<at::Tensor>& inputs,
      const ScalarEvaluator& extents,
      uint64_t rng_base = 0,
      const std::vector<Literal::Value>& scalars = {});

  // The program's CUDA graphs; null unless the evaluator replays them.
  const ProgramGraphs* graphs() const;
  // Forgets the captured graphs (their counts stay): they hold the buffers
  // of a CUDA backend that a rank's failure retired (FusionExecutorCache).
  void dropGraphs();

  // What the evaluator does with a statement.
  enum class Statement {
    kLoop,
    kGetCurrentStream,
    kSetCurrentStream,
    kSynchronize,
    kSynchronizePreviousRun,
    kAllocate,
    kDeallocate,
    kShardView,
    kView,
    kCommunication,
    kWait,
    kAllgatherLinear,
    kLinearReduceScatter,
    kCompute,
  };

  // What runs read of the program, derived once.
  struct Tables {
    // Whether the program has a SynchronizePreviousRun: its runs mark their
    // start (StreamSet::markRunStart).
    bool waits_for_previous_run = false;
    // Every statement's kind, from one classification: a run dispatches
    // on it without a chain of casts per statement.
    std::unordered_map<const Expr*, Statement> statements;
    // Each symmetric Allocate's number, in program order: with the loop
    // iteration and the shape, the key of its buffer, the same in every
    // program of a fusion that allocates the same buffers.
    std::unordered_map<const hir::Allocate*, int64_t> symmetric_numbers;
    // Each Communication's name in errors and the watchdog's reports,
    // "CollectivePermute (Communication 3)": the CUDA backend's moves are
    // posted at every ring step.
    std::unordered_map<
        const hir::Communication*,
        std::shared_ptr<const std::string>>
        names;
    // Each fused statement's number among those of its kind
    // (AllgatherLinear, LinearReduceScatter), in program order (with the
    // loop iteration, the key of its kernel's symmetric buffers, as
    // symmetric_numbers), and its name in errors: "AllgatherLinear 0 with
    // team (0 1)".
    struct Fused {
      int64_t number;
      std::string what;
    };
    std::unordered_map<const hir::FusedMatmulCommunication*, Fused> fused;
  };

 private:
  // Runs the statements one by one; `capturing` when a CUDA graph capture
  // records them.
  std::vector<at::Tensor> runStatements(
      const std::vector<at::Tensor>& inputs,
      // The scalar inputs' values, of the kinds their dtypes hold.
      const std::vector<c10::Scalar>& scalars,
      const ScalarEvaluator& extents,
      uint64_t rng_base,
      bool capturing);

  const hir::HostIrContainer& hic_;
  c10::Device device_;
  Communicator* communicator_;
  StreamSet streams_;
  std::unique_ptr<CudaBackend> own_cuda_;
  // The CUDA communication backend with the symmetric buffers and flags
  // (`own_cuda_` or the caller's), created on first use and kept from run
  // to run.
  std::unique_ptr<CudaBackend>& cuda_;
  Tables tables_;
  std::unique_ptr<ProgramGraphs> graphs_;
  bool graphs_by_default_ = false;
};

} // namespace mdfuser
