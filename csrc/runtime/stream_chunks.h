// SPDX-License-Identifier: MIT
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "ir/fusion.h"
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

// The stream chunk count for `definition`'s chosen splits on `inputs`: each
// count worth trying is compiled through the fusion passes and its stream
// loops estimated with the machine model of `device` (with `rings`, as the
// lowering makes rings of the collectives beside GEMMs, and with `fused`,
// as it fuses allgather + linear and linear + reduce-scatter pairs:
// estimateStreamWork); the fastest wins.
// No timing at run time, no communication. User error when the definition
// asks for a count and no machine model is set for the device.
ChunkChoice chooseChunkCount(
    const Fusion& definition,
    const std::vector<at::Tensor>& inputs,
    const Communicator& communicator,
    c10::Device device,
    bool rings,
    bool fused = false);

// Whether `compiled` (a fusion whose fusion passes ran) is one whose rings'
// stream chunks should issue their first GEMMs before the rings (the
// RingProloguesFirst host pass) when the user leaves it to mdfuser: where
// the machine model of `device` says its stream loops wait for the link,
// their communication at least kLinkBoundShare of their computation. Then
// the first move must start as soon as one chunk's GEMM ends, not when
// every chunk's, which run at once and share the SMs. False without a
// model or stream loops.
inline constexpr double kLinkBoundShare = 0.9;
bool streamLoopsWaitForTheLink(
    const Fusion& compiled,
    const std::vector<at::Tensor>& inputs,
    const Communicator& communicator,
    c10::Device device);

// The matmul–collective pairs of `compiled` (a fusion whose fusion passes
// ran) outside Stream loops that the machine model of `device` finds too
// short for a ring's steps (latencyBoundPairs); empty without a model.
std::vector<LatencyBoundPair> latencyBoundPairsOf(
    const Fusion& compiled,
    const std::vector<at::Tensor>& inputs,
    const Communicator& communicator,
    c10::Device device);

} // namespace mdfuser
