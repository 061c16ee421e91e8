// SPDX-License-Identifier: MIT
#include "ir/ops/sdpa.h"

#include <sstream>

#include "ir/container.h"
#include "ir/errors.h"
#include "ir/ops/builder.h"
#include "ir/scalar.h"

namespace mdfuser {

namespace {

// The philox outputs of the forward and operands of the backward: what the
// dropout mask was drawn from, not computed from the other operands.
bool isPhilox(const SdpaOp& op, const TensorView* tv) {
  if (op.type() == OpType::SdpaFwd) {
    return tv == op.output(2) || tv == op.output(3);
  }
  return op.inputs().size() == 8 && (tv == op.input(6) || tv == op.input(7));
}

std::vector<std::string> optionStrings(const SdpaOptions& options) {
  std::vector<std::string> result;
  if (options.dropout_p != 0.0) {
    std::ostringstream ss;
    ss << "dropout_p=" << options.dropout_p;
    result.push_back(ss.str());
  }
  result.push_back(
      std::string("is_causal=") + (options.is_causal ? "true" : "false"));
  if (options.scale.has_value()) {
    std::ostringstream ss;
    ss << "scale=" << *options.scale;
    result.push_back(ss.str());
  }
  return result;
}

// The axes of a query, key, value, output or gradient: 4, or 5 with a
// device axis of its own in front.
std::vector<IterDomain*> requireQkvRank(
    TensorView* tv, const char* op, const char* role) {
  ops::requireTensor(tv, op, role);
  std::vector<IterDomain*> ids = tv->logicalNoReductions();
  MDF_USER_CHECK(
      ids.size() == 4 || ids.size() == 5,
      op,
      ": ",
      role,
      " must be 4-dimensional [batch, heads, sequence, head size] or "
      "5-dimensional [devices, batch, heads / devices, sequence, head size], "
      "got ",
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
  // Written to refuse NaN too.
  MDF_USER_CHECK(
      dropout_p >= 0.0 && dropout_p < 1.0,
      op,
      ": dropout_p=",
      dropout_p,
      " is out of range; expected a probability in [0, 1)");
}

// The names of the leading axes, for messages.
const char* axisName(size_t axis, size_t rank) {
  const size_t batch = rank - 4;
  if (axis < batch) {
    return "device axes";
  }
  return axis == batch ? "batch sizes" : "numbers of heads";
}

// Checks query/key/value and returns their axes.
struct Qkv {
  std::vector<IterDomain*> q, k, v;
};
Qkv checkQkv(
    TensorView* query, TensorView* key, TensorView* value, const char* op) {
  Qkv ids{
      requireQkvRank(query, op, "query"),
      requireQkvRank(key, op, "key"),
      requireQkvRank(value, op, "value")};
  for (TensorView* tv : {key, value}) {
    MDF_TYPE_CHECK(
        tv->dtype() == query->dtype(),
        op,
        ": query, key and value must have one dtype, got ",
        query->dtype(),
        " and ",
        tv->dtype());
  }
  const size_t rank = ids.q.size();
  for (const auto* other : {&ids.k, &ids.v}) {
    MDF_USER_CHECK(
        other->size() == rank,
        op,
        ": query, key and value must have one rank, got ",
        rank,
        " and ",
        other->size());
  }
  for (size_t a = 0; a + 2 < rank; ++a) {
    const std::string what = std::string("the ") + axisName(a, rank);
    requireSame(ids.q[a], ids.k[a], op, what + " of query and key");
    requireSame(ids.q[a], ids.v[a], op, what + " of query and value");
  }
  requireSame(
      ids.k[rank - 2],
      ids.v[rank - 2],
      op,
      "the sequence lengths of key and value");
  requireSame(
      ids.q[rank - 1], ids.k[rank - 1], op, "the head sizes of query and key");
  // ATen's flash attention kernels, CPU and CUDA, take one head size.
  requireSame(
      ids.q[rank - 1],
      ids.v[rank - 1],
      op,
      "the head sizes of query and value");
  return ids;
}

// A philox operand of sdpfa_bwd: a UInt64 tensor of `rank` dimensions,
// [2] or [].
void checkPhilox(TensorView* tv, const char* role, size_t rank) {
  const char* op = "sdpfa_bwd";
  ops::requireTensor(tv, op, role);
  const char* expected = rank == 1 ? "[2]" : "[]";
  MDF_TYPE_CHECK(
      tv->dtype() == DataType::UInt64,
      op,
      ": ",
      role,
      " must be a UInt64 tensor of shape ",
      expected,
      " (as sdpfa_fwd returns it), got ",
      tv->dtype());
  const std::vector<IterDomain*> ids = tv->logicalNoReductions();
  MDF_USER_CHECK(
      ids.size() == rank && (rank == 0 || !ids[0]->extent()->isConst() ||
                             ids[0]->extent()->value() == 2),
      op,
      ": ",
      role,
      " must have shape ",
      expected,
      " (as sdpfa_fwd returns it), got ",
      tv->toString());
  if (rank == 1) {
    ops::requireEqualExtents(
        ids[0]->extent(),
        constant(tv->container(), 2),
        std::string(op) + ": the length of " + role + " and 2");
  }
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
  if (fwd) {
    MDF_CHECK_EQ(this->inputs().size(), size_t{3});
  } else {
    MDF_CHECK(
        this->inputs().size() == 6 || this->inputs().size() == 8,
        "sdpfa_bwd takes 6 or 8 operands, got ",
        this->inputs().size());
  }
  MDF_CHECK_EQ(this->outputs().size(), size_t{fwd ? 4u : 3u});
}

size_t SdpaOp::batchAxes() const {
  const auto* query =
      static_cast<const TensorView*>(input(type() == OpType::SdpaFwd ? 0 : 1));
  return query->logicalNoReductions().size() - 2;
}

std::vector<AxisMapping> SdpaOp::mapProducerToConsumer(
    const TensorView* producer, const TensorView* consumer) const {
  // The batch and head axes (and a device axis of its own) of every operand
  // map to those of every output but the philox state.
  std::vector<AxisMapping> result;
  if (isPhilox(*this, producer) || isPhilox(*this, consumer)) {
    return result;
  }
  const std::vector<IterDomain*> p = producer->logicalNoReductions();
  const std::vector<IterDomain*>& c = consumer->maybeRoot();
  const size_t n = batchAxes();
  if (p.size() < n || c.size() < n) {
    return result;
  }
  for (size_t a = 0; a < n; ++a) {
    result.push_back({p[a], c[a]});
  }
  return result;
}

bool SdpaOp::takesOperandData(const TensorView* consumer) const {
  return !isPhilox(*this, consumer);
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
  SdpaOptions with_dropout = options;
  with_dropout.dropout_p = dropout_p;
  IrContainer* container = query->container();
  auto fresh = [](IterDomain* id) {
    return ops::freshAxis(id, IterType::Iteration);
  };
  // [batch axes..., S, Ev] and [batch axes..., S].
  std::vector<IterDomain*> out_ids;
  std::vector<IterDomain*> lse_ids;
  for (size_t a = 0; a + 1 < ids.q.size(); ++a) {
    out_ids.push_back(fresh(ids.q[a]));
    lse_ids.push_back(fresh(ids.q[a]));
  }
  out_ids.push_back(fresh(ids.v.back()));
  TensorView* output = ops::newTensor(container, out_ids, query->dtype());
  TensorView* lse = ops::newTensor(container, lse_ids, DataType::Float);
  // torch's flash attention state: rng_state [2] (seed and offset) and an
  // unused [] tensor.
  TensorView* seed = ops::newTensor(
      container,
      {container->create<IterDomain>(constant(container, 2))},
      DataType::UInt64);
  TensorView* offset = ops::newTensor(container, {}, DataType::UInt64);
  container
      ->create<SdpaOp>(
          OpType::SdpaFwd,
          std::vector<Val*>{output, lse, seed, offset},
          std::vector<Val*>{query, key, value},
          with_dropout)
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
    TensorView* philox_seed,
    TensorView* philox_offset,
    double dropout_p,
    const SdpaOptions& options) {
  const char* op = "sdpfa_bwd";
  ops::requireSameFusion(
      {grad_output, query, key, value, output, log_sumexp}, op);
  const Qkv ids = checkQkv(query, key, value, op);
  checkDropout(dropout_p, op);
  const size_t rank = ids.q.size();
  const std::vector<IterDomain*> g =
      requireQkvRank(grad_output, op, "grad_output");
  const std::vector<IterDomain*> o = requireQkvRank(output, op, "output");
  MDF_USER_CHECK(
      g.size() == rank && o.size() == rank,
      op,
      ": grad_output and output must have query's ",
      rank,
      " dimensions, got ",
      g.size(),
      " and ",
      o.size());
  ops::requireTensor(log_sumexp, op, "log_sumexp");
  const std::vector<IterDomain*> l = log_sumexp->logicalNoReductions();
  MDF_USER_CHECK(
      l.size() == rank - 1,
      op,
      ": log_sumexp must be ",
      rank - 1,
      "-dimensional [",
      rank == 5 ? "devices, " : "",
      "batch, heads, sequence], got ",
      l.size(),
      " dimensions");
  for (size_t i = 0; i < rank; ++i) {
    requireSame(g[i], o[i], op, "the shapes of grad_output and output");
  }
  for (size_t i = 0; i + 1 < rank; ++i) {
    requireSame(ids.q[i], o[i], op, "the shapes of query and output");
    requireSame(ids.q[i], l[i], op, "the shapes of query and log_sumexp");
  }
  requireSame(ids.v.back(), o.back(), op, "the head sizes of value and output");
  MDF_USER_CHECK(
      (philox_seed == nullptr) == (philox_offset == nullptr),
      op,
      ": philox_seed and philox_offset are given together or not at all");
  MDF_USER_CHECK(
      philox_seed != nullptr || dropout_p == 0.0,
      op,
      ": dropout_p=",
      dropout_p,
      " needs the philox_seed and philox_offset that sdpfa_fwd returned, "
      "got None");
  std::vector<Val*> inputs{grad_output, query, key, value, output, log_sumexp};
  if (philox_seed != nullptr) {
    checkPhilox(philox_seed, "philox_seed", 1);
    checkPhilox(philox_offset, "philox_offset", 0);
    ops::requireSameFusion({query, philox_seed, philox_offset}, op);
    inputs.push_back(philox_seed);
    inputs.push_back(philox_offset);
  }
  SdpaOptions with_dropout = options;
  with_dropout.dropout_p = dropout_p;
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
          std::move(inputs),
          with_dropout)
      ->registerAsDefinition();
  return {gq, gk, gv};
}

} // namespace mdfuser
