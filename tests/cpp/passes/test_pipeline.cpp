// SPDX-License-Identifier: MIT
//
// runFusionPasses takes the fusion a user scheduled and returns it ready for
// host IR lowering. For the row-parallel linear that means: the stream and
// device splits reach the output, the contraction over sharded in_features
// becomes a local linear into an rFactor tensor plus a sum over devices,
// and every tensor has its stream and device axes outermost.

#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "common/row_parallel.h"
#include "multidevice/communication_type.h"
#include "multidevice/sharding.h"
#include "passes/pipeline.h"

namespace mdfuser {
namespace {

const DeviceMesh kMesh({0, 1});

// Passes when each of `expected` occurs in a line of `text`, in order, each
// in a later line than the previous one.
::testing::AssertionResult containsLinesInOrder(
    const std::string& text, const std::vector<std::string>& expected) {
  std::istringstream lines(text);
  size_t next = 0;
  for (std::string line; next < expected.size() && std::getline(lines, line);) {
    if (line.find(expected[next]) != std::string::npos) {
      ++next;
    }
  }
  if (next == expected.size()) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "no line containing \"" << expected[next] << "\" (after the lines "
         << "matched before it) in:\n"
         << text;
}

TEST(FusionPasses, RowParallelLinearBecomesLocalLinearAndSumOverDevices) {
  auto fusion = test::makeRowParallelLinear(/*h=*/4, /*d=*/2, /*s=*/3);
  runFusionPasses(fusion.get());
  EXPECT_TRUE(containsLinesInOrder(
      fusion->toString(),
      {"operations:",
       // Each device reduces its slice of in_features into a partial
       // result whose device axis (rf) holds data.
       "  T3_g___bfloat[istreamIdx22{3}, ideviceIdx.x20{2}rf, "
       "iS23{ceilDiv(i0, 3)}, iS18{4}, rS21{8}rf] (DeviceMesh{0 1})",
       "     = linear(T0_g___bfloat[istreamIdx7{3}, ideviceIdx.x9{2}, "
       "iS8{ceilDiv(i0, 3)}, iS10{8}] (DeviceMesh{0 1}),",
       "              T1_g___bfloat[ideviceIdx.x11{2}, iS2{4}, iS12{8}]",
       // The partial results are summed across devices.
       "  T2_g___bfloat[istreamIdx15{3}, rdeviceIdx.x24{2}, "
       "iS16{ceilDiv(i0, 3)}, iS5{4}] (DeviceMesh{0 1})",
       "     = sum(T3_g___bfloat[istreamIdx22{3}, ideviceIdx.x20{2}rf",
       "} // %Fusion"}));
  EXPECT_EQ(fusion->outputs()[0]->name(), 2) << "the output is still T2";
}

TEST(FusionPasses, DumpAfterEachPassPrintsEachPassByName) {
  auto fusion = test::makeRowParallelLinear(/*h=*/4, /*d=*/2, /*s=*/3);
  std::ostringstream dump;
  FusionPassOptions options;
  options.dump_after_each_pass = &dump;
  runFusionPasses(fusion.get(), options);
  const std::string text = dump.str();
  EXPECT_TRUE(containsLinesInOrder(
      text,
      {"After propagateShardings:",
       "%Fusion {",
       "After decomposeReshardings:",
       "%Fusion {",
       "After reorderParallelAxes:",
       "%Fusion {",
       "} // %Fusion"}));

  // Each dump shows the fusion as that pass left it.
  const size_t decompose = text.find("After decomposeReshardings:");
  const size_t reorder = text.find("After reorderParallelAxes:");
  ASSERT_NE(decompose, std::string::npos);
  ASSERT_NE(reorder, std::string::npos);
  const std::string after_propagate = text.substr(0, decompose);
  const std::string after_decompose =
      text.substr(decompose, reorder - decompose);
  const std::string after_reorder = text.substr(reorder);
  EXPECT_EQ(after_propagate.find("= sum("), std::string::npos);
  EXPECT_NE(
      after_propagate.find("rdeviceIdx.x13{2}, rS14{8}] (DeviceMesh{0 1})"),
      std::string::npos);
  EXPECT_NE(after_decompose.find("= sum("), std::string::npos);
  EXPECT_NE(
      after_decompose.find("iS18{4}, ideviceIdx.x20{2}rf, rS21{8}rf]"),
      std::string::npos);
  EXPECT_NE(
      after_reorder.find("[istreamIdx22{3}, ideviceIdx.x20{2}rf, iS23"),
      std::string::npos);
  EXPECT_EQ(
      after_reorder.substr(after_reorder.find("%Fusion {")),
      fusion->toString());
}

TEST(FusionPasses, ACompiledFusionClonesFaithfully) {
  auto fusion = test::makeRowParallelLinear(/*h=*/4, /*d=*/2, /*s=*/3);
  runFusionPasses(fusion.get());
  std::unique_ptr<Fusion> copy = fusion->clone();
  EXPECT_EQ(copy->toString(), fusion->toString());
  const std::vector<TensorOp*> exprs = copy->exprs();
  ASSERT_EQ(exprs.size(), 2u);
  EXPECT_EQ(exprs[0]->opName(), "linear");
  EXPECT_EQ(exprs[1]->opName(), "sum");
  EXPECT_EQ(exprs[1]->out(), copy->outputs()[0]);
  EXPECT_EQ(exprs[0]->out()->container(), copy.get());
}

TEST(FusionPasses, ASingleDeviceFusionIsUnchanged) {
  Fusion fusion;
  TensorView* in = fusion.defineTensor({-1, 8}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({4, 8}, {}, DataType::Float);
  fusion.addOutput(linear(in, w));
  const std::string before = fusion.toString();
  runFusionPasses(&fusion);
  EXPECT_EQ(fusion.toString(), before);
}

TEST(FusionPasses, ScheduleErrorsAreReportedBeforeAnyPassRuns) {
  auto fusion = test::makeRowParallelLinear(/*h=*/4, /*d=*/4, /*s=*/3);
  // Four parts on a two-device mesh.
  for (TensorView* tv : fusion->inputs()) {
    tv->setDeviceMesh(kMesh);
  }
  const std::string before = fusion->toString();
  EXPECT_VALUE_ERROR(
      runFusionPasses(fusion.get()),
      "has 4 parts, but DeviceMesh{0 1} has 2 devices on mesh_x");
  EXPECT_EQ(fusion->toString(), before);
}

TEST(FusionPasses, AReplicatedWeightIsSlicedForAShardedInput) {
  // The input's in_features are sharded and the weight is replicated: each
  // device takes its part of the weight locally, and the partial products
  // are summed over the devices.
  Fusion fusion;
  TensorView* in = fusion.defineTensor({-1, 8}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({4, 8}, {}, DataType::Float);
  fusion.addOutput(linear(in, w));
  in->setDeviceMesh(kMesh);
  w->setDeviceMesh(kMesh);
  in->outerSplit(1, 2);
  in->parallelize(1, ParallelType::DIDx);
  runFusionPasses(&fusion);
  const std::vector<TensorOp*> exprs = fusion.exprs();
  ASSERT_EQ(exprs.size(), 3u) << fusion.toString();
  EXPECT_EQ(exprs[0]->tensorInputs()[0], w);
  EXPECT_EQ(chooseResharding(exprs[0]).kind, Resharding::Kind::kLocal);
  EXPECT_EQ(exprs[1]->type(), OpType::Linear);
  EXPECT_EQ(chooseResharding(exprs[2]).type, CommunicationType::Allreduce);
}

TEST(FusionPasses, ColumnParallelLinearNeedsNoCommunication) {
  // inp replicated, weight sharded on out_features: each device computes
  // its own output columns.
  Fusion fusion;
  TensorView* in = fusion.defineTensor({-1, 8}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({4, 8}, {}, DataType::Float);
  TensorView* out = linear(in, w);
  fusion.addOutput(out);
  in->setDeviceMesh(kMesh);
  w->setDeviceMesh(kMesh);
  w->outerSplit(0, 2);
  w->parallelize(0, ParallelType::DIDx);
  EXPECT_NO_THROW(runFusionPasses(&fusion));
  ASSERT_EQ(fusion.exprs().size(), 1u);
  EXPECT_EQ(
      out->toString(),
      "T2_g_float[ideviceIdx.x9{2}, iS4{i0}, iS10{2}, rS6{8}] "
      "(DeviceMesh{0 1})");
}

TEST(FusionPasses, DataParallelOnMeshYRowParallelOnMeshX) {
  // Rows split across mesh_y, in_features across mesh_x; the weight is
  // replicated along mesh_y. Only the mesh_x sum moves data.
  Fusion fusion;
  TensorView* in = fusion.defineTensor({4, 8}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({6, 8}, {}, DataType::Float);
  fusion.addOutput(linear(in, w));
  const DeviceMesh mesh({0, 1, 2, 3}, {2, 2});
  in->setDeviceMesh(mesh);
  w->setDeviceMesh(mesh);
  in->outerSplit(1, 2);
  in->parallelize(1, ParallelType::DIDx);
  in->outerSplit(0, 2);
  in->parallelize(0, ParallelType::DIDy);
  w->outerSplit(1, 2);
  w->parallelize(1, ParallelType::DIDx);
  EXPECT_NO_THROW(runFusionPasses(&fusion));
  EXPECT_EQ(fusion.exprs().size(), 2u);
}

TEST(FusionPasses, PartialSumsEveryUseWantsSplitAreReduceScattered) {
  // r = linear(x, w) over sharded in_features is partial; its only use adds
  // it to s, split along the rows. r takes that split from its use, so the
  // partial sums are reduce-scattered rather than allreduced and sliced.
  Fusion fusion;
  TensorView* x = fusion.defineTensor({4, 8}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({6, 8}, {}, DataType::Float);
  TensorView* s = fusion.defineTensor({4, 6}, {}, DataType::Float);
  TensorView* r = linear(x, w);
  TensorView* z = binaryOp(OpType::Add, r, s);
  fusion.addOutput(z);
  for (TensorView* tv : {x, w, s}) {
    tv->setDeviceMesh(kMesh);
  }
  for (TensorView* tv : {x, w}) {
    tv->outerSplit(1, 2);
    tv->parallelize(1, ParallelType::DIDx);
  }
  s->outerSplit(0, 2);
  s->parallelize(0, ParallelType::DIDx);
  runFusionPasses(&fusion);
  std::vector<CommunicationType> collectives;
  for (TensorOp* op : fusion.exprs()) {
    if (isResharding(op)) {
      collectives.push_back(chooseResharding(op).type);
    }
  }
  EXPECT_EQ(
      collectives,
      std::vector<CommunicationType>{CommunicationType::ReduceScatter});
  EXPECT_EQ(
      shardingOfLogicalAxes(z),
      (std::vector<ParallelType>{ParallelType::DIDx, ParallelType::Serial}));
}

TEST(FusionPasses, OutputsKeepTheShardingsTheirProducersGive) {
  // The same, but r is also an output: the user gets it whole.
  Fusion fusion;
  TensorView* x = fusion.defineTensor({4, 8}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({6, 8}, {}, DataType::Float);
  TensorView* s = fusion.defineTensor({4, 6}, {}, DataType::Float);
  TensorView* r = linear(x, w);
  fusion.addOutput(r);
  fusion.addOutput(binaryOp(OpType::Add, r, s));
  for (TensorView* tv : {x, w, s}) {
    tv->setDeviceMesh(kMesh);
  }
  for (TensorView* tv : {x, w}) {
    tv->outerSplit(1, 2);
    tv->parallelize(1, ParallelType::DIDx);
  }
  s->outerSplit(0, 2);
  s->parallelize(0, ParallelType::DIDx);
  runFusionPasses(&fusion);
  EXPECT_EQ(
      shardingOfLogicalAxes(r),
      (std::vector<ParallelType>{ParallelType::Serial, ParallelType::Serial}));
}

} // namespace
} // namespace mdfuser
