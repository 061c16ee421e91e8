// SPDX-License-Identifier: MIT
#include "runtime/executor_cache.h"

#include <functional>
#include <iostream>
#include <string>

#include <c10/core/GradMode.h>

#include "host_ir/lower.h"
#include "host_ir/passes/pass_manager.h"
#include "ir/errors.h"
#include "ir/ops.h"
#include "passes/pipeline.h"
#include "runtime/agreement.h"
#include "runtime/communicator.h"
#include "runtime/cuda_backend.h"
#include "runtime/cuda_graphs.h"
#include "runtime/evaluator.h"
#include "runtime/fused_matmul.h"
#include "runtime/input_binding.h"
#include "runtime/stream_chunks.h"

namespace mdfuser {

struct FusionExecutorCache::Program {
  std::unique_ptr<hir::HostIrContainer> hic;
  std::unique_ptr<HostIrEvaluator> evaluator;
  // The extents its inputs bound when they passed bindInputs' checks,
  // before it entered the cache: the same for every input of its key
  // (dtypes, devices, sizes, strides).
  ScalarEvaluator extents;
};

namespace {

// The options and, per input, its dtype, device type and sizes: what the
// ranks of a mesh must agree on.
std::vector<int64_t> agreementSignatureOf(
    const std::vector<at::Tensor>& inputs, const ExecuteOptions& options) {
  std::vector<int64_t> key;
  for (const ExecuteOptions::Value& option : options.values()) {
    key.push_back(option.number);
  }
  key.push_back(static_cast<int64_t>(inputs.size()));
  for (const at::Tensor& t : inputs) {
    if (!t.defined() || t.is_nested() || t.layout() != c10::kStrided) {
      // Refused by checkInputs; never a cached program's.
      key.push_back(-1);
      continue;
    }
    key.push_back(static_cast<int64_t>(t.scalar_type()));
    key.push_back(static_cast<int64_t>(t.device().type()));
    key.push_back(t.dim());
    key.insert(key.end(), t.sizes().begin(), t.sizes().end());
  }
  return key;
}

// `agreement` followed by what may differ between ranks and still changes
// the compiled program (each input's device index and strides): the key of
// a program in this rank's cache.
std::vector<int64_t> programKeyOf(
    const std::vector<int64_t>& agreement,
    const std::vector<at::Tensor>& inputs) {
  std::vector<int64_t> key = agreement;
  for (const at::Tensor& t : inputs) {
    if (t.defined() && !t.is_nested() && t.layout() == c10::kStrided) {
      key.push_back(t.device().index());
      key.insert(key.end(), t.strides().begin(), t.strides().end());
    }
  }
  return key;
}

// What the device's kernels take that a definition cannot know: attention
// on CUDA (cuDNN's, or flash attention where cuDNN's does not apply) takes
// Half and BFloat16 and head sizes that are multiples of 8 up to 256; linear
// and matmul on CUDA take no integers.
void checkDeviceSupport(const Fusion& fusion, c10::Device device) {
  if (!device.is_cuda()) {
    return;
  }
  for (const TensorOp* op : fusion.exprs()) {
    if (op->type() == OpType::Linear || op->type() == OpType::Matmul) {
      const TensorView* in = op->tensorInputs().front();
      MDF_TYPE_CHECK(
          !isIntegralType(in->dtype()),
          op->opName(),
          " of ",
          in->dtype(),
          " tensors runs on the CPU only, as torch's: on CUDA it takes "
          "floating-point tensors (cuBLAS has no integer GEMM), got ",
          in->toString(),
          "; cast them first");
      continue;
    }
    if (op->type() != OpType::SdpaFwd && op->type() != OpType::SdpaBwd) {
      continue;
    }
    const TensorView* query =
        op->tensorInputs().at(op->type() == OpType::SdpaFwd ? 0 : 1);
    MDF_TYPE_CHECK(
        isReducedPrecision(query->dtype()),
        op->opName(),
        " on CUDA runs cuDNN or flash attention, which take BFloat16 or Half, "
        "got ",
        query->dtype(),
        " for ",
        query->toString(),
        "; cast query, key and value first");
    const Scalar* head_size = query->logicalNoReductions().back()->extent();
    MDF_USER_CHECK(
        !head_size->isConst() ||
            (head_size->value() % 8 == 0 && head_size->value() <= 256),
        op->opName(),
        " on CUDA runs cuDNN or flash attention, which take head sizes that "
        "are multiples of 8 up to 256, got ",
        head_size->toString());
  }
}

bool hasDeviceMesh(const Fusion& fusion) {
  for (const TensorView* tv : fusion.allTensors()) {
    if (tv->hasDeviceMesh()) {
      return true;
    }
  }
  return false;
}

} // namespace

FusionExecutorCache::FusionExecutorCache(Fusion& definition)
    : definition_(definition), communicates_(hasDeviceMesh(definition)) {
  definition_.freeze();
  definition_hash_ = std::hash<std::string>{}(definition_.toString());
}

FusionExecutorCache::~FusionExecutorCache() = default;

ProgramGraphs::Stats FusionExecutorCache::graphStats() const {
  ProgramGraphs::Stats total;
  for (const auto& [key, program] : programs_) {
    if (const ProgramGraphs* graphs = program->evaluator->graphs()) {
      total.add(graphs->stats());
    }
  }
  return total;
}

const hir::HostIrContainer* FusionExecutorCache::lastProgram() const {
  return last_ == nullptr ? nullptr : last_->hic.get();
}

namespace {

// Gloo for CPU tensors; for CUDA tensors the CUDA backend, whose copy
// engines take no SMs from the computation beside them, where it reaches
// every peer, and NCCL otherwise.
hir::CommunicatorBackend defaultBackend(
    const Communicator& communicator, c10::Device device) {
  if (!device.is_cuda()) {
    return hir::CommunicatorBackend::kGloo;
  }
  return cudaBackendReachesPeers(communicator, device)
             ? hir::CommunicatorBackend::kCuda
             : hir::CommunicatorBackend::kNccl;
}

FusedMatmulChoice fusedMatmulChoice(ExecuteOptions::Choice choice) {
  switch (choice) {
    case ExecuteOptions::Choice::kOn:
      return FusedMatmulChoice::kOn;
    case ExecuteOptions::Choice::kOff:
      return FusedMatmulChoice::kOff;
    case ExecuteOptions::Choice::kDefault:
      return FusedMatmulChoice::kAuto;
  }
  MDF_UNREACHABLE("unknown choice ", static_cast<int>(choice));
}

// Why this run cannot have the fused matmul–communication kernels, or empty:
// what the user can least change first (the device, then the build), so
// that the message names what stands in the way.
std::string whyNoFusedKernels(
    c10::Device device, const hir::LoweringOptions& lowering) {
  if (!device.is_cuda()) {
    return "the inputs are CPU tensors, and the kernel needs CUDA tensors "
           "on a Hopper GPU (sm_90a), the CUDA communication backend and a "
           "build with the fused kernels";
  }
  if (!lowering.fused_kernels_available) {
    return fusedMatmulKernelsUnavailableReason(device);
  }
  return hir::whyFusedKernelsUnusable(lowering);
}

// Whether the default computes `pair`, too short for a ring's steps, with
// a fused kernel instead of its collective: an allgather + linear whose
// GEMM leaves SMs free for the kernel's pushing CTAs on `device` (where the
// kernel, measured on two H200s at M = N = K = 1024, took 21 µs a call
// against 25 for NCCL's allgather then the GEMM).
bool fusesByDefault(const LatencyBoundPair& pair, c10::Device device) {
  const std::optional<AllgatherLinearPair> gather =
      allgatherLinearPairOf(pair.collective);
  return gather.has_value() && fusedAllgatherLinearObstacle(*gather).empty() &&
         pushedAllgatherFits(
             pair.rows, pair.columns, pair.depth, gather->team_size, device);
}

// NCCL refuses two ranks on one GPU, and fails in the middle of the program
// when it meets them: with GPUs shared by processes, a program that needs
// NCCL is a user error, raised on every rank before any communication.
void refuseNcclOnSharedGpus(
    const hir::HostIrContainer& program,
    const Communicator& communicator,
    c10::Device device) {
  if (!processesShareGpus(communicator, device)) {
    return;
  }
  hir::forEachExpr(program.topLevel(), [&](const Expr* expr) {
    const auto* comm = dynamic_cast<const hir::Communication*>(expr);
    MDF_USER_CHECK(
        comm == nullptr || comm->team().size() < 2 ||
            comm->backend() != hir::CommunicatorBackend::kNccl,
        communicationTypeName(comm->type()),
        " (Communication ",
        comm->name(),
        ") with team ",
        hir::teamString(comm->team()),
        " runs on NCCL, which refuses two processes on one GPU, and "
        "MDFUSER_SHARE_DEVICES=1 puts ",
        communicator.localSize(),
        " processes on fewer GPUs; there only the CUDA backend's rings "
        "communicate CUDA tensors");
  });
}

} // namespace

std::unique_ptr<FusionExecutorCache::Program> FusionExecutorCache::compile(
    const std::vector<at::Tensor>& inputs,
    Communicator& communicator,
    const DumpOptions& dump,
    const ExecuteOptions& options) {
  std::ostream* out = communicator.rank() == 0 ? &std::cout : nullptr;
  auto show = [&](bool wanted) { return wanted ? out : nullptr; };

  const c10::Device device = programDevice(definition_, inputs);
  checkDeviceSupport(definition_, device);
  hir::LoweringOptions lowering;
  lowering.backend =
      options.backend.value_or(defaultBackend(communicator, device));
  MDF_USER_CHECK(
      device.is_cuda() || lowering.backend == hir::CommunicatorBackend::kGloo,
      "the inputs are CPU tensors, which only the Gloo backend carries; "
      "got backend ",
      hir::backendName(lowering.backend));
  MDF_USER_CHECK(
      !device.is_cuda() || lowering.backend != hir::CommunicatorBackend::kGloo,
      "the inputs are CUDA tensors, which NCCL or the CUDA backend carry; "
      "got backend ",
      hir::backendName(lowering.backend));
  MDF_USER_CHECK(
      lowering.backend != hir::CommunicatorBackend::kCuda ||
          cudaBackendAvailable(),
      "this build of mdfuser has no CUDA communication backend (PyTorch "
      "without CUDA); use CommunicatorBackend.nccl");
  lowering.ring_decomposition = options.ring_decomposition;
  lowering.direct_reduce_scatter = options.direct_reduce_scatter;
  lowering.gemms_in_order = options.compute_on_main_stream;
  lowering.exchange_allreduce =
      options.exchange_allreduce == ExecuteOptions::Choice::kOn;
  // The definition compiled at one chunk, where a choice below needs it;
  // once for all of them.
  std::optional<OneChunkFusion> one_chunk;
  auto oneChunk = [&]() -> const OneChunkFusion& {
    if (!one_chunk.has_value()) {
      one_chunk = compileAtOneChunk(definition_, inputs, communicator);
    }
    return *one_chunk;
  };
  // Left to mdfuser: link-bound allreduces of partial sums at two devices
  // exchanged, with the GEMMs in order. Only a definition with stream
  // loops has them: the others are not compiled to find out.
  if (options.exchange_allreduce == ExecuteOptions::Choice::kDefault &&
      !options.compute_on_main_stream &&
      lowering.backend == hir::CommunicatorBackend::kCuda &&
      hasStreamLoops(definition_) &&
      exchangesPartialSumsByDefault(oneChunk(), device)) {
    lowering.exchange_allreduce = true;
    lowering.gemms_in_order = true;
    if (std::ostream* os = show(dump.host_ir)) {
      *os << "partial sums exchanged, GEMMs in order: the stream loops wait "
             "for the link\n";
    }
  }
  lowering.fused_matmul_communication =
      fusedMatmulChoice(options.fused_matmul_communication);
  lowering.fused_kernels_available = fusedMatmulKernelsAvailable(device);
  checkFusedMatmulRequest(
      lowering.fused_matmul_communication, whyNoFusedKernels(device, lowering));

  std::unique_ptr<Fusion> fusion = definition_.clone();
  if (choosesStreamChunks(definition_)) {
    const ChunkChoice choice = chooseChunkCount(
        definition_,
        oneChunk(),
        inputs,
        communicator,
        device,
        {.rings = hir::makesRings(lowering),
         .fused =
             lowering.fused_matmul_communication == FusedMatmulChoice::kOn &&
             hir::whyFusedKernelsUnusable(lowering).empty(),
         .exchanged = lowering.exchange_allreduce});
    chooseStreamChunks(*fusion, choice.count);
    if (std::ostream* os = show(dump.host_ir || dump.fusion_ir)) {
      *os << choice.toString() << "\n";
    }
  }
  runFusionPasses(
      fusion.get(), {.dump_after_each_pass = show(dump.fusion_ir_passes)});
  if (std::ostream* os = show(dump.fusion_ir)) {
    *os << fusion->toString() << std::flush;
  }

  // Where the rings come from the default backend alone (neither rings nor
  // a backend asked for, no fused kernels) and NCCL can run (no GPU shared
  // by processes), a pair too short for a ring's steps keeps its
  // collective, or, left to mdfuser, takes a fused kernel where one that
  // is faster than the collective computes it.
  if (!options.backend.has_value() &&
      lowering.backend == hir::CommunicatorBackend::kCuda &&
      !lowering.ring_decomposition &&
      lowering.fused_matmul_communication != FusedMatmulChoice::kOn &&
      !processesShareGpus(communicator, device)) {
    const bool may_fuse =
        lowering.fused_matmul_communication == FusedMatmulChoice::kAuto &&
        whyNoFusedKernels(device, lowering).empty();
    for (const LatencyBoundPair& pair :
         latencyBoundPairsOf(*fusion, inputs, communicator, device)) {
      if (may_fuse && fusesByDefault(pair, device)) {
        lowering.fused_pairs.insert(pair.linear);
        if (std::ostream* os = show(dump.host_ir)) {
          *os << "fused kernel, not a ring: " << pair.toString() << "\n";
        }
        continue;
      }
      lowering.pairs_without_rings.insert(pair.linear);
      if (std::ostream* os = show(dump.host_ir)) {
        *os << "collective, not a ring: " << pair.toString() << "\n";
      }
    }
  }

  lowering.device = communicator.rank();
  // The rings' first GEMMs first: asked for, or where the model says the
  // stream loops wait for the link.
  bool prologues_first =
      options.ring_prologues_first == ExecuteOptions::Choice::kOn;
  if (options.ring_prologues_first == ExecuteOptions::Choice::kDefault &&
      lowering.backend == hir::CommunicatorBackend::kCuda) {
    prologues_first =
        streamLoopsWaitForTheLink(*fusion, inputs, communicator, device);
  }
  auto program = std::make_unique<Program>();
  program->hic = hir::lowerToHostIr(std::move(fusion), lowering);
  hir::runHostPasses(
      *program->hic,
      {.dump_after_each_pass = show(dump.host_ir_passes),
       .inplace_allreduce = options.inplace_allreduce,
       .alias_layout_ops = options.alias_layout_ops,
       .fuse_layer_norms = options.fuse_layer_norms,
       .ring_prologues_first = prologues_first,
       .symmetric_memory = lowering.backend == hir::CommunicatorBackend::kCuda,
       .stream_schedule = lowering.gemms_in_order
                              ? hir::StreamSchedule::kCommunicationPerStream
                              : hir::StreamSchedule::kIterationPerStream,
       .communication_lanes =
           options.concurrent_moves == ExecuteOptions::Choice::kOn
               ? hir::Stream::kCommunicationLanes
               : 1});
  if (std::ostream* os = show(dump.host_ir)) {
    *os << program->hic->toString() << std::flush;
  }
  refuseNcclOnSharedGpus(*program->hic, communicator, device);
  ExecuteOptions::Choice graphs = options.cuda_graph;
  if (graphs == ExecuteOptions::Choice::kOn) {
    checkCudaGraphs(*program->hic, device);
  } else if (
      graphs == ExecuteOptions::Choice::kDefault &&
      !useCudaGraphsByDefault(*program->hic, device)) {
    graphs = ExecuteOptions::Choice::kOff;
  }
  program->evaluator = std::make_unique<HostIrEvaluator>(
      *program->hic, device, &communicator, &cuda_, graphs);
  return program;
}

std::vector<at::Tensor> FusionExecutorCache::run(
    const std::vector<at::Tensor>& inputs,
    Communicator& communicator,
    const DumpOptions& dump,
    const ExecuteOptions& options,
    const std::vector<Literal::Value>& scalars) {
  if (communicates_) {
    // After a failure no run communicates until the ranks recover: said
    // before anything else (this run has not started).
    communicator.throwIfStopped();
  }
  error_agreed_ = false;
  try {
    return runOrThrow(inputs, scalars, communicator, dump, options);
  } catch (const CommunicationError& e) {
    noteFailedRun();
    if (e.cause() != CommunicationError::Cause::kPeerFailed) {
      // Peers may wait for this rank in this run's communication.
      communicator.reportFailure(e.what());
    }
    throw;
  } catch (const std::exception& e) {
    noteFailedRun();
    if (!error_agreed_) {
      // Raised on this rank alone, perhaps while its peers communicate.
      communicator.reportFailure(e.what());
    }
    throw;
  } catch (...) {
    noteFailedRun();
    communicator.reportFailure("an unknown error");
    throw;
  }
}

void FusionExecutorCache::failBeforeRun(
    Communicator& communicator, const UserError& error) {
  noteFailedRun();
  const std::vector<std::vector<int64_t>> teams =
      agreementTeams(definition_, communicator.rank(), communicator.size());
  if (teams.empty()) {
    return;
  }
  // The run this one would have been.
  if (!shareError(communicator, teams, error, runToken(runs_))) {
    communicator.reportFailure(error.what());
  }
}

bool FusionExecutorCache::shareError(
    Communicator& communicator,
    const std::vector<std::vector<int64_t>>& teams,
    const UserError& error,
    uint64_t run) {
  RunFingerprint failed;
  failed.error = error;
  try {
    communicator.join();
    return agreeAcrossTeams(communicator, teams, failed, run);
  } catch (const std::exception&) {
    // The store is unreachable, or a rank failed: this rank's own error
    // says more, and its failure is posted.
    return false;
  }
}

void FusionExecutorCache::syncEpoch(const Communicator& communicator) {
  if (epoch_ == communicator.epoch()) {
    return;
  }
  epoch_ = communicator.epoch();
  agreed_.clear();
  if (cuda_ != nullptr) {
    // The CUDA backend of an epoch the ranks recovered from: its buffers,
    // and its flags, may still receive the released moves of its peers
    // (and this rank's own may still run), so it is never freed; the
    // programs create another in this epoch. Bounded by the failures a job
    // recovers from.
    (void)cuda_.release();
  }
  for (auto& [key, program] : programs_) {
    program->evaluator->dropGraphs();
  }
}

std::vector<at::Tensor> FusionExecutorCache::runOrThrow(
    const std::vector<at::Tensor>& inputs,
    const std::vector<Literal::Value>& scalars,
    Communicator& communicator,
    const DumpOptions& dump,
    const ExecuteOptions& options) {
  // mdfuser computes values, not gradients: inputs that require grad (an
  // nn.Parameter) are read as plain tensors, and outputs require none.
  c10::AutoGradMode no_autograd(false);
  syncEpoch(communicator);
  // Values change from run to run: checked at every one, and a bad value
  // is shared like any error before the run (the others may compare).
  try {
    checkScalarInputs(definition_, scalars);
  } catch (const UserError& e) {
    // Shared, or reported as this rank's failure, there.
    failBeforeRun(communicator, e);
    error_agreed_ = true;
    throw;
  }
  const uint64_t rng_base = runToken(runs_++);
  std::vector<int64_t> agreement = agreementSignatureOf(inputs, options);
  std::vector<int64_t> key = programKeyOf(agreement, inputs);
  auto it = programs_.find(key);
  Program* program = it == programs_.end() ? nullptr : it->second.get();
  if (program != nullptr && agreement == agreed_) {
    // What the ranks agreed on last: straight to the program.
    last_ = program;
    return program->evaluator->run(inputs, program->extents, rng_base, scalars);
  }
  return runChecked(
      program,
      std::move(key),
      std::move(agreement),
      inputs,
      scalars,
      communicator,
      dump,
      options,
      rng_base);
}

std::vector<at::Tensor> FusionExecutorCache::runChecked(
    Program* program,
    std::vector<int64_t> key,
    std::vector<int64_t> agreement,
    const std::vector<at::Tensor>& inputs,
    const std::vector<Literal::Value>& scalars,
    Communicator& communicator,
    const DumpOptions& dump,
    const ExecuteOptions& options,
    uint64_t rng_base) {
  const std::vector<std::vector<int64_t>> teams =
      agreementTeams(definition_, communicator.rank(), communicator.size());
  const bool compare = !teams.empty() && agreement != agreed_;
  if (hasDeviceMesh(definition_)) {
    // Before any check that may fail, so that the others' rendezvous
    // completes and they learn of the failure in the agreement check.
    communicator.join();
  }
  std::unique_ptr<Program> compiled;
  try {
    if (program == nullptr) {
      checkInputs(definition_, inputs);
      compiled = compile(inputs, communicator, dump, options);
      program = compiled.get();
    }
    // The compiled fusion's inputs carry the propagated shardings.
    program->extents = bindInputs(program->hic->fusion(), inputs, communicator);
  } catch (const UserError& e) {
    // The others that compare raise it too instead of waiting for this
    // rank; those that do not run a collective, and learn of this rank's
    // failure (run() reports it) unless the error was shared.
    error_agreed_ = compare && shareError(communicator, teams, e, rng_base);
    throw;
  }
  if (compare) {
    try {
      agreeAcrossTeams(
          communicator,
          teams,
          fingerprintOf(definition_, inputs, options),
          rng_base);
    } catch (const UserError&) {
      // The ranks disagree: every rank of the teams raises an error.
      error_agreed_ = true;
      throw;
    }
    ++agreements_;
  }
  agreed_ = std::move(agreement);
  if (compiled != nullptr) {
    programs_.emplace(std::move(key), std::move(compiled));
  }
  last_ = program;
  return program->evaluator->run(inputs, program->extents, rng_base, scalars);
}

} // namespace mdfuser
