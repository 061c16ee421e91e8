// SPDX-License-Identifier: MIT
//
// Compiling and running fusions in one process on CPU tensors: the
// evaluator, the executor cache and the dumps.

#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "common/program_builder.h"
#include "common/row_parallel.h"
#include "runtime/communicator.h"
#include "runtime/evaluator.h"
#include "runtime/executor_cache.h"

namespace mdfuser {
namespace {

class EvaluatorTest : public ::testing::Test {
 protected:
  // A world of one process: teams of one device need no backend.
  Communicator comm_{LaunchInfo{}, CommunicatorOptions{}};
};

at::Tensor integers(std::vector<int64_t> shape, int64_t seed) {
  // Small integers keep float sums exact, so results compare exactly.
  at::Generator gen = at::detail::createCPUGenerator(seed);
  return at::randint(-3, 4, shape, gen, at::kFloat);
}

TEST_F(EvaluatorTest, RowParallelOnOneDeviceMatchesATen) {
  // d = 1: the allreduce has a team of one and is a copy.
  std::unique_ptr<Fusion> fusion = test::makeRowParallelLinear(
      /*h=*/4, /*d=*/1, /*s=*/3, DataType::Float);
  FusionExecutorCache cache(*fusion);
  for (int64_t t : {9, 7, 2, 1}) {
    at::Tensor inp = integers({t, 16}, t);
    at::Tensor w = integers({4, 16}, 100 + t);
    std::vector<at::Tensor> out = cache.run({inp, w}, comm_);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(at::equal(out[0], at::linear(inp, w))) << "t = " << t;
  }
}

TEST_F(EvaluatorTest, OneProgramPerInputSignature) {
  std::unique_ptr<Fusion> fusion =
      test::makeRowParallelLinear(4, 1, 2, DataType::Float);
  FusionExecutorCache cache(*fusion);
  at::Tensor w = integers({4, 16}, 1);
  cache.run({integers({6, 16}, 2), w}, comm_);
  cache.run({integers({6, 16}, 3), w}, comm_);
  EXPECT_EQ(cache.numPrograms(), 1);
  cache.run({integers({5, 16}, 4), w}, comm_);
  EXPECT_EQ(cache.numPrograms(), 2);
  cache.run({integers({6, 16}, 5).t().contiguous().t(), w}, comm_);
  EXPECT_EQ(cache.numPrograms(), 3) << "strides are part of the signature";
}

TEST_F(EvaluatorTest, OutputsOfEarlierRunsAreNotOverwritten) {
  std::unique_ptr<Fusion> fusion =
      test::makeRowParallelLinear(4, 1, 2, DataType::Float);
  FusionExecutorCache cache(*fusion);
  at::Tensor w = integers({4, 16}, 1);
  at::Tensor first = cache.run({integers({6, 16}, 2), w}, comm_)[0];
  at::Tensor saved = first.clone();
  cache.run({integers({6, 16}, 3), w}, comm_);
  EXPECT_TRUE(at::equal(first, saved));
}

TEST_F(EvaluatorTest, StreamSplitMatmulWithoutMesh) {
  Fusion fusion;
  TensorView* a = fusion.defineTensor({-1, 8}, {}, DataType::Float);
  TensorView* b = fusion.defineTensor({8, 5}, {}, DataType::Float);
  fusion.addOutput(matmul(a, b));
  a->outerSplit(0, 4);
  a->parallelize(0, ParallelType::Stream);
  FusionExecutorCache cache(fusion);
  at::Tensor x = integers({10, 8}, 1);
  at::Tensor y = integers({8, 5}, 2);
  EXPECT_TRUE(at::equal(cache.run({x, y}, comm_)[0], at::matmul(x, y)));
}

TEST_F(EvaluatorTest, LinearWithBiasAndSet) {
  Fusion fusion;
  TensorView* x = fusion.defineTensor({-1, 6}, {}, DataType::Double);
  TensorView* w = fusion.defineTensor({3, 6}, {}, DataType::Double);
  TensorView* bias = fusion.defineTensor({3}, {}, DataType::Double);
  TensorView* y = linear(x, w, bias);
  fusion.addOutput(y);
  fusion.addOutput(set(y));
  FusionExecutorCache cache(fusion);
  at::Tensor xt = integers({4, 6}, 1).to(at::kDouble);
  at::Tensor wt = integers({3, 6}, 2).to(at::kDouble);
  at::Tensor bt = integers({3}, 3).to(at::kDouble);
  std::vector<at::Tensor> out = cache.run({xt, wt, bt}, comm_);
  at::Tensor expected = at::linear(xt, wt, bt);
  EXPECT_TRUE(at::equal(out[0], expected));
  EXPECT_TRUE(at::equal(out[1], expected));
  EXPECT_NE(out[0].data_ptr(), out[1].data_ptr()) << "set makes a copy";
}

// The step of a reduce-scatter ring: a linear whose bias has the output's
// shape adds it as an addmm's C operand, also in place, also for inputs
// with batch axes.
TEST_F(EvaluatorTest, LinearAddsAnOutputShapedBiasInPlace) {
  for (std::vector<int64_t> rows :
       {std::vector<int64_t>{3},
        std::vector<int64_t>{2, 3},
        std::vector<int64_t>{0}}) {
    SCOPED_TRACE(rows.size() == 1 ? rows[0] : -1);
    std::vector<int64_t> in_shape = rows;
    in_shape.push_back(4);
    std::vector<int64_t> out_shape = rows;
    out_shape.push_back(2);
    test::ProgramBuilder b;
    TensorView* x = b.input(in_shape);
    TensorView* w = b.input({2, 4});
    TensorView* c = b.input(out_shape);
    TensorView* out = b.tensor(out_shape);
    b.output(out);
    std::unique_ptr<hir::HostIrContainer> hic = b.build();
    std::vector<Scalar*> shape;
    for (int64_t extent : out_shape) {
      shape.push_back(constant(hic->ir(), extent));
    }
    hic->topLevel().pushBack(hic->create<hir::Allocate>(out, shape));
    hic->topLevel().pushBack(hic->create<LoadStoreOp>(out, c));
    hic->topLevel().pushBack(hic->create<LinearOp>(out, x, w, out));
    at::Tensor xt = integers(in_shape, 1);
    at::Tensor wt = integers({2, 4}, 2);
    at::Tensor ct = integers(out_shape, 3);
    HostIrEvaluator evaluator(*hic, c10::Device(c10::kCPU), nullptr);
    std::vector<at::Tensor> result = evaluator.run({xt, wt, ct}, {});
    EXPECT_TRUE(at::equal(result[0], ct + at::matmul(xt, wt.t())));
  }
}

TEST_F(EvaluatorTest, HostIrDumpIsPrintedOnRankZero) {
  std::unique_ptr<Fusion> fusion =
      test::makeRowParallelLinear(4, 1, 2, DataType::Float);
  FusionExecutorCache cache(*fusion);
  DumpOptions dump;
  dump.host_ir = true;
  ::testing::internal::CaptureStdout();
  cache.run({integers({6, 16}, 1), integers({4, 16}, 2)}, comm_, dump);
  const std::string printed = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(printed.find("%HostIrContainer {"), std::string::npos);
  EXPECT_NE(printed.find("backend=Gloo)"), std::string::npos);
  EXPECT_EQ(printed, cache.lastProgram()->toString());

  // A cached program is not printed again.
  ::testing::internal::CaptureStdout();
  cache.run({integers({6, 16}, 3), integers({4, 16}, 4)}, comm_, dump);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "");
}

} // namespace
} // namespace mdfuser
