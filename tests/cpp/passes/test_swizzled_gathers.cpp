// SPDX-License-Identifier: MIT
//
// prepareSwizzledGathers: a swizzle1d'd stream split of a gather is the
// steps of a ring. The pass checks the schedule and makes the axis serial,
// so that the linear after the gather takes no stream split (lowering then
// makes the pair one allgather ring: tests/cpp/host_ir/test_lower.cpp).

#include <gtest/gtest.h>

#include "common/column_parallel.h"
#include "common/expect_error.h"
#include "multidevice/sharding.h"
#include "passes/pipeline.h"
#include "passes/swizzled_gathers.h"

namespace mdfuser {
namespace {

TEST(SwizzledGathers, TheSwizzledStreamSplitBecomesTheRingsSteps) {
  TensorView* g = nullptr;
  auto fusion = test::makeColumnParallelLinear(/*h=*/3, /*d=*/3, true, &g);
  EXPECT_NE(g->toString().find("swizzle1d(mesh_x)"), std::string::npos)
      << g->toString();
  prepareSwizzledGathers(fusion.get());
  EXPECT_EQ(loopAxis(g, ParallelType::Stream), nullptr) << g->toString();
  EXPECT_TRUE(hasSwizzledGather(g));

  auto compiled = test::makeColumnParallelLinear(/*h=*/3, /*d=*/3, true);
  runFusionPasses(compiled.get());
  TensorView* out = compiled->outputs()[0];
  EXPECT_EQ(loopAxis(out, ParallelType::Stream), nullptr)
      << "the linear takes no stream split: " << out->toString();
}

TEST(SwizzledGathers, ASwizzledAxisMustBeStreamParallel) {
  TensorView* g = nullptr;
  auto fusion = test::makeColumnParallelLinear(/*h=*/2, /*d=*/2, true, &g);
  g->parallelize(0, ParallelType::Serial);
  EXPECT_TRUE(test::throwsUserError(
      [&] { prepareSwizzledGathers(fusion.get()); },
      UserError::Kind::kValue,
      "not parallelized on ParallelType.stream"));
}

TEST(SwizzledGathers, TheSwizzleMustMatchTheInputsDeviceSplit) {
  // The gather's input split into 2 parts, the swizzled stream split into 4.
  auto fusion = std::make_unique<Fusion>();
  TensorView* inp = fusion->defineTensor({8, 2}, {}, DataType::Float);
  TensorView* g = set(inp);
  fusion->addOutput(g);
  const DeviceMesh mesh({0, 1});
  inp->setDeviceMesh(mesh);
  inp->outerSplit(0, 2);
  inp->parallelize(0, ParallelType::DIDx);
  g->setDeviceMesh(mesh);
  g->outerSplit(0, 4);
  g->swizzle1d(0, ParallelType::DIDx);
  g->parallelize(0, ParallelType::Stream);
  EXPECT_TRUE(test::throwsUserError(
      [&] { prepareSwizzledGathers(fusion.get()); },
      UserError::Kind::kValue,
      "does not match the split of its input"));
}

TEST(SwizzledGathers, ASwizzledTensorMustBeAGather) {
  auto fusion = std::make_unique<Fusion>();
  TensorView* inp = fusion->defineTensor({8, 2}, {}, DataType::Float);
  TensorView* r = unaryOp(OpType::Relu, inp);
  fusion->addOutput(r);
  r->setDeviceMesh(DeviceMesh({0, 1}));
  r->outerSplit(0, 2);
  r->swizzle1d(0, ParallelType::DIDx);
  r->parallelize(0, ParallelType::Stream);
  EXPECT_TRUE(test::throwsUserError(
      [&] { prepareSwizzledGathers(fusion.get()); },
      UserError::Kind::kValue,
      "is not defined by a set"));
}

TEST(SwizzledGathers, Swizzle1dChecksItsArguments) {
  Fusion fusion;
  TensorView* tv = fusion.defineTensor({8}, {}, DataType::Float);
  EXPECT_TRUE(test::throwsUserError(
      [&] { tv->swizzle1d(0, ParallelType::DIDx); },
      UserError::Kind::kValue,
      "must be the outer part of an outer split"));
  tv->outerSplit(0, 2);
  EXPECT_TRUE(test::throwsUserError(
      [&] { tv->swizzle1d(0, ParallelType::Stream); },
      UserError::Kind::kValue,
      "must be a device one"));
  EXPECT_TRUE(test::throwsUserError(
      [&] { tv->swizzle1d(1, ParallelType::DIDx); },
      UserError::Kind::kValue,
      "must be the outer part of an outer split"));
  tv->swizzle1d(0, ParallelType::DIDx);
  EXPECT_TRUE(test::throwsUserError(
      [&] { tv->swizzle1d(0, ParallelType::DIDx); },
      UserError::Kind::kValue,
      "already swizzled"));
}

} // namespace
} // namespace mdfuser
