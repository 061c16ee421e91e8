// SPDX-License-Identifier: MIT
#include "ir/ops/creation.h"

#include "ir/container.h"
#include "ir/errors.h"
#include "ir/literal.h"
#include "ir/ops/builder.h"

namespace mdfuser {

CreationOp::CreationOp(
    IrContainer* container,
    OpType type,
    TensorView* out,
    std::vector<Val*> params,
    std::optional<RngSeed> rng)
    : TensorOp(container, type, withSeed(std::move(params), rng), {out}),
      seeded_(rng.has_value()) {
  MDF_CHECK(
      opInfo(type).family == OpFamily::kCreation,
      opName(),
      " is not a creation");
  MDF_CHECK(tensorInputs().empty(), opName(), " takes no tensor operands");
  MDF_CHECK(!seeded_ || isRandom(), opName(), " takes no seed");
}

std::vector<Val*> CreationOp::withSeed(
    std::vector<Val*> params, const std::optional<RngSeed>& rng) {
  if (rng.has_value()) {
    MDF_CHECK(rng->seed != nullptr && rng->offset != nullptr);
    params.push_back(rng->seed);
    params.push_back(rng->offset);
  }
  return params;
}

std::optional<RngSeed> CreationOp::rng() const {
  if (!seeded_) {
    return std::nullopt;
  }
  return RngSeed{inputs()[seedIndex()], inputs()[seedIndex() + 1]};
}

std::vector<AxisMapping> CreationOp::mapProducerToConsumer(
    const TensorView* producer, const TensorView* consumer) const {
  MDF_UNREACHABLE(
      opName(),
      " has no tensor operands, so ",
      producer->toString(),
      " maps nothing to ",
      consumer->toString());
}

TensorOp* CreationOp::recreate(
    IrContainer* container,
    std::vector<Val*> inputs,
    std::vector<Val*> outputs) const {
  MDF_CHECK_EQ(outputs.size(), size_t{1});
  MDF_CHECK_EQ(inputs.size(), this->inputs().size());
  std::optional<RngSeed> rng;
  if (seeded_) {
    rng = RngSeed{inputs[seedIndex()], inputs[seedIndex() + 1]};
    inputs.resize(seedIndex());
  }
  return container->create<CreationOp>(
      type(), static_cast<TensorView*>(outputs[0]), std::move(inputs), rng);
}

std::vector<std::string> CreationOp::attributes() const {
  std::vector<std::string> result;
  if (seeded_) {
    result.push_back("rng_seed=" + inputs()[seedIndex()]->toString());
    result.push_back("rng_offset=" + inputs()[seedIndex() + 1]->toString());
  }
  return result;
}

namespace {

// The output: one iteration axis per extent of `shape`.
TensorView* newOutput(
    IrContainer* container,
    const std::vector<Scalar*>& shape,
    DataType dtype,
    std::string_view op) {
  std::vector<IterDomain*> ids;
  for (size_t i = 0; i < shape.size(); ++i) {
    Scalar* extent = shape[i];
    MDF_CHECK(extent != nullptr);
    MDF_USER_CHECK(
        !extent->isConst() || extent->value() >= 0,
        op,
        ": shape[",
        i,
        "] is ",
        extent->isConst() ? extent->value() : 0,
        "; expected an extent >= 0 or a Scalar");
    ids.push_back(container->create<IterDomain>(extent));
  }
  return ops::newTensor(container, std::move(ids), dtype);
}

// A parameter: a Literal or an extent, not a tensor. `number` refuses
// Bool literals.
Val* requireParam(Val* val, std::string_view op, size_t index, bool number) {
  MDF_TYPE_CHECK(
      val != nullptr, op, ": operand ", index, " must be a number, got None");
  MDF_TYPE_CHECK(
      dynamic_cast<TensorView*>(val) == nullptr,
      op,
      ": operand ",
      index,
      " must be a number (a Python number, define_scalar or an extent), got "
      "the tensor ",
      val->toString());
  if (const auto* literal = dynamic_cast<const Literal*>(val)) {
    MDF_TYPE_CHECK(
        !number || literal->dtype() != DataType::Bool,
        op,
        ": operand ",
        index,
        " must be a number, got the Bool ",
        literal->toString());
  }
  return val;
}

// The value of a constant parameter; nothing for an extent or a scalar
// input, known at run time.
std::optional<double> constValue(const Val* val) {
  if (const auto* literal = dynamic_cast<const Literal*>(val)) {
    if (literal->isSymbolic()) {
      return std::nullopt;
    }
    return literal->asDouble();
  }
  if (const auto* scalar = dynamic_cast<const Scalar*>(val)) {
    if (scalar->isConst()) {
      return static_cast<double>(scalar->value());
    }
  }
  return std::nullopt;
}

bool isFloatingParam(const Val* val) {
  const auto* literal = dynamic_cast<const Literal*>(val);
  return literal != nullptr && isFloatingType(literal->dtype());
}

std::vector<Val*> withShape(
    std::vector<Val*> operands, const std::vector<Scalar*>& shape) {
  operands.insert(operands.end(), shape.begin(), shape.end());
  return operands;
}

TensorView* build(
    IrContainer* container,
    OpType type,
    const std::vector<Scalar*>& shape,
    DataType dtype,
    std::vector<Val*> params,
    std::optional<RngSeed> rng = std::nullopt) {
  TensorView* out = newOutput(container, shape, dtype, opName(type));
  container->create<CreationOp>(type, out, std::move(params), rng)
      ->registerAsDefinition();
  return out;
}

TensorView* random(
    OpType type,
    IrContainer* container,
    Val* a,
    Val* b,
    const std::vector<Scalar*>& shape,
    DataType dtype,
    std::optional<RngSeed> rng) {
  const std::string_view op = opName(type);
  ops::requireSameFusion(withShape({a, b}, shape), op);
  requireParam(a, op, 0, /*number=*/true);
  requireParam(b, op, 1, /*number=*/true);
  if (rng.has_value()) {
    ops::requireSameFusion({rng->seed, rng->offset}, op);
    for (const auto& [val, what] :
         {std::pair<const Val*, const char*>{rng->seed, "rng_seed"},
          {rng->offset, "rng_offset"}}) {
      const auto* literal = dynamic_cast<const Literal*>(val);
      MDF_TYPE_CHECK(
          literal != nullptr && isIntegralType(literal->dtype()),
          op,
          ": ",
          what,
          " must be an integer scalar, got ",
          val == nullptr ? std::string("None") : val->toString());
    }
  }
  MDF_TYPE_CHECK(
      isFloatingType(dtype),
      op,
      ": dtype must be a floating-point type (Float, Double, Half or "
      "BFloat16), got ",
      dtype);
  const std::optional<double> x = constValue(a);
  const std::optional<double> y = constValue(b);
  if (type == OpType::Uniform) {
    MDF_USER_CHECK(
        !x.has_value() || !y.has_value() || *x <= *y,
        "uniform: minval ",
        x.value_or(0),
        " is greater than maxval ",
        y.value_or(0),
        "; expected minval <= maxval");
  } else {
    MDF_USER_CHECK(
        !y.has_value() || *y >= 0,
        "normal: std is ",
        y.value_or(0),
        "; expected std >= 0");
  }
  return build(container, type, shape, dtype, {a, b}, rng);
}

} // namespace

TensorView* full(
    IrContainer* container,
    const std::vector<Scalar*>& shape,
    Val* fill_value,
    DataType dtype) {
  ops::requireSameFusion(withShape({fill_value}, shape), "full");
  requireParam(fill_value, "full", 1, /*number=*/false);
  MDF_TYPE_CHECK(dtype != DataType::Null, "full: dtype must not be Null");
  return build(container, OpType::Full, shape, dtype, {fill_value});
}

TensorView* iota(
    IrContainer* container,
    Scalar* length,
    Val* start,
    Val* step,
    DataType dtype) {
  ops::requireSameFusion({length, start, step}, "iota");
  MDF_TYPE_CHECK(
      isIntegralType(dtype) || isFloatingType(dtype),
      "iota: dtype must be an integer or floating-point type, got ",
      dtype);
  if (start == nullptr) {
    start = container->create<Literal>(int64_t{0}, DataType::Int);
  }
  if (step == nullptr) {
    step = container->create<Literal>(int64_t{1}, DataType::Int);
  }
  requireParam(start, "iota", 1, /*number=*/true);
  requireParam(step, "iota", 2, /*number=*/true);
  MDF_TYPE_CHECK(
      !isIntegralType(dtype) ||
          (!isFloatingParam(start) && !isFloatingParam(step)),
      "iota: an integer dtype (",
      dtype,
      ") takes integer start and step, got start ",
      start->toString(),
      " and step ",
      step->toString());
  return build(container, OpType::Iota, {length}, dtype, {start, step});
}

TensorView* uniform(
    IrContainer* container,
    Val* minval,
    Val* maxval,
    const std::vector<Scalar*>& shape,
    DataType dtype,
    std::optional<RngSeed> rng) {
  return random(OpType::Uniform, container, minval, maxval, shape, dtype, rng);
}

TensorView* normal(
    IrContainer* container,
    Val* mean,
    Val* std,
    const std::vector<Scalar*>& shape,
    DataType dtype,
    std::optional<RngSeed> rng) {
  return random(OpType::Normal, container, mean, std, shape, dtype, rng);
}

} // namespace mdfuser
