// SPDX-License-Identifier: MIT
//
// reorderParallelAxes puts the stream axis first, then the device axes from
// mesh_z to mesh_x, then everything else in its original order: host IR
// lowering loops over the outermost axes, and a communication needs each
// device's data contiguous.

#include <gtest/gtest.h>

#include "common/row_parallel.h"
#include "passes/decompose_reshardings.h"
#include "passes/propagate_shardings.h"
#include "passes/reorder_parallel_axes.h"

namespace mdfuser {
namespace {

std::string loopString(const TensorView* tv) {
  std::string s;
  for (IterDomain* id : tv->loop()) {
    s += (s.empty() ? "" : " ") + id->toString();
  }
  return s;
}

TEST(ReorderParallelAxes, StreamThenDevicesThenTheRestInOrder) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({6, 8, -1}, {}, DataType::Float);
  fusion.addOutput(set(x));
  x->setDeviceMesh(DeviceMesh({0, 1}));
  x->outerSplit(1, 2);
  x->parallelize(1, ParallelType::DIDx);
  x->outerSplit(3, 3);
  x->parallelize(3, ParallelType::Stream);
  ASSERT_EQ(
      loopString(x),
      "iS0{6} ideviceIdx.x6{2} iS7{4} istreamIdx8{3} iS9{ceilDiv(i0, 3)}");
  const std::vector<IterDomain*> logical = x->logical();

  reorderParallelAxes(&fusion);
  EXPECT_EQ(
      loopString(x),
      "istreamIdx8{3} ideviceIdx.x6{2} iS0{6} iS7{4} iS9{ceilDiv(i0, 3)}");
  EXPECT_EQ(x->logical(), logical) << "only the loop order changes";
}

TEST(ReorderParallelAxes, DeviceAxesGoFromMeshZToMeshX) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({2, 2, 2, 5}, {}, DataType::Float);
  fusion.addOutput(set(x));
  x->setDeviceMesh(DeviceMesh({0, 1, 2, 3, 4, 5, 6, 7}, {2, 2, 2}));
  x->parallelize(0, ParallelType::DIDx);
  x->parallelize(1, ParallelType::DIDy);
  x->parallelize(2, ParallelType::DIDz);
  x->split(3, 5);
  reorderParallelAxes(&fusion);
  EXPECT_EQ(
      loopString(x),
      "ideviceIdx.z2{2} ideviceIdx.y1{2} ideviceIdx.x0{2} iS8{1} iS9{5}");
}

TEST(ReorderParallelAxes, AppliesToEveryTensorIncludingRFactorProducts) {
  auto fusion = test::makeRowParallelLinear(/*h=*/4, /*d=*/2, /*s=*/3);
  propagateShardings(fusion.get());
  decomposeReshardings(fusion.get());
  reorderParallelAxes(fusion.get());
  TensorView* out = fusion->outputs()[0];
  TensorView* partial = fusion->exprs()[0]->out();
  EXPECT_EQ(
      loopString(fusion->inputs()[0]),
      "istreamIdx7{3} ideviceIdx.x9{2} iS8{ceilDiv(i0, 3)} iS10{8}");
  EXPECT_EQ(
      loopString(fusion->inputs()[1]), "ideviceIdx.x11{2} iS2{4} iS12{8}");
  EXPECT_EQ(
      loopString(partial),
      "istreamIdx22{3} ideviceIdx.x20{2}rf iS23{ceilDiv(i0, 3)} iS18{4} "
      "rS21{8}rf");
  // A reduction over devices moves ahead of the serial axes too.
  EXPECT_EQ(
      loopString(out),
      "istreamIdx15{3} rdeviceIdx.x24{2} iS16{ceilDiv(i0, 3)} iS5{4}");
}

TEST(ReorderParallelAxes, LeavesSerialLoopsAlone) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({6, 8}, {}, DataType::Float);
  fusion.addOutput(set(x));
  x->split(0, 2);
  const std::vector<IterDomain*> before = x->loop();
  reorderParallelAxes(&fusion);
  EXPECT_EQ(x->loop(), before);
}

} // namespace
} // namespace mdfuser
