// SPDX-License-Identifier: MIT
#include "ir/ops/broadcast.h"

#include "ir/container.h"
#include "ir/errors.h"
#include "ir/ops/builder.h"

namespace mdfuser {

BroadcastOp::BroadcastOp(
    IrContainer* container,
    TensorView* out,
    TensorView* in,
    std::vector<bool> is_new)
    : TensorOp(container, OpType::Broadcast, {in}, {out}),
      is_new_(std::move(is_new)) {
  MDF_CHECK_EQ(is_new_.size(), out->logicalNoReductions().size());
}

TensorView* BroadcastOp::in() const {
  return static_cast<TensorView*>(input(0));
}

std::vector<AxisMapping> BroadcastOp::mapProducerToConsumer(
    const TensorView* producer, const TensorView* consumer) const {
  MDF_CHECK(producer == in() && consumer == out());
  const std::vector<IterDomain*> p = producer->logicalNoReductions();
  const std::vector<IterDomain*>& c = consumer->maybeRoot();
  std::vector<AxisMapping> result;
  size_t next = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    if (is_new_[i]) {
      continue;
    }
    MDF_CHECK_LT(next, p.size());
    // An axis of extent 1 that expand stretches holds one element on
    // every device.
    if (!p[next]->isBroadcast() && !c[i]->isBroadcast()) {
      result.push_back({p[next], c[i]});
    }
    ++next;
  }
  return result;
}

TensorOp* BroadcastOp::recreate(
    IrContainer* container,
    std::vector<Val*> inputs,
    std::vector<Val*> outputs) const {
  MDF_CHECK(inputs.size() == 1 && outputs.size() == 1);
  return container->create<BroadcastOp>(
      static_cast<TensorView*>(outputs[0]),
      static_cast<TensorView*>(inputs[0]),
      is_new_);
}

std::vector<std::string> BroadcastOp::attributes() const {
  std::string s = "is_new=[";
  for (size_t i = 0; i < is_new_.size(); ++i) {
    s += std::string(i > 0 ? ", " : "") + (is_new_[i] ? "true" : "false");
  }
  return {s + "]"};
}

namespace {

TensorView* build(
    TensorView* in,
    std::vector<IterDomain*> out_ids,
    std::vector<bool> is_new) {
  TensorView* out =
      ops::newTensor(in->container(), std::move(out_ids), in->dtype());
  in->container()
      ->create<BroadcastOp>(out, in, std::move(is_new))
      ->registerAsDefinition();
  return out;
}

} // namespace

TensorView* broadcast(
    TensorView* in, const std::vector<bool>& is_broadcast_dim) {
  ops::requireTensor(in, "broadcast", "input");
  ops::requireSameFusion({in}, "broadcast");
  const std::vector<IterDomain*> ids = in->logicalNoReductions();
  size_t kept = 0;
  for (bool b : is_broadcast_dim) {
    kept += b ? 0 : 1;
  }
  MDF_USER_CHECK(
      kept == ids.size(),
      "broadcast: is_broadcast_dim has ",
      kept,
      " False entries but the input has ",
      ids.size(),
      " dimensions; expected one False entry per input dimension");
  IrContainer* container = in->container();
  std::vector<IterDomain*> out_ids;
  size_t next = 0;
  for (bool b : is_broadcast_dim) {
    if (b) {
      out_ids.push_back(container->create<IterDomain>(
          constant(container, 1), IterType::Broadcast));
    } else {
      out_ids.push_back(ops::freshAxis(ids[next], ids[next]->iterType()));
      ++next;
    }
  }
  return build(in, std::move(out_ids), is_broadcast_dim);
}

TensorView* broadcastInDim(
    TensorView* in,
    const std::vector<Scalar*>& shape,
    const std::vector<int64_t>& broadcast_dims) {
  ops::requireTensor(in, "broadcast_in_dim", "input");
  std::vector<Val*> operands{in};
  operands.insert(operands.end(), shape.begin(), shape.end());
  ops::requireSameFusion(operands, "broadcast_in_dim");
  const std::vector<IterDomain*> ids = in->logicalNoReductions();
  const int64_t rank = static_cast<int64_t>(shape.size());
  MDF_USER_CHECK(
      broadcast_dims.size() == ids.size(),
      "broadcast_in_dim: broadcast_dims has ",
      broadcast_dims.size(),
      " entries but the input has ",
      ids.size(),
      " dimensions; expected one output position per input dimension");
  std::vector<int64_t> position(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    position[i] =
        ops::normalizeDim(broadcast_dims[i], rank, "broadcast_in_dim");
    MDF_USER_CHECK(
        i == 0 || position[i] > position[i - 1],
        "broadcast_in_dim: broadcast_dims=",
        ops::listString(broadcast_dims),
        " must be strictly increasing");
  }
  IrContainer* container = in->container();
  std::vector<IterDomain*> out_ids;
  std::vector<bool> is_new(rank, true);
  size_t next = 0;
  for (int64_t pos = 0; pos < rank; ++pos) {
    Scalar* extent = shape[pos];
    MDF_CHECK(extent != nullptr);
    MDF_USER_CHECK(
        !extent->isConst() || extent->value() >= 0,
        "broadcast_in_dim: shape[",
        pos,
        "] is ",
        extent->value(),
        "; expected an extent >= 0 or a Scalar");
    if (next < ids.size() && position[next] == pos) {
      IterDomain* id = ids[next++];
      is_new[pos] = false;
      if (id->isBroadcast()) {
        out_ids.push_back(
            container->create<IterDomain>(extent, IterType::Broadcast));
        continue;
      }
      ops::requireEqualExtents(
          id->extent(),
          extent,
          "broadcast_in_dim: the extent of input dimension " +
              std::to_string(next - 1) + " and shape[" + std::to_string(pos) +
              "]");
      out_ids.push_back(container->create<IterDomain>(id->extent()));
      continue;
    }
    out_ids.push_back(
        container->create<IterDomain>(extent, IterType::Broadcast));
  }
  return build(in, std::move(out_ids), std::move(is_new));
}

TensorView* expand(TensorView* in, const std::vector<Scalar*>& shape) {
  ops::requireTensor(in, "expand", "input");
  std::vector<Val*> operands{in};
  operands.insert(operands.end(), shape.begin(), shape.end());
  ops::requireSameFusion(operands, "expand");
  const std::vector<IterDomain*> ids = in->logicalNoReductions();
  MDF_USER_CHECK(
      shape.size() == ids.size(),
      "expand: shape has ",
      shape.size(),
      " entries but the input has ",
      ids.size(),
      " dimensions; expected one per dimension (broadcast_in_dim adds new "
      "ones)");
  IrContainer* container = in->container();
  std::vector<IterDomain*> out_ids;
  for (size_t i = 0; i < ids.size(); ++i) {
    IterDomain* id = ids[i];
    Scalar* extent = shape[i];
    MDF_CHECK(extent != nullptr);
    const bool keep = extent->isConst() && extent->value() == -1;
    MDF_USER_CHECK(
        !extent->isConst() || extent->value() >= -1,
        "expand: shape[",
        i,
        "] is ",
        extent->isConst() ? extent->value() : 0,
        "; expected -1 (keep the axis), an extent >= 0 or a Scalar");
    const bool one = id->isBroadcast() ||
                     (id->extent()->isConst() && id->extent()->value() == 1);
    if (keep || !one || extent == id->extent()) {
      if (!keep) {
        ops::requireEqualExtents(
            id->extent(),
            extent,
            "expand: the extent of input dimension " + std::to_string(i) +
                " (not 1, so it cannot be expanded) and shape[" +
                std::to_string(i) + "]");
      }
      out_ids.push_back(ops::freshAxis(id, id->iterType()));
      continue;
    }
    out_ids.push_back(
        container->create<IterDomain>(extent, IterType::Broadcast));
  }
  return build(in, std::move(out_ids), std::vector<bool>(ids.size(), false));
}

} // namespace mdfuser
