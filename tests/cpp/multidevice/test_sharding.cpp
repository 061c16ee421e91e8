// SPDX-License-Identifier: MIT
//
// Sharding queries read a tensor's loop domain: which axis carries a
// parallel type, which tensor axis it comes from, how large one device's
// shard or one stream chunk is, and whether an operation moves data between
// devices.

#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "common/row_parallel.h"
#include "ir/scalar_eval.h"
#include "multidevice/sharding.h"

namespace mdfuser {
namespace {

// Splits `axis` of `tv` into `parts` outer parts and parallelizes them.
void shard(TensorView* tv, int64_t axis, int64_t parts, ParallelType pt) {
  tv->outerSplit(axis, parts);
  tv->parallelize(axis, pt);
}

std::vector<std::string> strings(const std::vector<Scalar*>& scalars) {
  std::vector<std::string> result;
  for (Scalar* s : scalars) {
    result.push_back(s->toString());
  }
  return result;
}

using Strings = std::vector<std::string>;
using Types = std::vector<ParallelType>;

TEST(FindParallelAxis, TracesALoopAxisToItsSplitAndTensorAxis) {
  auto fusion = test::makeRowParallelLinear(/*h=*/4, /*d=*/2, /*s=*/3);
  TensorView* inp = fusion->inputs()[0];
  // inp: [istreamIdx{3}, iS{ceilDiv(i0, 3)}, ideviceIdx.x{2}, iS{8}]
  ParallelAxis device =
      findParallelAxis(inp, ParallelType::DIDx, inp->logical());
  ASSERT_TRUE(device);
  EXPECT_EQ(device.loop, inp->axis(2));
  EXPECT_EQ(device.source, inp->logical()[1]);
  ASSERT_NE(device.split, nullptr);
  EXPECT_EQ(device.split->in(), inp->logical()[1]);
  EXPECT_EQ(device.parts()->value(), 2);
  EXPECT_EQ(device.partExtent()->value(), 8);

  ParallelAxis stream =
      findParallelAxis(inp, ParallelType::Stream, inp->logical());
  ASSERT_TRUE(stream);
  EXPECT_EQ(stream.loop, inp->axis(0));
  EXPECT_EQ(stream.source, inp->logical()[0]);
  EXPECT_EQ(stream.partExtent()->toString(), "ceilDiv(i0, 3)");

  EXPECT_FALSE(findParallelAxis(inp, ParallelType::DIDy, inp->logical()));
  EXPECT_EQ(loopAxis(inp, ParallelType::DIDy), nullptr);
  EXPECT_EQ(loopAxis(inp, ParallelType::DIDx), inp->axis(2));
}

TEST(FindParallelAxis, AnUnsplitAxisIsItsOwnSourceWithPartsOfOne) {
  Fusion fusion;
  TensorView* tv = fusion.defineTensor({2, 8}, {}, DataType::Float);
  tv->parallelize(0, ParallelType::DIDx);
  ParallelAxis axis = findParallelAxis(tv, ParallelType::DIDx, tv->logical());
  EXPECT_EQ(axis.loop, tv->axis(0));
  EXPECT_EQ(axis.source, tv->axis(0));
  EXPECT_EQ(axis.split, nullptr);
  EXPECT_EQ(axis.parts()->value(), 2);
  EXPECT_EQ(axis.partExtent()->value(), 1);
}

TEST(FindParallelAxis, TheInnerPartOfASplitHasTheOuterExtentPerPart) {
  Fusion fusion;
  TensorView* tv = fusion.defineTensor({8}, {}, DataType::Float);
  tv->innerSplit(0, 2);
  tv->parallelize(1, ParallelType::DIDx);
  ParallelAxis axis = findParallelAxis(tv, ParallelType::DIDx, tv->logical());
  EXPECT_EQ(axis.split->inner(), axis.loop);
  EXPECT_EQ(axis.parts()->value(), 2);
  EXPECT_EQ(axis.partExtent()->value(), 4);
}

TEST(FindParallelAxis, AChainOfSplitsOfInnerParts) {
  // [S{2}, D{2}, rest{4}]: the device split cuts the inner part of the
  // first split; the outer part of the first is above it.
  Fusion fusion;
  TensorView* tv = fusion.defineTensor({16}, {}, DataType::Float);
  tv->outerSplit(0, 2);
  tv->outerSplit(1, 2);
  tv->parallelize(1, ParallelType::DIDx);
  ParallelAxis pa = findParallelAxis(tv, ParallelType::DIDx, tv->logical());
  EXPECT_EQ(pa.source, tv->logical()[0]);
  ASSERT_EQ(pa.above.size(), 1u);
  EXPECT_EQ(pa.above[0], tv->axis(0));
  EXPECT_EQ(pa.partExtent()->value(), 4);
  // Each device holds 2 runs of 4: 8 elements.
  EXPECT_EQ(localExtents(tv)[0]->value(), 8);
}

// A tensor of 16 elements whose device axis a test cuts, and extents to
// replay that cut on (-1: symbolic).
struct SplitsEvenlyCase {
  Fusion fusion;
  TensorView* tv = fusion.defineTensor({16}, {}, DataType::Float);

  ParallelAxis deviceAxis() {
    return findParallelAxis(tv, ParallelType::DIDx, tv->logical());
  }
  const Scalar* extent(int64_t e) {
    return fusion.defineTensor({e}, {}, DataType::Float)->axis(0)->extent();
  }
};

TEST(SplitsEvenly, ReplaysTheChainOfSplitsOnAnotherExtent) {
  // [S{2}, D{2}, rest]: an axis of 8 splits into 2 x 2 x 2, one of 6 does
  // not (3 rows per stream chunk across 2 devices), nor one of 2.
  SplitsEvenlyCase c;
  c.tv->outerSplit(0, 2);
  c.tv->outerSplit(1, 2);
  c.tv->parallelize(1, ParallelType::DIDx);
  const ParallelAxis pa = c.deviceAxis();
  EXPECT_TRUE(splitsEvenly(pa, c.extent(8)));
  EXPECT_TRUE(splitsEvenly(pa, c.extent(4)));
  EXPECT_FALSE(splitsEvenly(pa, c.extent(6)));
  EXPECT_FALSE(splitsEvenly(pa, c.extent(2)));
  // A symbolic extent is checked when the program runs.
  EXPECT_TRUE(splitsEvenly(pa, c.extent(-1)));
}

TEST(SplitsEvenly, AnInnerSplitFixesThePartSize) {
  // [rest, D{4}]: each of 4 devices holds a strided quarter, of any
  // multiple of 4.
  SplitsEvenlyCase c;
  c.tv->innerSplit(0, 4);
  c.tv->parallelize(1, ParallelType::DIDx);
  const ParallelAxis pa = c.deviceAxis();
  EXPECT_TRUE(splitsEvenly(pa, c.extent(12)));
  EXPECT_FALSE(splitsEvenly(pa, c.extent(10)));
}

TEST(FindParallelAxis, AnAxisFromTheOuterPartOfASplitIsAUserError) {
  Fusion fusion;
  TensorView* tv = fusion.defineTensor({16}, {}, DataType::Float);
  tv->outerSplit(0, 4);
  tv->outerSplit(0, 2);
  tv->parallelize(0, ParallelType::DIDx);
  EXPECT_VALUE_ERROR(
      findParallelAxis(tv, ParallelType::DIDx, tv->logical()),
      "derives from the outer part of a split");
}

TEST(Sharding, TwoDimensionalMesh) {
  Fusion fusion;
  TensorView* tv = fusion.defineTensor({4, 6}, {}, DataType::Float);
  tv->setDeviceMesh(DeviceMesh({0, 1, 2, 3, 4, 5}, {2, 3}));
  shard(tv, 1, 3, ParallelType::DIDx);
  shard(tv, 0, 2, ParallelType::DIDy);
  EXPECT_TRUE(isSharded(tv));
  EXPECT_EQ(
      deviceParallelTypes(tv), (Types{ParallelType::DIDx, ParallelType::DIDy}));
  EXPECT_EQ(
      shardingOfLogicalAxes(tv),
      (Types{ParallelType::DIDy, ParallelType::DIDx}));
  EXPECT_EQ(strings(localExtents(tv)), (Strings{"2", "2"}));
}

TEST(Sharding, LocalExtentsOfTheRowParallelOperands) {
  auto fusion = test::makeRowParallelLinear(/*h=*/4, /*d=*/2, /*s=*/3);
  TensorView* inp = fusion->inputs()[0];
  TensorView* w = fusion->inputs()[1];
  // A stream split is not a shard: the local tensor keeps all i0 rows.
  EXPECT_EQ(strings(localExtents(inp)), (Strings{"i0", "8"}));
  EXPECT_EQ(strings(localExtents(w)), (Strings{"4", "8"}));
  EXPECT_EQ(
      shardingOfLogicalAxes(w),
      (Types{ParallelType::Serial, ParallelType::DIDx}));
  EXPECT_EQ(deviceParallelTypes(inp), Types{ParallelType::DIDx});

  // The output's sharded axis is a reduction: it holds no data.
  TensorView* out = fusion->outputs()[0];
  EXPECT_FALSE(isSharded(out));
  shard(out, 2, 2, ParallelType::DIDx);
  EXPECT_TRUE(isSharded(out));
  EXPECT_EQ(strings(localExtents(out)), (Strings{"i0", "4"}));
  EXPECT_EQ(
      shardingOfLogicalAxes(out),
      (Types{ParallelType::Serial, ParallelType::Serial}));
}

TEST(Sharding, AWholeDeviceParallelAxisIsOneElementPerDevice) {
  Fusion fusion;
  TensorView* tv = fusion.defineTensor({2, 8}, {}, DataType::Float);
  tv->parallelize(0, ParallelType::DIDx);
  EXPECT_EQ(strings(localExtents(tv)), (Strings{"1", "8"}));
}

// Evaluates the chunk of `tv` for `index` given the extent of its symbolic
// axis.
std::pair<int64_t, int64_t> evaluateChunk(
    TensorView* tv, Scalar* extent, int64_t extent_value, int64_t index) {
  Scalar* i = symbol(tv->container());
  StreamChunk chunk = streamChunk(tv, i);
  ScalarEvaluator eval;
  eval.bind(extent, extent_value);
  eval.bind(i, index);
  return {eval.evaluate(chunk.start), eval.evaluate(chunk.length)};
}

TEST(StreamChunk, ChunksCoverTheAxisAndTheLastMayBeShortOrEmpty) {
  auto fusion = test::makeRowParallelLinear(/*h=*/4, /*d=*/2, /*s=*/3);
  TensorView* inp = fusion->inputs()[0];
  Scalar* t = inp->logical()[0]->extent();
  Scalar* index = symbol(fusion.get());
  StreamChunk chunk = streamChunk(inp, index);
  EXPECT_EQ(chunk.axis, 0);

  using Chunk = std::pair<int64_t, int64_t>;
  EXPECT_EQ(evaluateChunk(inp, t, 10, 0), (Chunk{0, 4}));
  EXPECT_EQ(evaluateChunk(inp, t, 10, 1), (Chunk{4, 4}));
  EXPECT_EQ(evaluateChunk(inp, t, 10, 2), (Chunk{8, 2}));
  EXPECT_EQ(evaluateChunk(inp, t, 4, 1), (Chunk{2, 2}));
  EXPECT_EQ(evaluateChunk(inp, t, 4, 2), (Chunk{4, 0}));
  // More chunks than rows: the trailing chunks are empty and start within
  // the axis.
  const Chunk empty = evaluateChunk(inp, t, 1, 2);
  EXPECT_LE(empty.first, 1);
  EXPECT_EQ(empty.second, 0);
}

TEST(StreamChunk, AxisIsTheLocalPositionOfTheStreamSplitAxis) {
  Fusion fusion;
  TensorView* tv = fusion.defineTensor({16, -1}, {}, DataType::Float);
  tv->setDeviceMesh(DeviceMesh({0, 1}));
  shard(tv, 0, 2, ParallelType::DIDx);
  shard(tv, 2, 4, ParallelType::Stream);
  EXPECT_EQ(streamChunk(tv, symbol(&fusion)).axis, 1);
  using Chunk = std::pair<int64_t, int64_t>;
  EXPECT_EQ(evaluateChunk(tv, tv->logical()[1]->extent(), 8, 3), (Chunk{6, 2}));
}

TEST(StreamChunk, MisuseIsAnInternalError) {
  Fusion fusion;
  TensorView* plain = fusion.defineTensor({8}, {}, DataType::Float);
  EXPECT_INTERNAL_ERROR(
      streamChunk(plain, symbol(&fusion)), "has no stream axis");

  TensorView* inner = fusion.defineTensor({8}, {}, DataType::Float);
  inner->innerSplit(0, 2);
  inner->parallelize(1, ParallelType::Stream);
  EXPECT_INTERNAL_ERROR(
      streamChunk(inner, symbol(&fusion)), "is the inner part of a split");
}

TEST(StreamChunk, AStreamSplitAboveADeviceSplitChunksEachDevicesRuns) {
  // [stream{2}, device{2}, rest{3}] on 12 elements: each device holds 2 runs
  // of 3, chunk i is run i.
  Fusion fusion;
  TensorView* tv = fusion.defineTensor({12}, {}, DataType::Float);
  tv->setDeviceMesh(DeviceMesh({0, 1}));
  shard(tv, 0, 2, ParallelType::Stream);
  shard(tv, 1, 2, ParallelType::DIDx);
  EXPECT_EQ(localExtents(tv)[0]->value(), 6);
  using Chunk = std::pair<int64_t, int64_t>;
  Scalar* unused = symbol(&fusion);
  EXPECT_EQ(evaluateChunk(tv, unused, 0, 0), (Chunk{0, 3}));
  EXPECT_EQ(evaluateChunk(tv, unused, 0, 1), (Chunk{3, 3}));
}

// x: [8, 4] on two devices, sharded on the axes given (-1: not sharded);
// returns set(x) sharded on `y_axis`.
LoadStoreOp* makeSet(Fusion& fusion, int64_t x_axis, int64_t y_axis) {
  TensorView* x = fusion.defineTensor({8, 4}, {}, DataType::Float);
  TensorView* y = set(x);
  for (TensorView* tv : {x, y}) {
    tv->setDeviceMesh(DeviceMesh({0, 1}));
  }
  if (x_axis >= 0) {
    shard(x, x_axis, 2, ParallelType::DIDx);
  }
  if (y_axis >= 0) {
    shard(y, y_axis, 2, ParallelType::DIDx);
  }
  fusion.addOutput(y);
  return static_cast<LoadStoreOp*>(y->definition());
}

TEST(IsResharding, SetsThatChangeTheShardingMoveData) {
  Fusion fusion;
  EXPECT_FALSE(isResharding(makeSet(fusion, -1, -1)));
  EXPECT_FALSE(isResharding(makeSet(fusion, 0, 0)));
  EXPECT_FALSE(isResharding(makeSet(fusion, 1, 1)));
  EXPECT_TRUE(isResharding(makeSet(fusion, 0, -1)));
  EXPECT_TRUE(isResharding(makeSet(fusion, -1, 0)));
  EXPECT_TRUE(isResharding(makeSet(fusion, 0, 1)));
}

TEST(IsResharding, ChangingTheMeshMovesData) {
  Fusion fusion;
  LoadStoreOp* op = makeSet(fusion, -1, -1);
  op->out()->setDeviceMesh(DeviceMesh({2, 3}));
  EXPECT_TRUE(isResharding(op));
}

TEST(IsResharding, StreamSplitsDoNotMoveData) {
  Fusion fusion;
  LoadStoreOp* op = makeSet(fusion, 0, 0);
  shard(op->in(), 2, 2, ParallelType::Stream);
  EXPECT_FALSE(isResharding(op));
}

TEST(IsResharding, RowParallelLinearReducesAcrossDevices) {
  auto fusion = test::makeRowParallelLinear(/*h=*/4, /*d=*/2, /*s=*/3);
  TensorView* out = fusion->outputs()[0];
  out->setDeviceMesh(DeviceMesh({0, 1}));
  // As propagation would: in_features is the reduction axis.
  shard(out, 2, 2, ParallelType::DIDx);
  EXPECT_TRUE(isResharding(static_cast<TensorOp*>(out->definition())));
}

TEST(IsResharding, ColumnParallelLinearIsLocal) {
  // inp replicated, weight and output sharded on out_features: each device
  // computes its own columns from data it already has.
  Fusion fusion;
  TensorView* inp = fusion.defineTensor({-1, 8}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({4, 8}, {}, DataType::Float);
  TensorView* out = linear(inp, w);
  fusion.addOutput(out);
  for (TensorView* tv : {inp, w, out}) {
    tv->setDeviceMesh(DeviceMesh({0, 1}));
  }
  shard(w, 0, 2, ParallelType::DIDx);
  shard(out, 1, 2, ParallelType::DIDx);
  EXPECT_FALSE(isResharding(static_cast<TensorOp*>(out->definition())));
}

} // namespace
} // namespace mdfuser
