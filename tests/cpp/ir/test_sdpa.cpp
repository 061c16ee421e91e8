// SPDX-License-Identifier: MIT
//
// Flash attention forward and backward: output shapes and dtypes, the
// batch and head axes that every operand maps to every output (attention
// shards on them), the printed options, and the operand errors.

#include <gtest/gtest.h>

#include "common/axis_map.h"
#include "common/expect_error.h"
#include "ir/fusion.h"
#include "ir/ops.h"

namespace mdfuser {
namespace {

using test::AxisPairs;
using test::extents;
using test::pairs;

class Sdpa : public ::testing::Test {
 protected:
  TensorView* define(
      std::vector<int64_t> shape, DataType dtype = DataType::BFloat16) {
    return fusion.defineTensor(shape, {}, dtype);
  }

  Fusion fusion;
};

TEST_F(Sdpa, ForwardOutputs) {
  TensorView* q = define({2, 4, -1, 8});
  TensorView* k = define({2, 4, 16, 8});
  TensorView* v = define({2, 4, 16, 8});
  SdpaFwdResult r = sdpfaFwd(q, k, v, 0.0, {});
  EXPECT_EQ(extents(r.output->logical()), "2 4 i0 8");
  EXPECT_EQ(r.output->dtype(), DataType::BFloat16);
  EXPECT_EQ(extents(r.log_sumexp->logical()), "2 4 i0");
  EXPECT_EQ(r.log_sumexp->dtype(), DataType::Float);
  EXPECT_EQ(extents(r.philox_seed->logical()), "2");
  EXPECT_EQ(r.philox_seed->dtype(), DataType::UInt64);
  EXPECT_TRUE(r.philox_offset->logical().empty());
  EXPECT_EQ(r.philox_offset->dtype(), DataType::UInt64);
  auto* op = dynamic_cast<SdpaOp*>(r.output->definition());
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->type(), OpType::SdpaFwd);
  EXPECT_EQ(op->outs().size(), 4u);
  EXPECT_EQ(r.log_sumexp->definition(), op);
  EXPECT_FALSE(op->options().is_causal);
  EXPECT_FALSE(op->options().scale.has_value());
}

TEST_F(Sdpa, BatchAndHeadsMapToEveryOutputTheRestToNothing) {
  TensorView* q = define({2, 4, 16, 8});
  TensorView* k = define({2, 4, 32, 8});
  TensorView* v = define({2, 4, 32, 8});
  SdpaFwdResult r = sdpfaFwd(q, k, v, 0.0, {});
  auto* op = static_cast<TensorOp*>(r.output->definition());
  for (TensorView* in : {q, k, v}) {
    for (TensorView* out : {r.output, r.log_sumexp}) {
      EXPECT_EQ(
          pairs(op->mapProducerToConsumer(in, out)),
          (AxisPairs{
              {in->logical()[0], out->logical()[0]},
              {in->logical()[1], out->logical()[1]}}));
    }
    EXPECT_TRUE(op->mapProducerToConsumer(in, r.philox_seed).empty());
    EXPECT_TRUE(op->mapProducerToConsumer(in, r.philox_offset).empty());
  }
  EXPECT_TRUE(op->takesOperandData(r.output));
  EXPECT_FALSE(op->takesOperandData(r.philox_seed));
  EXPECT_FALSE(op->takesOperandData(r.philox_offset));
}

TEST_F(Sdpa, AFiveDimensionalQueryMapsItsDeviceBatchAndHeadAxes) {
  TensorView* q = define({2, 3, 4, 16, 8});
  TensorView* k = define({2, 3, 4, 32, 8});
  SdpaFwdResult r = sdpfaFwd(q, k, k, 0.0, {});
  EXPECT_EQ(extents(r.output->logical()), "2 3 4 16 8");
  EXPECT_EQ(extents(r.log_sumexp->logical()), "2 3 4 16");
  auto* op = static_cast<SdpaOp*>(r.output->definition());
  EXPECT_EQ(op->batchAxes(), 3u);
  EXPECT_EQ(
      pairs(op->mapProducerToConsumer(k, r.log_sumexp)),
      (AxisPairs{
          {k->logical()[0], r.log_sumexp->logical()[0]},
          {k->logical()[1], r.log_sumexp->logical()[1]},
          {k->logical()[2], r.log_sumexp->logical()[2]}}));
  TensorView* grad = define({2, 3, 4, 16, 8});
  SdpaBwdResult b = sdpfaBwd(
      grad,
      q,
      k,
      k,
      r.output,
      r.log_sumexp,
      r.philox_seed,
      r.philox_offset,
      0.0,
      {});
  EXPECT_EQ(extents(b.grad_key->logical()), "2 3 4 32 8");
}

TEST_F(Sdpa, DropoutIsAnOptionAndTheBackwardTakesThePhiloxState) {
  TensorView* q = define({2, 4, 16, 8});
  SdpaFwdResult f = sdpfaFwd(q, q, q, 0.25, {});
  auto* fwd = static_cast<SdpaOp*>(f.output->definition());
  EXPECT_EQ(fwd->options().dropout_p, 0.25);
  EXPECT_NE(fwd->toString().find("dropout_p=0.25"), std::string::npos)
      << fwd->toString();
  SdpaBwdResult b = sdpfaBwd(
      q,
      q,
      q,
      q,
      f.output,
      f.log_sumexp,
      f.philox_seed,
      f.philox_offset,
      0.25,
      {});
  auto* bwd = static_cast<SdpaOp*>(b.grad_query->definition());
  EXPECT_EQ(bwd->inputs().size(), 8u);
  EXPECT_EQ(bwd->options().dropout_p, 0.25);
  EXPECT_TRUE(bwd->mapProducerToConsumer(f.philox_seed, b.grad_query).empty());
}

TEST_F(Sdpa, OptionsArePrinted) {
  TensorView* q = define({1, 2, 4, 8});
  SdpaOptions options;
  options.is_causal = true;
  options.scale = 0.25;
  SdpaFwdResult r = sdpfaFwd(q, q, q, 0.0, options);
  const std::string text = r.output->definition()->toString();
  EXPECT_NE(
      text.find(
          ",\n               is_causal=true,\n               scale=0.25)"),
      std::string::npos)
      << text;
  auto* op = static_cast<SdpaOp*>(r.output->definition());
  auto* copy =
      dynamic_cast<SdpaOp*>(op->withTensors(op->outs(), op->tensorInputs()));
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->type(), OpType::SdpaFwd);
  EXPECT_TRUE(copy->options().is_causal);
  EXPECT_EQ(copy->options().scale, 0.25);
}

TEST_F(Sdpa, BackwardGradientsAreShapedLikeTheirInputs) {
  TensorView* q = define({2, 4, 16, 8});
  TensorView* k = define({2, 4, 32, 8});
  TensorView* v = define({2, 4, 32, 8});
  SdpaFwdResult f = sdpfaFwd(q, k, v, 0.0, {});
  TensorView* grad = define({2, 4, 16, 8});
  SdpaBwdResult b = sdpfaBwd(
      grad, q, k, v, f.output, f.log_sumexp, nullptr, nullptr, 0.0, {});
  EXPECT_EQ(extents(b.grad_query->logical()), "2 4 16 8");
  EXPECT_EQ(extents(b.grad_key->logical()), "2 4 32 8");
  EXPECT_EQ(extents(b.grad_value->logical()), "2 4 32 8");
  EXPECT_EQ(b.grad_key->dtype(), DataType::BFloat16);
  auto* op = dynamic_cast<SdpaOp*>(b.grad_query->definition());
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->type(), OpType::SdpaBwd);
  EXPECT_EQ(op->inputs().size(), 6u);
  EXPECT_EQ(
      pairs(op->mapProducerToConsumer(f.log_sumexp, b.grad_value)),
      (AxisPairs{
          {f.log_sumexp->logical()[0], b.grad_value->logical()[0]},
          {f.log_sumexp->logical()[1], b.grad_value->logical()[1]}}));
}

TEST_F(Sdpa, ForwardErrors) {
  TensorView* q = define({2, 4, 16, 8});
  TensorView* heads3 = define({2, 3, 16, 8});
  TensorView* size6 = define({2, 4, 16, 6});
  TensorView* batch1 = define({1, 4, 16, 8});
  TensorView* rank3 = define({4, 16, 8});
  TensorView* ints = define({2, 4, 16, 8}, DataType::Int);
  TensorView* half = define({2, 4, 16, 8}, DataType::Half);
  EXPECT_VALUE_ERROR(
      sdpfaFwd(q, heads3, q, 0.0, {}),
      "sdpfa_fwd: the numbers of heads of query and key must match, got 4 and "
      "3");
  EXPECT_VALUE_ERROR(
      sdpfaFwd(q, q, heads3, 0.0, {}),
      "the numbers of heads of query and value must match");
  EXPECT_VALUE_ERROR(
      sdpfaFwd(q, size6, q, 0.0, {}),
      "the head sizes of query and key must match, got 8 and 6");
  EXPECT_VALUE_ERROR(
      sdpfaFwd(q, q, size6, 0.0, {}),
      "the head sizes of query and value must match, got 8 and 6");
  EXPECT_VALUE_ERROR(
      sdpfaFwd(q, batch1, q, 0.0, {}),
      "the batch sizes of query and key must match, got 2 and 1");
  EXPECT_VALUE_ERROR(
      sdpfaFwd(rank3, q, q, 0.0, {}),
      "sdpfa_fwd: query must be 4-dimensional [batch, heads, sequence, head "
      "size] or 5-dimensional");
  EXPECT_TYPE_ERROR(
      sdpfaFwd(q, q, ints, 0.0, {}),
      "sdpfa_fwd: value must be a floating-point tensor, got Int");
  EXPECT_TYPE_ERROR(
      sdpfaFwd(q, half, q, 0.0, {}),
      "query, key and value must have one dtype, got BFloat16 and Half");
  EXPECT_VALUE_ERROR(
      sdpfaFwd(q, q, q, 1.0, {}),
      "sdpfa_fwd: dropout_p=1 is out of range; expected a probability in "
      "[0, 1)");
  EXPECT_VALUE_ERROR(
      sdpfaFwd(q, q, q, -0.5, {}), "sdpfa_fwd: dropout_p=-0.5 is out of range");
  EXPECT_VALUE_ERROR(
      sdpfaFwd(q, q, define({2, 4, 16, 8, 1}), 0.0, {}),
      "sdpfa_fwd: query, key and value must have one rank, got 4 and 5");
  EXPECT_TYPE_ERROR(
      sdpfaFwd(q, nullptr, q, 0.0, {}), "sdpfa_fwd: key must be a tensor");
}

TEST_F(Sdpa, BackwardErrors) {
  TensorView* q = define({2, 4, 16, 8});
  SdpaFwdResult f = sdpfaFwd(q, q, q, 0.0, {});
  TensorView* short_grad = define({2, 4, 15, 8});
  auto bwd = [&](TensorView* grad,
                 TensorView* lse,
                 TensorView* seed,
                 TensorView* offset,
                 double p) {
    return sdpfaBwd(grad, q, q, q, f.output, lse, seed, offset, p, {});
  };
  EXPECT_VALUE_ERROR(
      bwd(short_grad, f.log_sumexp, nullptr, nullptr, 0.0),
      "sdpfa_bwd: the shapes of grad_output and output must match, got 15 and "
      "16");
  EXPECT_VALUE_ERROR(
      bwd(q, f.output, nullptr, nullptr, 0.0),
      "sdpfa_bwd: log_sumexp must be 3-dimensional [batch, heads, sequence], "
      "got 4");
  EXPECT_VALUE_ERROR(
      bwd(q, f.log_sumexp, nullptr, nullptr, 0.5),
      "sdpfa_bwd: dropout_p=0.5 needs the philox_seed and philox_offset that "
      "sdpfa_fwd returned, got None");
  EXPECT_VALUE_ERROR(
      bwd(q, f.log_sumexp, f.philox_seed, nullptr, 0.5),
      "philox_seed and philox_offset are given together or not at all");
  EXPECT_TYPE_ERROR(
      bwd(q, f.log_sumexp, define({2}, DataType::Int), f.philox_offset, 0.5),
      "sdpfa_bwd: philox_seed must be a UInt64 tensor of shape [2] (as "
      "sdpfa_fwd returns it), got Int");
  EXPECT_VALUE_ERROR(
      bwd(q, f.log_sumexp, define({3}, DataType::UInt64), f.philox_offset, 0.5),
      "sdpfa_bwd: philox_seed must have shape [2]");
  EXPECT_VALUE_ERROR(
      bwd(q, f.log_sumexp, f.philox_seed, f.philox_seed, 0.5),
      "sdpfa_bwd: philox_offset must have shape []");
  EXPECT_VALUE_ERROR(
      bwd(q, f.log_sumexp, f.philox_seed, f.philox_offset, 1.5),
      "sdpfa_bwd: dropout_p=1.5 is out of range");
}

} // namespace
} // namespace mdfuser
