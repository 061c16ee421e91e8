// SPDX-License-Identifier: MIT
//
// An IterDomain is one axis of a tensor's iteration space. Its printed form
// packs everything a reader of dumped IR needs: iteration or reduction, the
// parallel type, the name, the extent and whether an rFactor made it.

#include <gtest/gtest.h>

#include "ir/container.h"
#include "ir/iter_domain.h"

namespace mdfuser {
namespace {

TEST(ParallelType, NamesForPythonAndForPrintedIr) {
  EXPECT_EQ(parallelTypeName(ParallelType::Serial), "serial");
  EXPECT_EQ(parallelTypeName(ParallelType::Stream), "stream");
  EXPECT_EQ(parallelTypeName(ParallelType::DIDx), "mesh_x");
  EXPECT_EQ(parallelTypeName(ParallelType::DIDy), "mesh_y");
  EXPECT_EQ(parallelTypeName(ParallelType::DIDz), "mesh_z");
  EXPECT_EQ(idString(ParallelType::Serial), "S");
  EXPECT_EQ(idString(ParallelType::Stream), "streamIdx");
  EXPECT_EQ(idString(ParallelType::DIDx), "deviceIdx.x");
  EXPECT_EQ(idString(ParallelType::DIDz), "deviceIdx.z");
  EXPECT_TRUE(isDeviceParallel(ParallelType::DIDy));
  EXPECT_FALSE(isDeviceParallel(ParallelType::Stream));
  EXPECT_FALSE(isDeviceParallel(ParallelType::Serial));
}

TEST(IterDomain, PrintedFormShowsTypeParallelismNameAndExtent) {
  IrContainer ir;
  auto* i = ir.create<IterDomain>(symbol(&ir));
  EXPECT_EQ(i->toString(), "iS0{i0}");
  EXPECT_FALSE(i->isReduction());
  EXPECT_EQ(i->parallelType(), ParallelType::Serial);

  auto* r = ir.create<IterDomain>(constant(&ir, 8), IterType::Reduction);
  EXPECT_EQ(r->toString(), "rS1{8}");
  r->parallelize(ParallelType::DIDx);
  EXPECT_EQ(r->toString(), "rdeviceIdx.x1{8}");
  EXPECT_TRUE(r->isDeviceParallel());

  auto* s = ir.create<IterDomain>(
      constant(&ir, 3), IterType::Iteration, ParallelType::Stream);
  EXPECT_EQ(s->toString(), "istreamIdx2{3}");
  EXPECT_TRUE(s->isStream());

  auto* rf = ir.create<IterDomain>(
      constant(&ir, 2),
      IterType::Iteration,
      ParallelType::DIDy,
      /*is_rfactor_product=*/true);
  EXPECT_EQ(rf->toString(), "ideviceIdx.y3{2}rf");
  EXPECT_TRUE(rf->isRFactorProduct());
}

TEST(IterDomain, CloneWithoutTransformsKeepsAttributesButNotHistory) {
  IrContainer ir;
  auto* in = ir.create<IterDomain>(constant(&ir, 8), IterType::Reduction);
  auto [outer, inner] = split(in, constant(&ir, 2), /*inner_split=*/false);
  outer->parallelize(ParallelType::DIDx);
  IterDomain* copy = outer->cloneWithoutTransforms();
  EXPECT_NE(copy, outer);
  EXPECT_EQ(copy->extent(), outer->extent());
  EXPECT_TRUE(copy->isReduction());
  EXPECT_EQ(copy->parallelType(), ParallelType::DIDx);
  EXPECT_EQ(copy->definition(), nullptr);
  EXPECT_EQ(copy->toString(), "rdeviceIdx.x3{2}");
}

TEST(Split, OuterSplitFixesTheOuterExtent) {
  IrContainer ir;
  auto* in = ir.create<IterDomain>(symbol(&ir));
  auto [outer, inner] = split(in, constant(&ir, 3), /*inner_split=*/false);
  EXPECT_EQ(outer->extent()->value(), 3);
  EXPECT_EQ(inner->extent()->toString(), "ceilDiv(i0, 3)");

  auto* s = dynamic_cast<Split*>(outer->definition());
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(inner->definition(), s);
  EXPECT_EQ(s->in(), in);
  EXPECT_EQ(s->outer(), outer);
  EXPECT_EQ(s->inner(), inner);
  EXPECT_FALSE(s->innerSplit());
  EXPECT_EQ(s->factor()->value(), 3);
  ASSERT_EQ(in->uses().size(), 1u);
  EXPECT_EQ(in->uses()[0], s);
  EXPECT_EQ(
      s->toString(),
      "Outer split: iS0{i0} by factor 3 -> iS1{3}, iS2{ceilDiv(i0, 3)}");
}

TEST(Split, InnerSplitFixesTheInnerExtentAndKeepsTheIterType) {
  IrContainer ir;
  auto* in = ir.create<IterDomain>(
      constant(&ir, 10), IterType::Reduction, ParallelType::DIDx);
  auto [outer, inner] = split(in, constant(&ir, 4), /*inner_split=*/true);
  EXPECT_EQ(outer->extent()->value(), 3) << "ceilDiv(10, 4)";
  EXPECT_EQ(inner->extent()->value(), 4);
  EXPECT_TRUE(outer->isReduction());
  EXPECT_TRUE(inner->isReduction());
  // The outputs are new, serial axes; the caller parallelizes them.
  EXPECT_EQ(outer->parallelType(), ParallelType::Serial);
  EXPECT_EQ(inner->parallelType(), ParallelType::Serial);
  EXPECT_EQ(
      outer->definition()->toString(),
      "Inner split: rdeviceIdx.x0{10} by factor 4 -> rS1{3}, rS2{4}");
}

Split* asSplit(Expr* e) {
  auto* split = dynamic_cast<Split*>(e);
  EXPECT_NE(split, nullptr) << e->toString();
  return split;
}

TEST(TransformsBetween, ListsTheSplitsFromOneDomainToAnotherInCreationOrder) {
  IrContainer ir;
  auto* a = ir.create<IterDomain>(constant(&ir, 24));
  auto* b = ir.create<IterDomain>(constant(&ir, 5));
  auto [a_outer, a_inner] = split(a, constant(&ir, 2), false);
  auto [b_outer, b_inner] = split(b, constant(&ir, 5), true);
  auto [ai_outer, ai_inner] = split(a_inner, constant(&ir, 3), true);

  const std::vector<Expr*> splits = transformsBetween(
      {a, b}, {a_outer, ai_outer, ai_inner, b_outer, b_inner});
  ASSERT_EQ(splits.size(), 3u);
  EXPECT_EQ(asSplit(splits[0])->in(), a);
  EXPECT_EQ(asSplit(splits[1])->in(), b);
  EXPECT_EQ(asSplit(splits[2])->in(), a_inner);

  EXPECT_TRUE(transformsBetween({a, b}, {a, b}).empty());
}

TEST(TransformsBetween, IgnoresDomainsThatDoNotDescendFromFrom) {
  IrContainer ir;
  auto* a = ir.create<IterDomain>(constant(&ir, 24));
  auto* b = ir.create<IterDomain>(constant(&ir, 5));
  auto [a_outer, a_inner] = split(a, constant(&ir, 2), false);
  auto [b_outer, b_inner] = split(b, constant(&ir, 5), true);
  const std::vector<Expr*> only_b =
      transformsBetween({b}, {a_outer, a_inner, b_outer, b_inner});
  ASSERT_EQ(only_b.size(), 1u);
  EXPECT_EQ(asSplit(only_b[0])->in(), b);
}

TEST(TransformsBetween, FollowsMerges) {
  IrContainer ir;
  auto* a = ir.create<IterDomain>(constant(&ir, 4));
  auto* b = ir.create<IterDomain>(constant(&ir, 6));
  IterDomain* ab = merge(a, b);
  EXPECT_EQ(ab->extent()->value(), 24);
  auto [outer, inner] = split(ab, constant(&ir, 2), false);
  const std::vector<Expr*> transforms =
      transformsBetween({a, b}, {outer, inner});
  ASSERT_EQ(transforms.size(), 2u);
  EXPECT_EQ(transforms[0]->opName(), "Merge");
  EXPECT_EQ(asSplit(transforms[1])->in(), ab);
  EXPECT_EQ(transforms[0]->toString(), "Merge: iS0{4} and iS1{6} -> iS2{24}");
}

} // namespace
} // namespace mdfuser
