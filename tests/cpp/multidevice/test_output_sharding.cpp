// SPDX-License-Identifier: MIT
//
// The claims of an operation's producers decide the sharding its output can
// be computed with locally; replayAxis copies how one tensor's axis is cut
// onto another's.

#include <numeric>

#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "ir/fusion.h"
#include "ir/ops.h"
#include "multidevice/output_sharding.h"

namespace mdfuser {
namespace {

const DeviceMesh kMesh({0, 1});
constexpr ParallelType kX = ParallelType::DIDx;

void shard(TensorView* tv, int64_t axis, ParallelType pt = kX) {
  tv->outerSplit(axis, 2);
  tv->parallelize(axis, pt);
}

std::string loopString(const TensorView* tv) {
  std::string s;
  for (const IterDomain* id : tv->loop()) {
    s += (s.empty() ? "" : " ") + id->toString();
  }
  return s;
}

struct Linear {
  Fusion fusion;
  TensorView* in = fusion.defineTensor({8, 4}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({6, 4}, {}, DataType::Float);
  TensorView* out = linear(in, w);
  const TensorOp* op = static_cast<const TensorOp*>(out->definition());

  Linear() {
    in->setDeviceMesh(kMesh);
    w->setDeviceMesh(kMesh);
  }
};

TEST(OutputClaims, TheWeightDecidesBeforeTheInput) {
  // Sequence parallel: rows of the input and out_features of the weight
  // both on mesh_x; the weight claims it.
  Linear l;
  shard(l.in, 0);
  shard(l.w, 0);
  l.out->setDeviceMesh(kMesh);
  const std::vector<Claim> claims = outputClaims(l.op, kMesh);
  ASSERT_EQ(claims.size(), 1u);
  EXPECT_EQ(claims[0].producer, l.w);
  EXPECT_FALSE(claims[0].partial);
  EXPECT_EQ(claimedAxis(l.op, claims[0], l.out), l.out->logical()[1]);
  EXPECT_TRUE(conformsToClaims(l.op, claims, l.w, l.out));
  EXPECT_FALSE(conformsToClaims(l.op, claims, l.in, l.out))
      << "the input must be gathered";
}

TEST(OutputClaims, AKeptAxisBeforeAReducedOne) {
  // A weight gradient: grad^T [6, 8] sharded on its rows (kept), x [8, 4]
  // sharded on its rows (reduced). The kept sharding wins: x is gathered
  // rather than a weight-sized result allreduced.
  Fusion fusion;
  TensorView* grad_t = fusion.defineTensor({6, 8}, {}, DataType::Float);
  TensorView* x = fusion.defineTensor({8, 4}, {}, DataType::Float);
  TensorView* out = matmul(grad_t, x);
  for (TensorView* tv : {grad_t, x}) {
    tv->setDeviceMesh(kMesh);
    shard(tv, 0);
  }
  const auto* op = static_cast<const TensorOp*>(out->definition());
  const std::vector<Claim> claims = outputClaims(op, kMesh);
  ASSERT_EQ(claims.size(), 1u);
  EXPECT_EQ(claims[0].producer, grad_t);
  EXPECT_FALSE(claims[0].partial);
}

TEST(OutputClaims, AContractedShardingLeavesPartialResults) {
  Linear l;
  shard(l.in, 1);
  shard(l.w, 1);
  l.out->setDeviceMesh(kMesh);
  const std::vector<Claim> claims = outputClaims(l.op, kMesh);
  ASSERT_EQ(claims.size(), 1u);
  EXPECT_TRUE(claims[0].partial);
  EXPECT_TRUE(claimedAxis(l.op, claims[0], l.out)->isReduction());
  EXPECT_TRUE(conformsToClaims(l.op, claims, l.in, l.out));
  EXPECT_TRUE(conformsToClaims(l.op, claims, l.w, l.out));
}

TEST(OutputClaims, ProducersOnAnotherMeshClaimNothing) {
  Linear l;
  shard(l.w, 0);
  EXPECT_TRUE(outputClaims(l.op, DeviceMesh({2, 3})).empty());
  EXPECT_FALSE(conformsToClaims(l.op, {}, l.w, l.out));
}

TEST(OutputClaims, AReshapePartTooSmallForTheMeshClaimsNothing) {
  // x [8, 8] with axis 0 across the mesh, reshaped to [4, 2, 8]: axis 0 of
  // the output (4) splits across 2 or 4 devices, not 8.
  for (const int64_t devices : {2, 4, 8}) {
    Fusion fusion;
    TensorView* x = fusion.defineTensor({8, 8}, {}, DataType::Float);
    TensorView* y = reshape(
        x, {constant(&fusion, 4), constant(&fusion, 2), constant(&fusion, 8)});
    std::vector<int64_t> ranks(devices);
    std::iota(ranks.begin(), ranks.end(), 0);
    const DeviceMesh mesh(ranks);
    x->setDeviceMesh(mesh);
    x->outerSplit(0, devices);
    x->parallelize(0, kX);
    const auto* op = static_cast<const TensorOp*>(y->definition());
    const std::vector<Claim> claims = outputClaims(op, mesh);
    if (devices == 8) {
      EXPECT_TRUE(claims.empty());
      EXPECT_FALSE(conformsToClaims(op, claims, x, y, &mesh));
      continue;
    }
    ASSERT_EQ(claims.size(), 1u) << devices << " devices";
    EXPECT_EQ(claimedAxis(op, claims[0], y), y->logical()[0]);
  }
}

TEST(MatchesClaims, TheConsumerMustBeCutLikeTheClaimingProducer) {
  Linear l;
  shard(l.w, 0);
  const std::vector<Claim> claims = outputClaims(l.op, kMesh);
  EXPECT_FALSE(matchesClaims(l.op, claims, l.out));
  l.out->setDeviceMesh(kMesh);
  applyClaims(l.op, claims, l.out, l.out);
  EXPECT_TRUE(matchesClaims(l.op, claims, l.out));
  EXPECT_EQ(loopString(l.out), "iS4{8} ideviceIdx.x9{2} iS10{3} rS6{4}");
}

TEST(ReplayAxis, CopiesAChainWithTheTakenParallelTypes) {
  // from: [stream{2}, device{2}, rest{3}] on 12 elements.
  Fusion fusion;
  TensorView* from = fusion.defineTensor({12}, {}, DataType::Float);
  shard(from, 0, ParallelType::Stream);
  shard(from, 1);

  TensorView* both = fusion.defineTensor({12}, {}, DataType::Float);
  replayAxis(
      from,
      from->logical()[0],
      both,
      both->axis(0),
      {ParallelType::Stream, kX});
  EXPECT_EQ(loopString(both), "istreamIdx6{2} ideviceIdx.x8{2} iS9{3}");

  // Without the stream: the split above the device one stays, serial, so
  // that each device holds the same elements.
  TensorView* device = fusion.defineTensor({12}, {}, DataType::Float);
  replayAxis(from, from->logical()[0], device, device->axis(0), {kX});
  EXPECT_EQ(loopString(device), "iS11{2} ideviceIdx.x13{2} iS14{3}");

  // Only the stream: nothing below it is replayed.
  TensorView* stream = fusion.defineTensor({12}, {}, DataType::Float);
  replayAxis(
      from,
      from->logical()[0],
      stream,
      stream->axis(0),
      {ParallelType::Stream});
  EXPECT_EQ(loopString(stream), "istreamIdx16{2} iS17{6}");
}

TEST(StreamCanFollow, OnlyWithTheDeviceSplitsAboveIt) {
  Fusion fusion;
  TensorView* tv = fusion.defineTensor({12}, {}, DataType::Float);
  shard(tv, 0);
  shard(tv, 1, ParallelType::Stream);
  ParallelAxis stream =
      findParallelAxis(tv, ParallelType::Stream, tv->logical());
  EXPECT_FALSE(streamCanFollow(stream, {}));
  EXPECT_TRUE(streamCanFollow(stream, {kX}));
}

} // namespace
} // namespace mdfuser
