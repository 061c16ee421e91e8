// SPDX-License-Identifier: MIT
//
// FuseLayerNorms replaces layer_norm compositions (as mdfuser.nn writes
// them) by one LayerNormOp where every device holds the normalized axis
// whole, and leaves every other composition alone.

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "common/host_ir_outline.h"
#include "host_ir/lower.h"
#include "host_ir/passes/fuse_layer_norms.h"
#include "host_ir/verifier.h"
#include "ir/literal.h"
#include "ir/ops.h"
#include "passes/pipeline.h"

namespace mdfuser {
namespace {

using namespace hir;

struct Options {
  DataType dtype = DataType::BFloat16;
  bool weight = true;
  bool bias = true;
  // Shards the normalized (last) axis across 2 devices instead of the
  // tokens.
  bool shard_hidden = false;
  // Also returns the centred values, which the fused kernel does not
  // produce.
  bool output_centred = false;
  // Casts the Float result back to the input's dtype.
  bool downcast = true;
  // Splits the tokens into 2 stream chunks, each then across the devices.
  bool streams = false;
};

// layer_norm of x [tokens, 8] over its last axis, from primitives, as
// mdfuser.nn.layer_norm writes it, then compiled for 2 devices.
std::unique_ptr<HostIrContainer> layerNorm(const Options& o) {
  auto fusion = std::make_unique<Fusion>();
  TensorView* x = fusion->defineTensor({-1, 8}, {}, o.dtype);
  TensorView* w = fusion->defineTensor({8}, {}, o.dtype);
  TensorView* b = fusion->defineTensor({8}, {}, o.dtype);
  const bool upcast = o.dtype != DataType::Float;
  auto up = [&](TensorView* tv) {
    return upcast ? cast(tv, DataType::Float) : tv;
  };
  TensorView* xf = up(x);
  TensorView* centred =
      binaryOp(OpType::Sub, xf, mean(xf, {1}, /*keepdim=*/true));
  TensorView* var =
      mean(binaryOp(OpType::Mul, centred, centred), {1}, /*keepdim=*/true);
  Val* eps = fusion->create<Literal>(1e-5, DataType::Double);
  TensorView* y = binaryOp(
      OpType::Mul,
      centred,
      unaryOp(OpType::Rsqrt, binaryOp(OpType::Add, var, eps)));
  if (o.weight) {
    y = binaryOp(OpType::Mul, y, up(w));
  }
  if (o.bias) {
    y = binaryOp(OpType::Add, y, up(b));
  }
  TensorView* out = upcast && o.downcast ? cast(y, o.dtype) : y;
  fusion->addOutput(out);
  if (o.output_centred) {
    fusion->addOutput(centred);
  }
  const DeviceMesh mesh({0, 1});
  for (TensorView* tv : {x, w, b}) {
    tv->setDeviceMesh(mesh);
  }
  if (o.streams) {
    x->outerSplit(0, 2);
    x->parallelize(0, ParallelType::Stream);
  }
  const int64_t axis = (o.shard_hidden ? 1 : 0) + (o.streams ? 1 : 0);
  x->outerSplit(axis, 2);
  x->parallelize(axis, ParallelType::DIDx);
  if (o.shard_hidden) {
    for (TensorView* param : {w, b}) {
      param->outerSplit(0, 2);
      param->parallelize(0, ParallelType::DIDx);
    }
  }
  runFusionPasses(fusion.get());
  return lowerToHostIr(std::move(fusion), {});
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t at = s.find(what); at != std::string::npos;
       at = s.find(what, at + 1)) {
    ++n;
  }
  return n;
}

TEST(FuseLayerNorms, ReducedPrecisionCompositionBecomesOneOperation) {
  auto hic = layerNorm({});
  const std::string before = test::outline(*hic);
  EXPECT_EQ(count(before, " = sum("), 2) << before;
  EXPECT_EQ(count(before, " = cast("), 4) << before;

  fuseLayerNorms(*hic);
  verify(*hic);
  // x's upcast, the two means, centring, square, eps, rsqrt, scaling,
  // weight and bias with their upcasts and the downcast: one operation on
  // x, w and b that writes the output.
  EXPECT_EQ(
      test::outline(*hic),
      "T" + std::to_string(hic->outputs()[0]->name()) +
          " = layer_norm(T0, T1, T2)\n");
  EXPECT_NE(hic->toString().find("normalized_ndim=1"), std::string::npos);
  EXPECT_NE(hic->toString().find("eps=1e-05"), std::string::npos);
}

TEST(FuseLayerNorms, FloatCompositionWithoutParameters) {
  auto hic =
      layerNorm({.dtype = DataType::Float, .weight = false, .bias = false});
  fuseLayerNorms(*hic);
  verify(*hic);
  EXPECT_EQ(
      test::outline(*hic),
      "T" + std::to_string(hic->outputs()[0]->name()) + " = layer_norm(T0)\n");
}

TEST(FuseLayerNorms, OnlyABiasIsTakenAsTheBias) {
  auto hic = layerNorm({.weight = false});
  fuseLayerNorms(*hic);
  const std::string after = test::outline(*hic);
  EXPECT_EQ(count(after, " = layer_norm(T0, T2)"), 1) << after;
  auto* op = dynamic_cast<const LayerNormOp*>(hic->topLevel().exprs().back());
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->weight(), nullptr);
  EXPECT_EQ(op->bias(), hic->inputs()[2]);
}

TEST(FuseLayerNorms, AFloatResultIsNormalizedAfterTheUpcasts) {
  // Without the cast back, the fused kernel runs on the Float values: the
  // upcasts of x, weight and bias stay.
  auto hic = layerNorm({.downcast = false});
  fuseLayerNorms(*hic);
  verify(*hic);
  const std::string after = test::outline(*hic);
  EXPECT_EQ(count(after, " = cast("), 3) << after;
  EXPECT_EQ(count(after, " = layer_norm("), 1) << after;
  auto* op = dynamic_cast<const LayerNormOp*>(hic->topLevel().exprs().back());
  ASSERT_NE(op, nullptr) << after;
  EXPECT_EQ(op->in()->dtype(), DataType::Float);
  EXPECT_EQ(op->weight()->dtype(), DataType::Float);
  EXPECT_EQ(op->out(), hic->outputs()[0]);
}

TEST(FuseLayerNorms, StreamChunksFuseWithTheirWeightAndBias) {
  // Lowering runs the upcasts of weight and bias once, in front of the
  // Stream loop; each chunk's composition, with its affine part and the
  // downcast, becomes one layer_norm of the chunk, the weight and the bias.
  auto hic = layerNorm({.streams = true});
  fuseLayerNorms(*hic);
  verify(*hic);
  const auto& top = hic->topLevel().exprs();
  ASSERT_EQ(top.size(), 1u) << test::outline(*hic);
  auto* loop = dynamic_cast<const ForLoop*>(top[0]);
  ASSERT_NE(loop, nullptr);
  const std::string body = test::outline(loop->body());
  EXPECT_EQ(count(body, " = cast("), 0) << body;
  ASSERT_EQ(count(body, " = layer_norm("), 1) << body;
  const LayerNormOp* op = nullptr;
  for (const Expr* e : loop->body().exprs()) {
    if (const auto* ln = dynamic_cast<const LayerNormOp*>(e)) {
      op = ln;
    }
  }
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->in()->dtype(), DataType::BFloat16);
  EXPECT_EQ(op->weight(), hic->inputs()[1]);
  EXPECT_EQ(op->bias(), hic->inputs()[2]);
}

TEST(FuseLayerNorms, ANormalizedAxisSplitAcrossDevicesStaysComposed) {
  // The sums are partial: an allreduce sits between each and its division.
  auto hic = layerNorm({.shard_hidden = true});
  const std::string before = test::outline(*hic);
  EXPECT_EQ(count(before, "Communication"), 2) << before;
  fuseLayerNorms(*hic);
  EXPECT_EQ(test::outline(*hic), before);
}

TEST(FuseLayerNorms, AnIntermediateTheProgramReturnsStaysComposed) {
  auto hic = layerNorm({.output_centred = true});
  const std::string before = test::outline(*hic);
  fuseLayerNorms(*hic);
  EXPECT_EQ(test::outline(*hic), before);
}

} // namespace
} // namespace mdfuser
