// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <memory>

#include "host_ir/host_ir_container.h"
#include "ir/fusion.h"

namespace mdfuser::hir {

struct LoweringOptions {
  // Carries the communications: NCCL for CUDA inputs, Gloo for CPU inputs.
  CommunicatorBackend backend = CommunicatorBackend::kNccl;
  // The device (rank) the program runs on: it decides which operations run
  // here (those whose output's mesh holds it), the team of each collective
  // and the part a device takes of a replicated tensor.
  int64_t device = 0;
};

// Lowers a fusion that went through runFusionPasses into the host program
// of one device:
//  - consecutive operations whose outputs are split on the same stream axis
//    go into one Stream ForLoop; tensors that live beyond the loop are read
//    and written through ShardByStream views of one chunk;
//  - operations that move data between devices become a Communication and
//    its Wait (or, when a device only takes its part of a replicated
//    tensor, a ShardByDevice view and a copy); the others stay compute
//    operations;
//  - operations on meshes without this device, and communications it takes
//    no part in, are left out.
// The program has no allocations and no stream handling yet: the host passes
// add them.
std::unique_ptr<HostIrContainer> lowerToHostIr(
    std::unique_ptr<Fusion> fusion, const LoweringOptions& options);

} // namespace mdfuser::hir
