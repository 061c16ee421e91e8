// SPDX-License-Identifier: MIT
#include "ir/ops/sdpa.h"

#include <sstream>

#include "ir/container.h"
#include "ir/errors.h"
#include "ir/ops/builder.h"

namespace mdfuser {

namespace {

// Batch and head axes of every tensor operand map to those of every 4- or
// 3-dimensional output.
std::vector<AxisMapping> mapBatchAndHeads(
    const TensorView* producer, const TensorView* consumer) {
  const std::vector<IterDomain*> p = producer->logicalNoReductions();
  const std::vector<IterDomain*>& c = consumer->maybeRoot();
  std::vector<AxisMapping> result;
  if (p.size() < 2 || c.size() < 2) {
    return result;
  }
  result.push_back({p[0], c[0]});
  result.push_back({p[1], c[1]});
  return result;
}

std::vector<std::string> optionStrings(const SdpaOptions& options) {
  std::vector<std::string> result = {
      std::string("is_causal=") + (options.is_causal ? "true" : "false")};
  if (options.scale.has_value()) {
    std::ostringstream ss;
    ss << "scale=" << *options.scale;
    result.push_back(ss.str());
  }
  return result;
}

std::vector<IterDomain*> requireRank4(
    TensorView* tv, const char* op, const char* role) {
  ops::requireTensor(tv, op, role);
  std::vector<IterDomain*> ids = tv->logicalNoReductions();
  MDF_USER_CHECK(
      ids.size() == 4,
      op,
      ": ",
      role,
      " must be 4-dimensional [batch, heads, sequence, head size], got ",
      ids.size(),
      " dimensions in ",
      tv->toString());
  MDF_TYPE_CHECK(
      isFloatingType(tv->dtype()),
      op,
      ": ",
      role,
      " must be a floating-point tensor, got ",
      tv->dtype());
  return ids;
}

void requireSame(
    IterDomain* a, IterDomain* b, const char* op, const std::string& what) {
  ops::requireEqualExtents(
      a->extent(), b->extent(), std::string(op) + ": " + what);
}

void checkDropout(double dropout_p, const char* op) {
  MDF_USER_CHECK(
      dropout_p == 0.0,
      op,
      ": dropout_p=",
      dropout_p,
      " is not supported; mdfuser runs attention without dropout (pass "
      "None or 0)");
}

// Checks query/key/value and returns their axes.
struct Qkv {
  std::vector<IterDomain*> q, k, v;
};
Qkv checkQkv(
    TensorView* query, TensorView* key, TensorView* value, const char* op) {
  Qkv ids{
      requireRank4(query, op, "query"),
      requireRank4(key, op, "key"),
      requireRank4(value, op, "value")};
  for (TensorView* tv : {key, value}) {
    MDF_TYPE_CHECK(
        tv->dtype() == query->dtype(),
        op,
        ": query, key and value must have one dtype, got ",
        query->dtype(),
        " and ",
        tv->dtype());
  }
  requireSame(ids.q[0], ids.k[0], op, "the batch sizes of query and key");
  requireSame(ids.q[0], ids.v[0], op, "the batch sizes of query and value");
  requireSame(ids.q[1], ids.k[1], op, "the numbers of heads of query and key");
  requireSame(
      ids.q[1], ids.v[1], op, "the numbers of heads of query and value");
  requireSame(ids.k[2], ids.v[2], op, "the sequence lengths of key and value");
  requireSame(ids.q[3], ids.k[3], op, "the head sizes of query and key");
  // ATen's flash attention kernels, CPU and CUDA, take one head size.
  requireSame(ids.q[3], ids.v[3], op, "the head sizes of query and value");
  return ids;
}

} // namespace

SdpaOp::SdpaOp(
    IrContainer* container,
    OpType type,
    std::vector<Val*> outputs,
    std::vector<Val*> inputs,
    SdpaOptions options)
    : TensorOp(container, type, std::move(inputs), std::move(outputs)),
      options_(options) {
  MDF_CHECK(
      type == OpType::SdpaFwd || type == OpType::SdpaBwd,
      mdfuser::opName(type),
      " is not attention");
  const bool fwd = type == OpType::SdpaFwd;
  MDF_CHECK_EQ(this->inputs().size(), size_t{fwd ? 3u : 6u});
  MDF_CHECK_EQ(this->outputs().size(), size_t{fwd ? 4u : 3u});
}

std::vector<AxisMapping> SdpaOp::mapProducerToConsumer(
    const TensorView* producer, const TensorView* consumer) const {
  return mapBatchAndHeads(producer, consumer);
}

TensorOp* SdpaOp::recreate(
    IrContainer* container,
    std::vector<Val*> inputs,
    std::vector<Val*> outputs) const {
  return container->create<SdpaOp>(
      type(), std::move(outputs), std::move(inputs), options_);
}

std::vector<std::string> SdpaOp::attributes() const {
  return optionStrings(options_);
}

SdpaFwdResult sdpfaFwd(
    TensorView* query,
    TensorView* key,
    TensorView* value,
    double dropout_p,
    const SdpaOptions& options) {
  const char* op = "sdpfa_fwd";
  ops::requireSameFusion({query, key, value}, op);
  const Qkv ids = checkQkv(query, key, value, op);
  checkDropout(dropout_p, op);
  IrContainer* container = query->container();
  auto fresh = [](IterDomain* id) {
    return ops::freshAxis(id, IterType::Iteration);
  };
  TensorView* output = ops::newTensor(
      container,
      {fresh(ids.q[0]), fresh(ids.q[1]), fresh(ids.q[2]), fresh(ids.v[3])},
      query->dtype());
  TensorView* lse = ops::newTensor(
      container,
      {fresh(ids.q[0]), fresh(ids.q[1]), fresh(ids.q[2])},
      DataType::Float);
  TensorView* seed = ops::newTensor(container, {}, DataType::Int);
  TensorView* offset = ops::newTensor(container, {}, DataType::Int);
  container
      ->create<SdpaOp>(
          OpType::SdpaFwd,
          std::vector<Val*>{output, lse, seed, offset},
          std::vector<Val*>{query, key, value},
          options)
      ->registerAsDefinition();
  return {output, lse, seed, offset};
}

SdpaBwdResult sdpfaBwd(
    TensorView* grad_output,
    TensorView* query,
    TensorView* key,
    TensorView* value,
    TensorView* output,
    TensorView* log_sumexp,
    double dropout_p,
    const SdpaOptions& options) {
  const char* op = "sdpfa_bwd";
  ops::requireSameFusion(
      {grad_output, query, key, value, output, log_sumexp}, op);
  const Qkv ids = checkQkv(query, key, value, op);
  checkDropout(dropout_p, op);
  const std::vector<IterDomain*> g =
      requireRank4(grad_output, op, "grad_output");
  const std::vector<IterDomain*> o = requireRank4(output, op, "output");
  ops::requireTensor(log_sumexp, op, "log_sumexp");
  const std::vector<IterDomain*> l = log_sumexp->logicalNoReductions();
  MDF_USER_CHECK(
      l.size() == 3,
      op,
      ": log_sumexp must be 3-dimensional [batch, heads, sequence], got ",
      l.size(),
      " dimensions");
  for (size_t i = 0; i < 4; ++i) {
    requireSame(g[i], o[i], op, "the shapes of grad_output and output");
  }
  for (size_t i = 0; i < 3; ++i) {
    requireSame(ids.q[i], o[i], op, "the shapes of query and output");
    requireSame(ids.q[i], l[i], op, "the shapes of query and log_sumexp");
  }
  requireSame(ids.v[3], o[3], op, "the head sizes of value and output");
  IrContainer* container = query->container();
  auto like = [&](const std::vector<IterDomain*>& axes, DataType dtype) {
    std::vector<IterDomain*> fresh;
    for (IterDomain* id : axes) {
      fresh.push_back(ops::freshAxis(id, IterType::Iteration));
    }
    return ops::newTensor(container, fresh, dtype);
  };
  TensorView* gq = like(ids.q, query->dtype());
  TensorView* gk = like(ids.k, key->dtype());
  TensorView* gv = like(ids.v, value->dtype());
  container
      ->create<SdpaOp>(
          OpType::SdpaBwd,
          std::vector<Val*>{gq, gk, gv},
          std::vector<Val*>{grad_output, query, key, value, output, log_sumexp},
          options)
      ->registerAsDefinition();
  return {gq, gk, gv};
}

} // namespace mdfuser
