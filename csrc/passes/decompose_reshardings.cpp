// SPDX-License-Identifier: MIT
#include "passes/decompose_reshardings.h"

#include <algorithm>
#include <map>
#include <string>
#include <unordered_set>

#include "ir/container.h"
#include "ir/errors.h"
#include "ir/ops.h"
#include "ir/rfactor.h"
#include "multidevice/output_sharding.h"
#include "multidevice/sharding.h"

namespace mdfuser {

namespace {

bool isCommunication(const TensorOp* op) {
  return dynamic_cast<const LoadStoreOp*>(op) != nullptr || isDeviceSum(op);
}

bool hasPartialClaim(const std::vector<Claim>& claims) {
  return std::any_of(
      claims.begin(), claims.end(), [](const Claim& c) { return c.partial; });
}

bool hasDeviceReduction(const TensorView* tv) {
  const auto& loop = tv->loop();
  return std::any_of(loop.begin(), loop.end(), [](const IterDomain* id) {
    return id->isReduction() && id->isDeviceParallel();
  });
}

// Gives `to` the stream split of `from` (same logical structure) when it
// has none and the split can come alone.
void copyStream(const TensorView* from, TensorView* to) {
  ParallelAxis stream =
      findParallelAxis(from, ParallelType::Stream, from->logical());
  if (!stream || loopAxis(to, ParallelType::Stream) != nullptr ||
      !streamCanFollow(stream, {})) {
    return;
  }
  const std::vector<IterDomain*>& from_ids = from->logical();
  auto it = std::find(from_ids.begin(), from_ids.end(), stream.source);
  if (it == from_ids.end()) {
    return;
  }
  IterDomain* target = to->logical()[it - from_ids.begin()];
  const auto& loop = to->loop();
  if (std::find(loop.begin(), loop.end(), target) == loop.end() ||
      target->parallelType() != ParallelType::Serial) {
    return;
  }
  replayAxis(from, stream.source, to, target, {ParallelType::Stream});
}

// Replaces output `index` of `op` (registered) by `tv`; returns the new op.
TensorOp* replaceOutput(TensorOp* op, size_t index, TensorView* tv) {
  std::vector<TensorView*> outs = op->outs();
  outs[index] = tv;
  op->unregisterAsDefinition();
  TensorOp* replaced = op->withTensors(outs, op->tensorInputs());
  replaced->registerAsDefinition();
  return replaced;
}

class Decomposer {
 public:
  explicit Decomposer(Fusion* fusion) : fusion_(fusion) {}

  void run() {
    for (bool changed = true; changed;) {
      changed = false;
      for (TensorOp* op : fusion_->exprs()) {
        if (done_.count(op) != 0) {
          continue;
        }
        done_.insert(op);
        if (process(op)) {
          changed = true;
          break;
        }
      }
    }
  }

 private:
  // Returns true when the fusion's operations changed.
  bool process(TensorOp* op) {
    if (isCommunication(op) || !op->out()->hasDeviceMesh()) {
      return false;
    }
    // A creation (full; the others were made whole by
    // decomposeShardedCreations) has no producers to reconcile: it writes
    // any layout of its output where it is.
    if (op->tensorInputs().empty()) {
      return false;
    }
    const DeviceMesh& out_mesh = *op->out()->deviceMesh();
    // Where the operation runs: its output's mesh, unless no producer lives
    // there; then on its first producer's, and the result moves (a sum of
    // a sharded axis to one device is a local sum and a Reduce, not a
    // Gather and a sum).
    DeviceMesh mesh = out_mesh;
    const std::vector<TensorView*> priority = op->shardingPriority();
    if (std::none_of(priority.begin(), priority.end(), [&](TensorView* p) {
          return p->deviceMesh() == out_mesh;
        })) {
      for (TensorView* p : priority) {
        if (p->hasDeviceMesh()) {
          mesh = *p->deviceMesh();
          break;
        }
      }
    }
    std::vector<Claim> claims = outputClaims(op, mesh);
    if (auto* linear = dynamic_cast<LinearOp*>(op); linear != nullptr &&
                                                    linear->bias() != nullptr &&
                                                    hasPartialClaim(claims)) {
      addBiasAfterTheSum(linear);
      return true;
    }

    bool changed = false;
    std::vector<TensorView*> ins = op->tensorInputs();
    bool resharded = false;
    for (TensorView*& in : ins) {
      if (!conformsToClaims(op, claims, in, op->out(), &mesh)) {
        in = reshard(op, claims, in, mesh);
        resharded = true;
      }
    }
    if (resharded) {
      op->unregisterAsDefinition();
      TensorOp* replaced = op->withTensors(op->outs(), ins);
      replaced->registerAsDefinition();
      done_.insert(replaced);
      op = replaced;
      // The claims name the producers they came from; the resharded ones
      // claim the same axes.
      claims = outputClaims(op, mesh);
      changed = true;
    }

    const std::vector<TensorView*> outs = op->outs();
    for (size_t i = 0; i < outs.size(); ++i) {
      TensorView* out = outs[i];
      if (mesh == out_mesh && matchesClaims(op, claims, out)) {
        if (hasDeviceReduction(out)) {
          reduceOverDevices(out);
          changed = true;
        }
        continue;
      }
      // Compute the claimed sharding, then move it to the user's.
      TensorView* natural = newTensorLike(out, true, false);
      natural->setDeviceMesh(mesh);
      applyClaims(op, claims, out, natural);
      copyStream(out, natural);
      op = replaceOutput(op, i, natural);
      done_.insert(op);
      if (hasDeviceReduction(natural)) {
        TensorView* partial = reduceOverDevices(natural);
        sumInto(out, natural, partial);
      } else {
        dropReductions(out);
        fusion_->create<LoadStoreOp>(out, natural)->registerAsDefinition();
      }
      changed = true;
    }
    return changed;
  }

  // out = op(...) reducing over device axes becomes partial = op(...) and
  // out = sum(partial) over those axes; returns partial.
  TensorView* reduceOverDevices(TensorView* out) {
    std::vector<IterDomain*> local;
    for (IterDomain* id : out->loop()) {
      if (id->isReduction() && !id->isDeviceParallel()) {
        local.push_back(id);
      }
    }
    TensorView* partial = rFactor(out, local);
    done_.insert(static_cast<TensorOp*>(partial->definition()));
    return partial;
  }

  // `natural` = sum(partial) over device axes; makes `out` that sum instead,
  // keeping out's own sharding of its other axes.
  void sumInto(TensorView* out, TensorView* natural, TensorView* partial) {
    auto* sum = static_cast<TensorOp*>(natural->definition());
    const OpType type = sum->type();
    sum->unregisterAsDefinition();
    std::vector<IterDomain*> logical;
    std::vector<IterDomain*> reduced;
    const std::vector<IterDomain*>& from = natural->logical();
    size_t next = 0;
    for (IterDomain* id : out->logical()) {
      // natural's logical mirrors out's, with each reduction axis replaced
      // by the device axes it is summed over.
      if (!id->isReduction()) {
        while (next < from.size() && from[next]->isReduction()) {
          ++next;
        }
        logical.push_back(id);
        ++next;
        continue;
      }
      while (next < from.size() && from[next]->isReduction()) {
        IterDomain* r = from[next++];
        const ParallelType pt =
            loopAxis(out, r->parallelType()) == nullptr ||
                    loopAxis(out, r->parallelType())->isReduction()
                ? r->parallelType()
                : ParallelType::Serial;
        auto* copy =
            fusion_->create<IterDomain>(r->extent(), IterType::Reduction, pt);
        logical.push_back(copy);
        reduced.push_back(copy);
      }
    }
    std::vector<IterDomain*> loop;
    for (IterDomain* id : out->loop()) {
      if (!id->isReduction()) {
        loop.push_back(id);
      }
    }
    loop.insert(loop.end(), reduced.begin(), reduced.end());
    out->setDomains({}, std::move(logical), std::move(loop));
    fusion_->create<ReductionOp>(type, out, partial)->registerAsDefinition();
  }

  // out = linear(in, w, b) with a sum over devices becomes
  //   sum = linear(in, w)   // laid out like out, then decomposed
  //   out = add(sum, b)
  // so that the bias is added once.
  void addBiasAfterTheSum(LinearOp* linear) {
    // The output of a weight [A, B, K] is [A, batch..., B]: a bias [A, B]
    // added after the sum would need broadcast axes between its two.
    MDF_USER_CHECK(
        linear->outFeatureAxes() == 1,
        "linear with a weight [A, B, K] (",
        linear->weight()->toString(),
        ") whose in_features are split across devices cannot take its bias ",
        linear->bias()->toString(),
        ": the partial sums are summed first; add the bias to the linear's "
        "output instead (broadcast to [A, 1, ..., B])");
    TensorView* out = linear->out();
    TensorView* sum = newTensorLike(out, true, true);
    linear->unregisterAsDefinition();
    fusion_->create<LinearOp>(sum, linear->in(), linear->weight(), nullptr)
        ->registerAsDefinition();
    dropReductions(out);
    fusion_
        ->create<PointwiseOp>(
            OpType::Add, out, std::vector<Val*>{sum, linear->bias()})
        ->registerAsDefinition();
  }

  // `in`, laid out as `op`'s claims need: p2 = set(in), reused.
  TensorView* reshard(
      const TensorOp* op,
      const std::vector<Claim>& claims,
      TensorView* in,
      const DeviceMesh& mesh) {
    const TensorView* consumer = op->out();
    // The layout asked for: per claim, which axis of `in` carries it.
    std::string key =
        "T" + std::to_string(in->name()) + " on " + mesh.toString();
    std::vector<std::pair<const Claim*, IterDomain*>> wanted;
    const std::vector<AxisMapping> map =
        op->mapProducerToConsumer(in, consumer);
    for (const Claim& claim : claims) {
      IterDomain* target = claimedAxis(op, claim, consumer);
      for (const AxisMapping& m : map) {
        if (target != nullptr && m.consumer == target) {
          wanted.emplace_back(&claim, m.producer);
          key += " " + std::string(parallelTypeName(claim.parallel_type)) +
                 ":" + m.producer->toString() + "/" +
                 claim.axis.loop->toString();
        }
      }
    }
    if (auto it = cache_.find(key); it != cache_.end()) {
      return it->second;
    }
    TensorView* out = newTensorLike(in, false, false);
    out->setDeviceMesh(mesh);
    const std::vector<IterDomain*> in_ids = in->logicalNoReductions();
    for (auto [claim, axis] : wanted) {
      auto pos = std::find(in_ids.begin(), in_ids.end(), axis) - in_ids.begin();
      IterDomain* target = out->logical()[pos];
      const auto& loop = out->loop();
      if (std::find(loop.begin(), loop.end(), target) == loop.end()) {
        continue;
      }
      replayAxis(
          claim->producer,
          claim->axis.source,
          out,
          target,
          {claim->parallel_type});
    }
    copyStream(in, out);
    fusion_->create<LoadStoreOp>(out, in)->registerAsDefinition();
    cache_.emplace(key, out);
    return out;
  }

  Fusion* fusion_;
  std::unordered_set<const TensorOp*> done_;
  std::map<std::string, TensorView*> cache_;
};

} // namespace

void decomposeReshardings(Fusion* fusion) {
  Decomposer(fusion).run();
}

} // namespace mdfuser
