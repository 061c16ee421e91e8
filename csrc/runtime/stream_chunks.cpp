// SPDX-License-Identifier: MIT
#include "runtime/stream_chunks.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "ir/errors.h"
#include "multidevice/sharding.h"
#include "passes/pipeline.h"
#include "runtime/input_binding.h"

namespace mdfuser {

namespace {

struct Models {
  std::mutex mutex;
  std::map<std::string, MachineModel, std::less<>> by_device_type;
};

Models& models() {
  static Models instance;
  return instance;
}

// The key of `device`'s model.
std::string deviceType(c10::Device device) {
  return device.is_cuda() ? "cuda" : "cpu";
}

} // namespace

void setMachineModel(
    const std::string& device_type, const MachineModel& model) {
  MDF_USER_CHECK(
      model.gemm_flops > 0 && model.gemm_half_outputs >= 0 &&
          model.memory_bytes > 0 && model.link_bytes > 0 &&
          model.statement_seconds >= 0 && model.move_seconds >= 0,
      "a machine model needs positive rates and non-negative rows, "
      "statement and step times; got ",
      model.toString());
  std::lock_guard<std::mutex> lock(models().mutex);
  models().by_device_type[device_type] = model;
}

std::optional<MachineModel> machineModel(const std::string& device_type) {
  std::lock_guard<std::mutex> lock(models().mutex);
  auto it = models().by_device_type.find(device_type);
  if (it == models().by_device_type.end()) {
    return std::nullopt;
  }
  return it->second;
}

bool hasStreamLoops(const Fusion& fusion) {
  const std::vector<TensorOp*> ops = fusion.exprs();
  return std::any_of(ops.begin(), ops.end(), inStreamLoop);
}

OneChunkFusion compileAtOneChunk(
    const Fusion& definition,
    const std::vector<at::Tensor>& inputs,
    const Communicator& communicator) {
  OneChunkFusion one;
  one.fusion = definition.clone();
  one.splits = chosenSplits(*one.fusion);
  chooseStreamChunks(*one.fusion, 1);
  runFusionPasses(one.fusion.get());
  one.extents = bindInputs(*one.fusion, inputs, communicator);
  return one;
}

ChunkChoice chooseChunkCount(
    const Fusion& definition,
    const OneChunkFusion& one,
    const std::vector<at::Tensor>& inputs,
    const Communicator& communicator,
    c10::Device device,
    const Decompositions& decompositions) {
  const std::string device_type = deviceType(device);
  const std::optional<MachineModel> model = machineModel(device_type);
  MDF_USER_CHECK(
      model.has_value(),
      "the fusion leaves its stream chunk count to mdfuser (outer_split "
      "without a factor), which needs the machine model of the ",
      device_type,
      " device; mdfuser.calibration.ensure_machine_model sets it (execute "
      "calls it)");
  // One chunk, the first count tried, gives the extents each split
  // divides.
  std::vector<std::pair<int64_t, double>> seconds = {
      {1,
       estimateStreamSeconds(
           *one.fusion, one.extents, *model, 1, decompositions)}};
  for (int64_t count : candidateChunkCounts(one.splits, one.extents)) {
    if (count == 1) {
      continue;
    }
    std::unique_ptr<Fusion> fusion = definition.clone();
    chooseStreamChunks(*fusion, count);
    try {
      runFusionPasses(fusion.get());
    } catch (const UserError&) {
      // A count the schedule cannot take (a split below it that no longer
      // divides evenly): not a candidate.
      continue;
    }
    const ScalarEvaluator extents = bindInputs(*fusion, inputs, communicator);
    seconds.emplace_back(
        count,
        estimateStreamSeconds(*fusion, extents, *model, count, decompositions));
  }
  return fastestChunkCount(seconds);
}

namespace {

// streamLoopsWaitForTheLink on `compiled`'s extents.
bool waitsForTheLink(
    const Fusion& compiled,
    const ScalarEvaluator& extents,
    c10::Device device,
    const Decompositions& decompositions) {
  const std::optional<MachineModel> model = machineModel(deviceType(device));
  if (!model.has_value()) {
    return false;
  }
  // The share of one chunk in each, the same for both: a count of 1.
  const StreamWork work =
      estimateStreamWork(compiled, extents, *model, 1, decompositions);
  return work.compute > 0 &&
         work.communication >= kLinkBoundShare * work.compute;
}

} // namespace

bool streamLoopsWaitForTheLink(
    const Fusion& compiled,
    const std::vector<at::Tensor>& inputs,
    const Communicator& communicator,
    c10::Device device,
    const Decompositions& decompositions) {
  if (!machineModel(deviceType(device)).has_value()) {
    return false;
  }
  return waitsForTheLink(
      compiled,
      bindInputs(compiled, inputs, communicator),
      device,
      decompositions);
}

bool exchangesPartialSumsByDefault(
    const OneChunkFusion& one, c10::Device device) {
  return streamLoopsExchangePartialSums(*one.fusion) &&
         waitsForTheLink(
             *one.fusion,
             one.extents,
             device,
             {.rings = true, .exchanged = true});
}

std::vector<LatencyBoundPair> latencyBoundPairsOf(
    const Fusion& compiled,
    const std::vector<at::Tensor>& inputs,
    const Communicator& communicator,
    c10::Device device) {
  const std::optional<MachineModel> model = machineModel(deviceType(device));
  return model.has_value()
             ? latencyBoundPairs(
                   compiled, bindInputs(compiled, inputs, communicator), *model)
             : std::vector<LatencyBoundPair>{};
}

} // namespace mdfuser
