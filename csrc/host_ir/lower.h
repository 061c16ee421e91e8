// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>

#include "host_ir/host_ir_container.h"
#include "ir/fusion.h"
#include "multidevice/fused_matmul_choice.h"

namespace mdfuser::hir {

struct LoweringOptions {
  // Carries the communications: Gloo for CPU inputs, NCCL or kCuda for CUDA
  // inputs. kCuda carries the rings below, which it implies, and leaves the
  // other collectives to NCCL.
  CommunicatorBackend backend = CommunicatorBackend::kNccl;
  // The device (rank) the program runs on: it decides which operations run
  // here (those whose output's mesh holds it), the team of each collective
  // and the part a device takes of a replicated tensor.
  int64_t device = 0;
  // Lower matmul–collective pairs into rings of CollectivePermutes
  // (ring_decomposition.h) rather than a collective beside the GEMM:
  //  - an allgather whose only use is the input of a linear (sequence
  //    parallelism feeding a column-parallel linear),
  //  - the partial sums of a linear without bias (a row-parallel linear)
  //    whose only use is their reduce-scatter or allreduce.
  // Other collectives, and teams of one device, are lowered as usual.
  bool ring_decomposition = false;
  // The reduce-scatter and allreduce of a row-parallel linear's partial
  // sums send each peer's partial sum straight to it
  // (emitDirectLinearReduceScatter, emitDirectLinearAllreduce) instead of
  // passing sums round a ring: over three devices or more, and at two
  // where the pair runs as one chunk or `gemms_in_order`
  // (Lowerer::directReduction).
  bool direct_reduce_scatter = true;
  // The host passes will run each stream chunk's GEMMs on one stream in
  // chunk order (StreamSchedule::kCommunicationPerStream): at two devices
  // the reduce-scatter and allreduce are direct then for any number of
  // chunks, since a ring's last GEMM would wait for its chunk's move with
  // no other chunk's GEMM beside it.
  bool gemms_in_order = false;
  // At two devices, the allreduce of a linear's partial sums as one
  // exchange of whole partial sums (emitExchangedLinearAllreduce) instead
  // of a reduce-scatter and an allgather.
  bool exchange_allreduce = false;
  // Compute an allgather and the linear consuming it (the pair whose ring
  // is emitAllgatherLinear), and a linear and the reduce-scatter of its
  // partial sums (emitLinearReduceScatter's pair), with one fused kernel
  // each, the AllgatherLinear and LinearReduceScatter statements, instead
  // of the ring. kOn fuses every pair that qualifies
  // (fusedAllgatherLinearObstacle, fusedLinearReduceScatterObstacle) and
  // keeps the ring of the others; kAuto fuses the pairs of `fused_pairs`
  // (below), which the runtime chose. kOn where the kernels are unusable (a
  // backend other than
  // kCuda, or `fused_kernels_available` false) is a user error, raised
  // before anything is lowered.
  FusedMatmulChoice fused_matmul_communication = FusedMatmulChoice::kOff;
  // Whether this device and build have the fused kernels
  // (fusedMatmulKernelsAvailable in runtime/fused_matmul.h), set by the
  // runtime.
  bool fused_kernels_available = false;
  // The linears (of the fusion being lowered) whose pair keeps its
  // collective beside the GEMM where the CUDA backend would make a ring:
  // pairs outside Stream loops too short for a ring's steps to pay
  // (passes/latency_bound_pairs.h), chosen by the runtime when the user
  // asked for neither rings (`ring_decomposition`) nor a backend. Without
  // effect on a pair the fused kernels take.
  std::unordered_set<const Expr*> pairs_without_rings = {};
  // The linears (of the fusion being lowered) whose pair the fused kernel
  // computes under kAuto: allgather + linear pairs outside Stream loops too
  // short for a ring's steps whose GEMM leaves SMs free for the kernel's
  // pushing CTAs (runtime/fused_matmul.h, pushedAllgatherFits), chosen by
  // the runtime. Without effect under kOff; under kOn every pair that
  // qualifies is fused anyway.
  std::unordered_set<const Expr*> fused_pairs = {};
};

// Whether lowering with `options` makes rings of the pairs listed at
// LoweringOptions::ring_decomposition: asked for, or implied by the CUDA
// backend, which moves data only point to point.
bool makesRings(const LoweringOptions& options);

// Why lowering with `options` cannot emit AllgatherLinear and
// LinearReduceScatter statements (a backend other than kCuda, no fused
// kernels), or empty when it can.
std::string whyFusedKernelsUnusable(const LoweringOptions& options);

// Lowers a fusion that went through runFusionPasses into the host program
// of one device:
//  - consecutive operations whose outputs are split on the same stream axis
//    go into one Stream ForLoop; tensors that live beyond the loop are read
//    and written through ShardByStream views of one chunk. An operation
//    without a stream split that reads nothing the loop writes (the upcast
//    of a weight broadcast to every chunk) runs once, in front of the
//    loop, rather than ending it;
//  - operations that move data between devices become a Communication and
//    its Wait (or, when a device only takes its part of a replicated
//    tensor, a ShardByDevice view and a copy); the others stay compute
//    operations;
//  - operations on meshes without this device, and communications it takes
//    no part in, are left out;
//  - with `ring_decomposition`, the pairs listed there become rings, and
//    with `fused_matmul_communication` the allgather + linear and linear +
//    reduce-scatter pairs one AllgatherLinear or LinearReduceScatter each.
// The program has no allocations and no stream handling yet: the host passes
// add them.
std::unique_ptr<HostIrContainer> lowerToHostIr(
    std::unique_ptr<Fusion> fusion, const LoweringOptions& options);

} // namespace mdfuser::hir
