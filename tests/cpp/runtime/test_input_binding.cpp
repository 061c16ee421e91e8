// SPDX-License-Identifier: MIT
//
// What execute() checks before running: every mistake is a user error that
// names the input, the axis and what was expected.

#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "common/expect_error.h"
#include "common/row_parallel.h"
#include "passes/pipeline.h"
#include "runtime/communicator.h"
#include "runtime/input_binding.h"

namespace mdfuser {
namespace {

LaunchInfo launched(int64_t rank, int64_t size) {
  LaunchInfo info;
  info.rank = rank;
  info.size = size;
  info.launcher = "mpirun";
  return info;
}

class InputBindingTest : public ::testing::Test {
 protected:
  // The row-parallel linear with h = 4 on two devices: local shards are
  // inp [t, 8] and w [4, 8].
  InputBindingTest()
      : fusion_(test::makeRowParallelLinear(4, 2, 3, DataType::Float)) {
    runFusionPasses(fusion_.get());
  }

  ScalarEvaluator bind(
      const std::vector<at::Tensor>& inputs, LaunchInfo info = launched(0, 2)) {
    Communicator comm(info, CommunicatorOptions{});
    return bindInputs(*fusion_, inputs, comm);
  }

  std::unique_ptr<Fusion> fusion_;
};

TEST_F(InputBindingTest, GlobalExtentsComeFromLocalShards) {
  ScalarEvaluator extents = bind({at::zeros({5, 8}), at::zeros({4, 8})});
  // t is not sharded: its global extent is the local one.
  EXPECT_EQ(extents.evaluate(fusion_->inputs()[0]->logical()[0]->extent()), 5);
}

TEST_F(InputBindingTest, WrongNumberOfInputs) {
  EXPECT_VALUE_ERROR(bind({at::zeros({5, 8})}), "execute expected 2 inputs");
}

TEST(ScalarInputs, CountAndKindsAreChecked) {
  Fusion fusion;
  fusion.defineTensor({4}, {}, DataType::Float);
  fusion.defineScalarInput(DataType::Double);
  fusion.defineScalarInput(DataType::Int);
  fusion.defineScalarInput(DataType::Bool);
  checkScalarInputs(fusion, {0.5, int64_t{3}, true});
  checkScalarInputs(fusion, {int64_t{2}, int64_t{-1}, false});
  EXPECT_VALUE_ERROR(
      checkScalarInputs(fusion, {0.5}),
      "the fusion has 3 scalar input(s) (define_scalar(None, dtype)), got 1");
  EXPECT_TYPE_ERROR(
      checkScalarInputs(fusion, {0.5, 2.5, true}), "has dtype Int but got 2.5");
  EXPECT_TYPE_ERROR(
      checkScalarInputs(fusion, {true, int64_t{1}, true}), "scalar input 0 (s");
  EXPECT_TYPE_ERROR(
      checkScalarInputs(fusion, {0.5, int64_t{1}, int64_t{1}}),
      "has dtype Bool but got 1");
}

TEST_F(InputBindingTest, WrongDtypeIsATypeError) {
  EXPECT_TYPE_ERROR(
      bind({at::zeros({5, 8}, at::kDouble), at::zeros({4, 8})}),
      "input 0 (T0) has dtype Double but was defined as Float");
}

TEST_F(InputBindingTest, WrongNumberOfDimensions) {
  EXPECT_VALUE_ERROR(
      bind({at::zeros({5, 8, 1}), at::zeros({4, 8})}),
      "input 0 (T0) has 3 dimensions but was defined with 2");
}

TEST_F(InputBindingTest, ShardSizeContradictsStaticExtent) {
  // 16 columns sharded over 2 devices: 8 per device, not 6.
  EXPECT_VALUE_ERROR(
      bind({at::zeros({5, 6}), at::zeros({4, 8})}),
      "input 0 (T0) axis 1 has local size 6; sharded across 2 devices on "
      "mesh_x that is a global size of 12, but the fusion defines it as 16 "
      "(so each device expects 8)");
  EXPECT_VALUE_ERROR(
      bind({at::zeros({5, 8}), at::zeros({3, 8})}),
      "input 1 (T1) axis 0 has local size 3, but the fusion defines it as 4");
}

TEST_F(InputBindingTest, MeshLargerThanAnUnlaunchedWorldSaysHowToLaunch) {
  EXPECT_VALUE_ERROR(
      bind({at::zeros({5, 8}), at::zeros({4, 8})}, LaunchInfo{}),
      "not started by a launcher. Run one process per device, e.g. `mpirun "
      "-np 2");
}

TEST_F(InputBindingTest, MeshLargerThanTheWorld) {
  EXPECT_VALUE_ERROR(
      bind({at::zeros({5, 8}), at::zeros({4, 8})}, launched(0, 1)),
      "DeviceMesh{0 1} names device 1, but the world has only 1 processes");
}

TEST_F(InputBindingTest, ARankOutsideTheMeshBindsItsPlaceholders) {
  // Rank 2 takes no part in a fusion on {0 1}; its inputs only give the
  // extents, checked like any others.
  EXPECT_NO_THROW(bind({at::zeros({5, 8}), at::zeros({4, 8})}, launched(2, 3)));
  EXPECT_VALUE_ERROR(
      bind({at::zeros({5, 8}), at::zeros({4, 6})}, launched(2, 3)),
      "input 1 (T1) axis 1 has local size 6");
}

TEST_F(InputBindingTest, SymbolicExtentsAnOperationEquatesMustAgree) {
  // Both in_features are symbolic: only the values can be compared.
  Fusion fusion;
  TensorView* x = fusion.defineTensor({-1, -1}, {}, DataType::Float);
  TensorView* w = fusion.defineTensor({3, -1}, {}, DataType::Float);
  fusion.addOutput(linear(x, w));
  Communicator comm(LaunchInfo{}, CommunicatorOptions{});
  bindInputs(fusion, {at::zeros({2, 5}), at::zeros({3, 5})}, comm);
  EXPECT_VALUE_ERROR(
      bindInputs(fusion, {at::zeros({2, 5}), at::zeros({3, 4})}, comm),
      "in_features of the input (last axis) and of the weight (its last "
      "axis) must match, got 5 and 4");
}

} // namespace
} // namespace mdfuser
