// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "host_ir/communication.h"

namespace mdfuser {

// What NVFUSER_DUMP / MDFUSER_DUMP ask to print (rank 0 only), read once per
// process from the environment. doc/debugging.md lists the names.
struct DumpOptions {
  bool fusion_ir = false;        // the fusion after the fusion passes
  bool fusion_ir_passes = false; // the fusion after each fusion pass
  bool host_ir = false;          // the host program that runs
  bool host_ir_passes = false;   // the host program after each host pass

  // Parses a comma-separated list; user error on an unknown name, listing
  // the valid ones.
  static DumpOptions parse(const std::string& spec);
  // NVFUSER_DUMP and MDFUSER_DUMP together, parsed on first call.
  static const DumpOptions& fromEnvironment();
};

// The per-call switches execute() takes. nvFuser's names are accepted so
// that its scripts run unchanged. User error on an unknown name.
struct ExecuteOptions {
  // A schedule the user may ask for or refuse, left to mdfuser otherwise.
  enum class Choice { kDefault, kOn, kOff };

  // Operations write straight into allreduce buffers (InplaceAllreduce);
  // disabled by "inplace_allreduce", to measure what it saves.
  bool inplace_allreduce = true;
  // Computation on the caller's stream, communications on worker streams
  // (StreamSchedule::kCommunicationPerStream); "compute_on_main_stream".
  bool compute_on_main_stream = false;
  // Layout operations are views of their input (AliasLayoutOps); disabled by
  // "alias_layout_ops", which makes each a copy.
  bool alias_layout_ops = true;
  // layer_norm compositions run as ATen's fused kernel (FuseLayerNorms);
  // disabled by "fuse_layer_norms", which runs the primitives.
  bool fuse_layer_norms = true;
  // Matmul–collective pairs as rings of point-to-point moves
  // (LoweringOptions::ring_decomposition); "ring_decomposition".
  bool ring_decomposition = false;
  // Whether the program is replayed as CUDA graphs (ProgramGraphs):
  // "cuda_graph" enabled asks for it (user errors where it cannot), disabled
  // runs the statements one by one; by default mdfuser replays the programs
  // where graphs are measured faster and fall back silently
  // (useCudaGraphsByDefault).
  Choice cuda_graph = Choice::kDefault;
  // Every stream chunk's work before its first ring step, in chunk order,
  // before the rings (the RingProloguesFirst host pass): "ring_prologues_
  // first" enabled or disabled; by default where the machine model says the
  // stream loops wait for the link (streamLoopsWaitForTheLink).
  Choice ring_prologues_first = Choice::kDefault;
  // A stream chunk's moves outstanding at once (a direct reduce-scatter's
  // or allgather's to its d - 1 peers) each on a communication stream of
  // its own (HostPassOptions::communication_lanes): "concurrent_moves"
  // enabled or disabled; by default one stream a chunk, for now.
  Choice concurrent_moves = Choice::kDefault;
  // At two devices, the allreduce of a row-parallel linear's partial sums
  // as one exchange of whole partial sums
  // (LoweringOptions::exchange_allreduce): "exchange_allreduce" enabled or
  // disabled; by default the reduce-scatter and allgather, for now.
  Choice exchange_allreduce = Choice::kDefault;
  // Reduce-scatter rings over three devices or more send each peer's
  // partial sum straight to it (LoweringOptions::direct_reduce_scatter);
  // disabled by "direct_reduce_scatter", which passes sums round the ring.
  bool direct_reduce_scatter = true;
  // An allgather and the linear consuming it, and a linear and the
  // reduce-scatter of its partial sums, each computed by one fused kernel
  // (LoweringOptions::fused_matmul_communication): "fused_matmul_
  // communication" enabled forces it (a user error where the kernels are
  // unusable), disabled refuses it; by default mdfuser decides: the
  // allgather + linear pairs too short for a ring whose GEMM leaves SMs
  // free for the pushing kernel (FusionExecutorCache::compile).
  Choice fused_matmul_communication = Choice::kDefault;
  // The library carrying communications; unset: Gloo for CPU tensors, and
  // for CUDA tensors the CUDA backend where every GPU maps the others'
  // memory, NCCL otherwise (FusionExecutorCache's defaultBackend).
  std::optional<hir::CommunicatorBackend> backend;

  // The option names of the reference system that have no meaning in
  // mdfuser: accepted and ignored (doc/options.md lists them).
  static const std::vector<std::string>& ignoredEnableOptions();
  static const std::vector<std::string>& ignoredDisableOptions();

  static ExecuteOptions parse(
      const std::vector<std::string>& enable,
      const std::vector<std::string>& disable);

  // Every option above, once: its name, its value as a number (a bool as 0
  // or 1, the backend as its enumerator or -1 when unset, cuda_graph as its
  // enumerator) and as text.
  // Programs are cached by the values, and ranks compare the texts, so an
  // option added here is part of both.
  struct Value {
    std::string_view name;
    int64_t number;
    std::string_view text;
  };
  std::vector<Value> values() const;
};

} // namespace mdfuser
