// SPDX-License-Identifier: MIT
//
// decomposeShardedCreations: a sharded iota, uniform or normal computes the
// whole tensor, replicated on the output's mesh, and a set takes each
// device's part; a sharded full and unsharded creations stay as they are.

#include <gtest/gtest.h>

#include "ir/fusion.h"
#include "ir/literal.h"
#include "ir/ops.h"
#include "multidevice/sharding.h"
#include "passes/decompose_sharded_creations.h"

namespace mdfuser {
namespace {

TensorView* shardedRows(Fusion& fusion, TensorView* tv) {
  fusion.addOutput(tv);
  tv->setDeviceMesh(DeviceMesh({0, 1}));
  tv->outerSplit(0, 2);
  tv->parallelize(0, ParallelType::DIDx);
  return tv;
}

Literal* number(Fusion& fusion, double value) {
  return fusion.create<Literal>(value, DataType::Double);
}

TEST(DecomposeShardedCreations, AShardedUniformComputesTheWholeThenASet) {
  Fusion fusion;
  TensorView* out = shardedRows(
      fusion,
      uniform(
          &fusion,
          number(fusion, 0),
          number(fusion, 1),
          {constant(&fusion, 8), constant(&fusion, 3)},
          DataType::Float,
          RngSeed{
              fusion.create<Literal>(int64_t{1}, DataType::Int),
              fusion.create<Literal>(int64_t{0}, DataType::Int)}));
  decomposeShardedCreations(&fusion);

  auto* set = dynamic_cast<LoadStoreOp*>(out->definition());
  ASSERT_NE(set, nullptr) << fusion.toString();
  TensorView* whole = set->in();
  auto* creation = dynamic_cast<CreationOp*>(whole->definition());
  ASSERT_NE(creation, nullptr);
  EXPECT_EQ(creation->type(), OpType::Uniform);
  ASSERT_TRUE(creation->rng().has_value());
  EXPECT_EQ(creation->rng()->seed->toString(), "1");
  EXPECT_EQ(creation->rng()->offset->toString(), "0");
  EXPECT_FALSE(isSharded(whole));
  ASSERT_TRUE(whole->hasDeviceMesh());
  EXPECT_EQ(*whole->deviceMesh(), *out->deviceMesh());
  EXPECT_TRUE(isSharded(out));
  EXPECT_EQ(fusion.exprs().size(), 2u);
}

TEST(DecomposeShardedCreations, FullAndUnshardedCreationsStay) {
  Fusion fusion;
  TensorView* filled = shardedRows(
      fusion,
      full(
          &fusion, {constant(&fusion, 8)}, number(fusion, 2), DataType::Float));
  TensorView* replicated =
      iota(&fusion, constant(&fusion, 4), nullptr, nullptr, DataType::Int);
  fusion.addOutput(replicated);
  decomposeShardedCreations(&fusion);
  EXPECT_NE(dynamic_cast<CreationOp*>(filled->definition()), nullptr);
  EXPECT_NE(dynamic_cast<CreationOp*>(replicated->definition()), nullptr);
  EXPECT_EQ(fusion.exprs().size(), 2u);
}

} // namespace
} // namespace mdfuser
