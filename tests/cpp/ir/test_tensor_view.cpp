// SPDX-License-Identifier: MIT
//
// A TensorView is described with global shapes. Scheduling (split,
// parallelize, set_device_mesh) only rewrites its loop domain; the logical
// domain stays what define_tensor or the operation gave it.

#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "ir/fusion.h"
#include "ir/ops.h"

namespace mdfuser {
namespace {

TEST(TensorView, DefineTensorGivesSymbolicAndStaticExtents) {
  Fusion fusion;
  TensorView* tv = fusion.defineTensor({-1, 8}, {}, DataType::BFloat16);
  EXPECT_EQ(tv->toString(), "T0_g___bfloat[iS0{i0}, iS1{8}]");
  EXPECT_EQ(tv->dtype(), DataType::BFloat16);
  EXPECT_EQ(tv->memoryType(), MemoryType::Global);
  EXPECT_FALSE(tv->hasRoot());
  EXPECT_EQ(tv->logical(), tv->loop());
  EXPECT_EQ(tv->maybeRoot(), tv->logical());
  EXPECT_EQ(tv->contiguity(), (std::vector<std::optional<bool>>{true, true}));
  EXPECT_EQ(tv->axis(-1), tv->logical()[1]);

  TensorView* partly =
      fusion.defineTensor({2, 3}, {false, std::nullopt}, DataType::Float);
  EXPECT_EQ(
      partly->contiguity(),
      (std::vector<std::optional<bool>>{false, std::nullopt}));
  EXPECT_EQ(partly->toString(), "T1_g_float[iS2{2}, iS3{3}]");
}

TEST(TensorView, SplitRewritesOnlyTheLoopDomain) {
  Fusion fusion;
  TensorView* tv = fusion.defineTensor({-1, 8}, {}, DataType::Float);
  tv->split(1, 4); // inner split by default
  tv->outerSplit(0, 3);
  EXPECT_EQ(tv->nDims(), 4);
  EXPECT_EQ(
      tv->toString(),
      "T0_g_float[iS4{3}, iS5{ceilDiv(i0, 3)}, iS2{2}, iS3{4}]");
  ASSERT_EQ(tv->logical().size(), 2u);
  EXPECT_EQ(tv->logical()[1]->toString(), "iS1{8}");

  tv->innerSplit(-1, 2);
  EXPECT_EQ(tv->axis(-2)->toString(), "iS6{2}");
  EXPECT_EQ(tv->axis(-1)->toString(), "iS7{2}");
}

TEST(TensorView, ParallelizeSetsTheLoopAxisParallelType) {
  Fusion fusion;
  TensorView* tv = fusion.defineTensor({-1, 8}, {}, DataType::Float);
  tv->setDeviceMesh(DeviceMesh({0, 1}));
  tv->outerSplit(1, 2);
  tv->parallelize(1, ParallelType::DIDx);
  tv->parallelize(1, ParallelType::DIDx); // asking again is harmless
  tv->parallelize(0, ParallelType::Stream);
  EXPECT_EQ(
      tv->toString(),
      "T0_g_float[istreamIdx0{i0}, ideviceIdx.x2{2}, iS3{4}] "
      "(DeviceMesh{0 1})");
  tv->parallelize(0, ParallelType::Serial);
  EXPECT_EQ(tv->axis(0)->parallelType(), ParallelType::Serial);
}

TEST(TensorView, BadAxisOrFactorIsAUserError) {
  Fusion fusion;
  TensorView* tv = fusion.defineTensor({4, 8}, {}, DataType::Float);
  EXPECT_VALUE_ERROR(tv->axis(2), "axis 2 is out of range");
  EXPECT_VALUE_ERROR(tv->axis(-3), "(valid: -2 to 1)");
  EXPECT_VALUE_ERROR(tv->split(5, 2), "axis 5 is out of range");
  EXPECT_VALUE_ERROR(tv->split(0, 0), "split factor must be positive, got 0");
  EXPECT_VALUE_ERROR(
      tv->parallelize(-5, ParallelType::DIDx), "axis -5 is out of range");
  EXPECT_EQ(tv->nDims(), 2) << "failed requests change nothing";
}

TEST(TensorView, ConflictingParallelTypesAreUserErrors) {
  Fusion fusion;
  TensorView* tv = fusion.defineTensor({4, 8}, {}, DataType::Float);
  tv->parallelize(0, ParallelType::DIDx);
  EXPECT_VALUE_ERROR(
      tv->parallelize(0, ParallelType::Stream),
      "is already parallelized on mesh_x; it cannot also be parallelized on "
      "stream");
  EXPECT_VALUE_ERROR(
      tv->parallelize(1, ParallelType::DIDx),
      "a tensor can have only one axis per parallel type");
  EXPECT_VALUE_ERROR(tv->split(0, 2), "split an axis before parallelizing it");
  EXPECT_EQ(tv->axis(1)->parallelType(), ParallelType::Serial);
}

TEST(TensorView, ReductionsCannotBeStreamParallel) {
  Fusion fusion;
  TensorView* in = fusion.defineTensor({4, 8}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({6, 8}, {}, DataType::Float);
  TensorView* out = linear(in, w);
  ASSERT_TRUE(out->axis(2)->isReduction());
  EXPECT_VALUE_ERROR(
      out->parallelize(2, ParallelType::Stream),
      "is a reduction; reductions cannot be stream-parallel");
  // Device-parallel reductions are how a sharded contraction is written.
  out->parallelize(2, ParallelType::DIDx);
  EXPECT_EQ(out->axis(2)->toString(), "rdeviceIdx.x6{8}");
  EXPECT_EQ(out->logicalNoReductions().size(), 2u);
}

TEST(TensorView, AFrozenFusionRefusesScheduleChanges) {
  Fusion fusion;
  TensorView* tv = fusion.defineTensor({4, 8}, {}, DataType::Float);
  fusion.freeze();
  EXPECT_VALUE_ERROR(tv->split(0, 2), "T0 belongs to a fusion that has");
  EXPECT_VALUE_ERROR(
      tv->parallelize(0, ParallelType::DIDx), "can no longer change");
  EXPECT_VALUE_ERROR(
      tv->setDeviceMesh(DeviceMesh({0})), "already been executed");
  EXPECT_EQ(tv->nDims(), 2);
  EXPECT_FALSE(tv->hasDeviceMesh());
}

TEST(TensorView, LocalTensorsPrintWithL) {
  Fusion fusion;
  auto* id = fusion.create<IterDomain>(constant(&fusion, 4));
  auto* tv = fusion.create<TensorView>(
      std::vector<IterDomain*>{id},
      DataType::Half,
      std::vector<std::optional<bool>>{},
      MemoryType::Local);
  EXPECT_EQ(tv->toString(), "T0_l___half[iS0{4}]");
}

TEST(TensorView, SetMemoryTypeTakesGlobalOrSymmetric) {
  Fusion fusion;
  TensorView* tv = fusion.defineTensor({4}, {}, DataType::Float);
  for (MemoryType type :
       {MemoryType::Local, MemoryType::Shared, MemoryType::Tensor}) {
    EXPECT_TRUE(test::throwsUserError(
        [&] { tv->setMemoryType(type); },
        UserError::Kind::kValue,
        "MemoryType." + std::string(memoryTypeName(type))))
        << memoryTypeName(type);
  }
  tv->setMemoryType(MemoryType::Symmetric);
  EXPECT_EQ(tv->memoryType(), MemoryType::Symmetric);
  EXPECT_TRUE(tv->ownsBuffer());
  EXPECT_EQ(tv->toString(), "T0_sym_float[iS0{4}]");
  tv->setMemoryType(MemoryType::Global);
  EXPECT_EQ(tv->toString(), "T0_g_float[iS0{4}]");
}

TEST(TensorView, SetDomainsKeepsTheNumberOfDataAxes) {
  Fusion fusion;
  TensorView* tv = fusion.defineTensor({4, 8}, {}, DataType::Float);
  auto* extra = fusion.create<IterDomain>(constant(&fusion, 2));
  std::vector<IterDomain*> three = {tv->axis(0), tv->axis(1), extra};
  EXPECT_INTERNAL_ERROR(
      tv->setDomains({}, three, three), "change the number of non-reduction");

  // A reduction axis may be added: it holds no data.
  auto* r =
      fusion.create<IterDomain>(constant(&fusion, 2), IterType::Reduction);
  std::vector<IterDomain*> with_r = {tv->axis(0), tv->axis(1), r};
  tv->setDomains({}, with_r, with_r);
  EXPECT_EQ(tv->toString(), "T0_g_float[iS0{4}, iS1{8}, rS3{2}]");
}

} // namespace
} // namespace mdfuser
