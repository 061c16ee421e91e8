// SPDX-License-Identifier: MIT
#include "passes/choose_stream_chunks.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <sstream>

#include "ir/errors.h"
#include "ir/ops/matmul.h"
#include "ir/ops/tensor_op.h"
#include "multidevice/communication_type.h"
#include "multidevice/fused_matmul_choice.h"
#include "multidevice/sharding.h"

namespace mdfuser {

namespace {

std::vector<const Split*> allChosenSplits(const Fusion& fusion) {
  std::vector<const Split*> result;
  for (const auto& statement : fusion.statements()) {
    const auto* split = dynamic_cast<const Split*>(statement.get());
    if (split != nullptr && split->factor()->role() == Scalar::Role::kChosen) {
      result.push_back(split);
    }
  }
  return result;
}

// One chunk's share of the stream loop's work.
struct ChunkWork {
  double compute = 0;
  double communication = 0;
  int64_t statements = 0;
};

// Whether a fused kernel computes the collective `op` with its linear: an
// allgather with the linear consuming it, or a reduce-scatter with the
// linear whose partial sums it takes.
bool fusedCollective(const TensorOp* op, bool fused) {
  if (!fused) {
    return false;
  }
  const std::optional<AllgatherLinearPair> gather = allgatherLinearPairOf(op);
  if (gather.has_value()) {
    return fusedAllgatherLinearObstacle(*gather).empty();
  }
  const std::optional<LinearReduceScatterPair> scatter =
      linearReduceScatterPairOf(op);
  return scatter.has_value() &&
         fusedLinearReduceScatterObstacle(*scatter).empty();
}

// Whether `op` is the allreduce of a linear's partial sums over two
// devices, which the lowering exchanges with `exchanged`.
bool exchangedAllreduce(const TensorOp* op, bool exchanged) {
  if (!exchanged || !isResharding(op)) {
    return false;
  }
  const auto collective = collectiveOf(op);
  if (!collective.has_value() ||
      collective->first != CommunicationType::Allreduce ||
      collective->second != 2) {
    return false;
  }
  const auto* in = dynamic_cast<const TensorView*>(op->inputs().front());
  const auto* linear = dynamic_cast<const LinearOp*>(in->definition());
  return linear != nullptr && linear->bias() == nullptr;
}

// The parts a GEMM `op` runs in when the lowering makes rings of the
// collectives beside GEMMs: one per device of the ring, for a GEMM whose
// input an allgather makes or whose output a reduction collective takes
// (one where the lowering exchanges it).
int64_t ringParts(const TensorOp* op, const Decompositions& decompositions) {
  const bool fused = decompositions.fused;
  int64_t parts = 1;
  for (const Val* in : op->inputs()) {
    const auto* tv = dynamic_cast<const TensorView*>(in);
    const auto* producer =
        tv == nullptr ? nullptr
                      : dynamic_cast<const TensorOp*>(tv->definition());
    if (producer != nullptr && isResharding(producer) &&
        !fusedCollective(producer, fused)) {
      const auto collective = collectiveOf(producer);
      if (collective.has_value() &&
          collective->first == CommunicationType::Allgather) {
        parts = std::max(parts, collective->second);
      }
    }
  }
  for (const Expr* use : op->out()->uses()) {
    const auto* consumer = dynamic_cast<const TensorOp*>(use);
    if (consumer != nullptr && isResharding(consumer) &&
        !fusedCollective(consumer, fused) &&
        !exchangedAllreduce(consumer, decompositions.exchanged)) {
      const auto collective = collectiveOf(consumer);
      if (collective.has_value() &&
          (collective->first == CommunicationType::Allreduce ||
           collective->first == CommunicationType::ReduceScatter)) {
        parts = std::max(parts, collective->second);
      }
    }
  }
  return parts;
}

void addOperation(
    const TensorOp* op,
    const ScalarEvaluator& ev,
    const MachineModel& model,
    double share,
    const Decompositions& decompositions,
    ChunkWork& work) {
  if (fusedCollective(op, decompositions.fused)) {
    // Part of its linear's statement, its moves hidden behind the GEMM.
    return;
  }
  const TensorView* out = op->out();
  const std::vector<Scalar*> out_extents = localExtents(out);
  const double elements = extentProduct(out_extents, ev) * share;
  const double bytes =
      elements * static_cast<double>(sizeInBytes(out->dtype()));
  ++work.statements;
  if (isResharding(op)) {
    // What a rank sends or receives: its larger side.
    const double moved = reshardedBytes(op, ev, share);
    // An exchange moves the same bytes as a reduce-scatter and an
    // allgather, in one move that waits for no step before it: its receive
    // is posted before its data is ready (OrderCommunicationStreams), so
    // its handshake runs beside the GEMM and no step's latency is paid.
    const CollectiveCost cost = exchangedAllreduce(op, decompositions.exchanged)
                                    ? CollectiveCost{1.0, 0}
                                    : collectiveCost(op);
    work.communication += model.statement_seconds +
                          static_cast<double>(cost.steps) * model.move_seconds +
                          cost.share * moved / model.link_bytes;
    return;
  }
  const auto* first =
      op->inputs().empty()
          ? nullptr
          : dynamic_cast<const TensorView*>(op->inputs().front());
  switch (op->type()) {
    case OpType::Linear:
    case OpType::Matmul: {
      MDF_CHECK(first != nullptr);
      // Each output element sums k products of the first operand's last
      // axis.
      const std::vector<Scalar*> in_extents = localExtents(first);
      const double k = static_cast<double>(ev.evaluate(in_extents.back()));
      const double parts =
          decompositions.rings
              ? static_cast<double>(ringParts(op, decompositions))
              : 1.0;
      work.compute += gemmSeconds(model, 2.0 * elements * k, elements / parts);
      return;
    }
    case OpType::SdpaFwd:
    case OpType::SdpaBwd: {
      // Two GEMMs over the keys per output element (four backward).
      MDF_CHECK(first != nullptr && op->inputs().size() >= 2);
      const auto* key = dynamic_cast<const TensorView*>(op->inputs()[1]);
      MDF_CHECK(key != nullptr);
      const std::vector<Scalar*> key_extents = localExtents(key);
      MDF_CHECK(key_extents.size() >= 2);
      const double keys =
          static_cast<double>(ev.evaluate(key_extents[key_extents.size() - 2]));
      const double gemms = op->type() == OpType::SdpaFwd ? 2.0 : 4.0;
      work.compute +=
          gemmSeconds(model, 2.0 * gemms * elements * keys, elements);
      return;
    }
    default:
      // Read once and written once.
      work.compute += 2.0 * bytes / model.memory_bytes;
      return;
  }
}

} // namespace

std::string ChunkChoice::toString() const {
  std::ostringstream os;
  os << "stream chunks: " << count << " (estimated";
  for (size_t i = 0; i < seconds.size(); ++i) {
    os << (i == 0 ? " " : ", ") << seconds[i].first << ": "
       << seconds[i].second * 1e6 << " us";
  }
  os << ")";
  return os.str();
}

void checkLayoutNeedsNoChosenCount(const TensorView* tv) {
  const std::vector<IterDomain*>& logical = tv->logical();
  for (const IterDomain* device : tv->loop()) {
    if (!device->isDeviceParallel()) {
      continue;
    }
    // Every split between the device axis and its logical axis: the part a
    // device holds depends on the extent of the outer part of each split
    // the path goes through the inner part of.
    const IterDomain* id = device;
    while (std::find(logical.begin(), logical.end(), id) == logical.end()) {
      const auto* split = dynamic_cast<const Split*>(id->definition());
      if (split == nullptr) {
        break;
      }
      MDF_USER_CHECK(
          split->outer() == id ||
              split->outer()->extent()->role() != Scalar::Role::kChosen,
          "outer_split without a factor on ",
          tv->toString(),
          " splits an axis into stream chunks above its split across "
          "devices (",
          parallelTypeName(device->parallelType()),
          "): the count mdfuser chooses would decide how the fusion's "
          "input or output is laid out across devices, which its shards "
          "must know before the fusion is compiled; give the split a "
          "factor");
      id = split->in();
    }
  }
}

std::vector<const Split*> chosenSplits(const Fusion& fusion) {
  std::vector<const Split*> splits = allChosenSplits(fusion);
  for (const Split* split : splits) {
    MDF_USER_CHECK(
        split->outer()->parallelType() == ParallelType::Stream,
        "outer_split without a factor lets mdfuser choose the number of "
        "stream chunks, but its outer part ",
        split->outer()->toString(),
        " (of ",
        split->in()->toString(),
        ") is ",
        split->outer()->parallelType() == ParallelType::Serial
            ? "not parallelized"
            : "parallelized on " +
                  std::string(parallelTypeName(split->outer()->parallelType())),
        "; parallelize it on ParallelType.stream, or give the split a "
        "factor");
  }
  if (splits.empty()) {
    return splits;
  }
  // The user shards the inputs and reads the outputs before the count is
  // chosen: it must not decide their layout across devices.
  std::vector<const TensorView*> boundary(
      fusion.inputs().begin(), fusion.inputs().end());
  boundary.insert(
      boundary.end(), fusion.outputs().begin(), fusion.outputs().end());
  for (const TensorView* tv : boundary) {
    checkLayoutNeedsNoChosenCount(tv);
  }
  return splits;
}

bool choosesStreamChunks(const Fusion& fusion) {
  return !allChosenSplits(fusion).empty();
}

void chooseStreamChunks(Fusion& fusion, int64_t count) {
  for (const Split* split : allChosenSplits(fusion)) {
    split->factor()->choose(count);
  }
}

std::vector<int64_t> candidateChunkCounts(
    const std::vector<const Split*>& splits, const ScalarEvaluator& extents) {
  int64_t common = 0;
  for (const Split* split : splits) {
    common = std::gcd(common, extents.evaluate(split->in()->extent()));
  }
  std::vector<int64_t> counts;
  for (int64_t s = 1; s <= std::min(common, kMaxStreamChunks); ++s) {
    if (common % s == 0) {
      counts.push_back(s);
    }
  }
  if (counts.empty()) {
    // Empty axes: one chunk, which is empty too.
    counts.push_back(1);
  }
  return counts;
}

StreamWork estimateStreamWork(
    const Fusion& compiled,
    const ScalarEvaluator& extents,
    const MachineModel& model,
    int64_t count,
    const Decompositions& decompositions) {
  MDF_CHECK(count > 0);
  ChunkWork chunk;
  const double share = 1.0 / static_cast<double>(count);
  Decompositions lowered = decompositions;
  // Lowering fuses pairs outside Stream loops only.
  lowered.fused = decompositions.fused && count == 1;
  for (const TensorOp* op : compiled.exprs()) {
    if (inStreamLoop(op)) {
      addOperation(op, extents, model, share, lowered, chunk);
    }
  }
  return StreamWork{
      chunk.compute,
      chunk.communication,
      static_cast<double>(chunk.statements) * model.statement_seconds};
}

double estimateStreamSeconds(
    const Fusion& compiled,
    const ScalarEvaluator& extents,
    const MachineModel& model,
    int64_t count,
    const Decompositions& decompositions) {
  const StreamWork chunk =
      estimateStreamWork(compiled, extents, model, count, decompositions);
  const double slowest =
      std::max({chunk.compute, chunk.communication, chunk.host});
  return chunk.compute + chunk.communication + chunk.host +
         static_cast<double>(count - 1) * slowest;
}

bool streamLoopsExchangePartialSums(const Fusion& compiled) {
  bool any = false;
  for (const TensorOp* op : compiled.exprs()) {
    if (!isResharding(op) || !inStreamLoop(op)) {
      continue;
    }
    if (!exchangedAllreduce(op, /*exchanged=*/true)) {
      return false;
    }
    any = true;
  }
  return any;
}

ChunkChoice fastestChunkCount(
    const std::vector<std::pair<int64_t, double>>& seconds) {
  MDF_CHECK(!seconds.empty(), "no chunk count to choose from");
  ChunkChoice choice;
  choice.seconds = seconds;
  // The first of the fastest: the smaller count on a tie.
  choice.count =
      std::min_element(
          seconds.begin(),
          seconds.end(),
          [](const auto& a, const auto& b) { return a.second < b.second; })
          ->first;
  return choice;
}

} // namespace mdfuser
