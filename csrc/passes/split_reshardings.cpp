// SPDX-License-Identifier: MIT
#include "passes/split_reshardings.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "ir/ops.h"
#include "multidevice/communication_type.h"
#include "multidevice/output_sharding.h"
#include "multidevice/sharding.h"

namespace mdfuser {

namespace {

using Kind = DeviceSharding::Kind;

// When a parallel type changes in the chain: partial sums, local slices,
// all-to-alls, allgathers.
int stepOrder(const DeviceSharding& from, const DeviceSharding& to) {
  if (from.kind == Kind::kPartial) {
    return 0;
  }
  if (from.kind == Kind::kReplicated) {
    return 1;
  }
  return to.kind == Kind::kSharded ? 2 : 3;
}

bool movesData(const TensorOp* op) {
  return dynamic_cast<const LoadStoreOp*>(op) != nullptr || isDeviceSum(op);
}

// The device parallel types on the chain of splits of `source` in `tv`,
// outermost first.
std::vector<ParallelType> typesOnChain(
    const TensorView* tv, const IterDomain* source) {
  std::vector<std::pair<size_t, ParallelType>> found;
  for (ParallelType pt : kDeviceParallelTypes) {
    ParallelAxis pa = findParallelAxis(tv, pt, tv->logical());
    if (pa && pa.source == source) {
      found.emplace_back(pa.above.size(), pt);
    }
  }
  std::sort(found.begin(), found.end());
  std::vector<ParallelType> result;
  for (const auto& [depth, pt] : found) {
    result.push_back(pt);
  }
  return result;
}

class Splitter {
 public:
  Splitter(Fusion* fusion, TensorOp* op)
      : fusion_(fusion),
        op_(op),
        producer_(op->tensorInputs().at(0)),
        consumer_(op->out()),
        from_(producerState(op)),
        to_(consumerState(op)) {}

  // Returns true when `op` was replaced by a chain.
  bool run() {
    if (from_.mesh != to_.mesh || consumer_->hasRoot() ||
        loopAxis(producer_, ParallelType::Stream) != nullptr ||
        loopAxis(consumer_, ParallelType::Stream) != nullptr) {
      return false;
    }
    std::vector<std::pair<int, ParallelType>> changes;
    for (ParallelType pt : kDeviceParallelTypes) {
      if (from_.of(pt) != to_.of(pt)) {
        changes.emplace_back(stepOrder(from_.of(pt), to_.of(pt)), pt);
      }
    }
    const auto partial =
        std::count_if(changes.begin(), changes.end(), [](const auto& c) {
          return c.first == 0;
        });
    if (changes.size() < 2 || partial > 1) {
      return false;
    }
    std::stable_sort(
        changes.begin(), changes.end(), [](const auto& a, const auto& b) {
          return a.first < b.first;
        });
    const bool is_sum = dynamic_cast<const LoadStoreOp*>(op_) == nullptr;

    // The tensors between the steps: after step i, the types of steps
    // 0..i are laid out as in the consumer, the others as in the producer.
    std::vector<TensorView*> steps;
    std::set<ParallelType> done;
    for (size_t i = 0; i + 1 < changes.size(); ++i) {
      done.insert(changes[i].second);
      const bool summed_here = is_sum && i == 0;
      TensorView* tv = newTensorLike(consumer_, summed_here, false);
      if (!layOut(tv, done)) {
        return false;
      }
      if (summed_here) {
        markDeviceReductions(tv);
      }
      steps.push_back(tv);
    }

    Fusion* fusion = fusion_;
    op_->unregisterAsDefinition();
    if (is_sum) {
      op_->withTensors({steps.front()}, {producer_})->registerAsDefinition();
      dropReductions(consumer_);
    } else {
      fusion->create<LoadStoreOp>(steps.front(), producer_)
          ->registerAsDefinition();
    }
    for (size_t i = 0; i + 1 < steps.size(); ++i) {
      fusion->create<LoadStoreOp>(steps[i + 1], steps[i])
          ->registerAsDefinition();
    }
    fusion->create<LoadStoreOp>(consumer_, steps.back())
        ->registerAsDefinition();
    return true;
  }

 private:
  // Gives `tv` (a tensor like the consumer) the consumer's layout for the
  // parallel types in `done` and for those that do not change, and the
  // producer's for the others. False when the two cannot be combined.
  bool layOut(TensorView* tv, const std::set<ParallelType>& done) {
    // The consumer's logical axes, in tv's.
    std::map<const IterDomain*, IterDomain*> to_tv;
    const std::vector<IterDomain*>& mine = tv->logical();
    size_t next = 0;
    for (const IterDomain* id : consumer_->logical()) {
      if (id->isReduction() && mine.size() < consumer_->logical().size()) {
        continue;
      }
      to_tv[id] = mine.at(next++);
    }

    struct Group {
      std::set<ParallelType> types;
      IterDomain* target = nullptr;
    };
    std::map<std::pair<const TensorView*, const IterDomain*>, Group> groups;
    for (ParallelType pt : kDeviceParallelTypes) {
      const bool as_consumer =
          done.count(pt) != 0 || from_.of(pt) == to_.of(pt);
      const TensorView* source = as_consumer ? consumer_ : producer_;
      const ParallelAxis pa = producerAxis(source, pt);
      if (!pa) {
        continue;
      }
      const IterDomain* axis =
          as_consumer ? pa.source
                      : mappedAxis(op_, producer_, consumer_, pa.source);
      if (axis == nullptr || axis->isReduction()) {
        return false;
      }
      Group& group = groups[{source, pa.source}];
      group.types.insert(pt);
      group.target = to_tv.at(axis);
    }
    std::set<const IterDomain*> targets;
    for (const auto& [key, group] : groups) {
      // A group replays the outermost splits of its chain, so its types
      // must be the chain's outermost ones.
      const std::vector<ParallelType> chain =
          typesOnChain(key.first, key.second);
      const std::set<ParallelType> outermost(
          chain.begin(), chain.begin() + group.types.size());
      if (outermost != group.types || !targets.insert(group.target).second) {
        return false;
      }
    }
    for (const auto& [key, group] : groups) {
      replayAxis(key.first, key.second, tv, group.target, group.types);
    }
    return true;
  }

  // The reduction axes of the sum's new output take the device parallel
  // types they sum over, unless the output is sharded on that type along
  // another axis (a reduce-scatter).
  void markDeviceReductions(TensorView* tv) {
    const std::vector<IterDomain*>& mine = tv->logical();
    const std::vector<IterDomain*>& theirs = consumer_->logical();
    for (const AxisMapping& m : op_->mapProducerToConsumer(producer_)) {
      if (!m.consumer->isReduction() || !m.producer->isDeviceParallel()) {
        continue;
      }
      auto it = std::find(theirs.begin(), theirs.end(), m.consumer);
      if (it == theirs.end()) {
        continue;
      }
      const ParallelType pt = m.producer->parallelType();
      IterDomain* sharded = loopAxis(tv, pt);
      mine[it - theirs.begin()]->parallelize(
          sharded != nullptr && !sharded->isReduction() ? ParallelType::Serial
                                                        : pt);
    }
  }

  Fusion* fusion_;
  TensorOp* op_;
  TensorView* producer_;
  TensorView* consumer_;
  ShardingState from_;
  ShardingState to_;
};

} // namespace

void splitReshardings(Fusion* fusion) {
  for (TensorOp* op : fusion->exprs()) {
    if (op->tensorInputs().size() == 1 && op->outputs().size() == 1 &&
        movesData(op) && op->tensorInputs()[0]->hasDeviceMesh() &&
        op->out()->hasDeviceMesh()) {
      Splitter(fusion, op).run();
    }
  }
}

} // namespace mdfuser
