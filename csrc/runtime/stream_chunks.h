// SPDX-License-Identifier: MIT
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "ir/fusion.h"
#include "ir/scalar_eval.h"
#include "passes/choose_stream_chunks.h"
#include "passes/latency_bound_pairs.h"
#include "runtime/communicator.h"

namespace mdfuser {

// The machine model of each device type ("cpu", "cuda") this process runs
// on, set by mdfuser.calibration before a fusion whose stream chunk count
// mdfuser chooses is compiled. Every rank of a job holds the same one (one
// rank measures it, the others read it from the job's store), so that they
// all choose the same count.
void setMachineModel(const std::string& device_type, const MachineModel& model);
std::optional<MachineModel> machineModel(const std::string& device_type);

// Whether some operation of `fusion` runs in a stream loop (inStreamLoop):
// true of a definition whose user split an axis across streams, before
// any pass ran.
bool hasStreamLoops(const Fusion& fusion);

// `definition` compiled through the fusion passes with every stream chunk
// count mdfuser chooses set to one, the splits whose counts it chooses and
// the extents on the inputs: the first count chooseChunkCount prices, and
// what exchangesPartialSumsByDefault decides on, compiled once for both.
struct OneChunkFusion {
  std::unique_ptr<Fusion> fusion;
  std::vector<const Split*> splits;
  ScalarEvaluator extents;
};
OneChunkFusion compileAtOneChunk(
    const Fusion& definition,
    const std::vector<at::Tensor>& inputs,
    const Communicator& communicator);

// The stream chunk count for `definition`'s chosen splits on `inputs` (`one`
// its compilation at one chunk): each count worth trying is compiled
// through the fusion passes and its stream loops estimated with the machine
// model of `device`, the collectives decomposed as the lowering will
// (estimateStreamWork); the fastest wins. No timing at run time, no
// communication. User error when the definition asks for a count and no
// machine model is set for the device.
ChunkChoice chooseChunkCount(
    const Fusion& definition,
    const OneChunkFusion& one,
    const std::vector<at::Tensor>& inputs,
    const Communicator& communicator,
    c10::Device device,
    const Decompositions& decompositions);

// Whether `compiled` (a fusion whose fusion passes ran) is one whose rings'
// stream chunks should issue their first GEMMs before the rings (the
// RingProloguesFirst host pass) when the user leaves it to mdfuser: where
// the machine model of `device` says its stream loops wait for the link,
// their communication at least kLinkBoundShare of their computation. Then
// the first move must start as soon as one chunk's GEMM ends, not when
// every chunk's, which run at once and share the SMs. False without a
// model or stream loops. The collectives are decomposed as `decompositions`
// says (the CUDA backend's rings unless told).
inline constexpr double kLinkBoundShare = 0.9;
bool streamLoopsWaitForTheLink(
    const Fusion& compiled,
    const std::vector<at::Tensor>& inputs,
    const Communicator& communicator,
    c10::Device device,
    const Decompositions& decompositions = {.rings = true});

// Whether the CUDA backend should run `definition`'s stream loops with
// their allreduces exchanged and the GEMMs in order
// (LoweringOptions::exchange_allreduce and gemms_in_order, the host passes'
// StreamSchedule::kCommunicationPerStream) when the user leaves it to
// mdfuser: where every collective of the loops is the allreduce of a
// linear's partial sums over two devices (streamLoopsExchangePartialSums)
// and the loops, so decomposed, wait for the link. There the copy engine
// to the one peer is the pipeline's narrow stage: the exchange's moves
// wait for nothing but their own chunk's GEMM, and the GEMMs in order
// finish the chunks one after another, each as early as it can. On two
// H200s at h = 1024, t = 65536 the schedule took 0.540-0.544 ms at its
// best count against the default's 0.551-0.561 (benchmarks.md); where the
// GEMM bounds the loops the default's chunks, whose GEMMs run at once,
// stay faster. `one` is the definition compiled at one chunk.
bool exchangesPartialSumsByDefault(
    const OneChunkFusion& one, c10::Device device);

// The matmul–collective pairs of `compiled` (a fusion whose fusion passes
// ran) outside Stream loops that the machine model of `device` finds too
// short for a ring's steps (latencyBoundPairs); empty without a model.
std::vector<LatencyBoundPair> latencyBoundPairsOf(
    const Fusion& compiled,
    const std::vector<at::Tensor>& inputs,
    const Communicator& communicator,
    c10::Device device);

} // namespace mdfuser
