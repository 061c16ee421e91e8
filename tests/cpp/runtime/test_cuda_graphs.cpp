// SPDX-License-Identifier: MIT
//
// Which programs execute replays as CUDA graphs by default (no GPU
// needed), and ProgramGraphs on one GPU with statements written here: what
// a program replayed by default does where a capture cannot hold its
// statements (skipped without a GPU).

#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "common/column_parallel.h"
#include "common/expect_error.h"
#include "common/row_parallel.h"
#include "common/transformer_mlp.h"
#include "host_ir/lower.h"
#include "host_ir/passes/pass_manager.h"
#include "ir/ops.h"
#include "passes/pipeline.h"
#include "runtime/cuda_graphs.h"

#ifdef MDFUSER_HAS_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace mdfuser {
namespace {

// What mlpProgram adds to the MLP, as a second output.
enum class Extra {
  kNone,
  // Uniform noise drawn at every run.
  kNoise,
  // The input gathered whole: an allgather that feeds no linear, which
  // stays a collective (on NCCL beside the CUDA backend's rings).
  kGather,
};

// The sequence-parallel MLP of device 0 of two (an allgather ring and a
// reduce-scatter), on `backend`, with `extra`.
std::unique_ptr<hir::HostIrContainer> mlpProgram(
    hir::CommunicatorBackend backend, Extra extra = Extra::kNone) {
  std::unique_ptr<Fusion> fusion = test::makeMlp(2, 2, 1, "sp");
  if (extra == Extra::kGather) {
    Fusion* f = fusion.get();
    TensorView* gathered = set(f->inputs().front());
    gathered->setDeviceMesh(DeviceMesh({0, 1}));
    f->addOutput(gathered);
  }
  if (extra == Extra::kNoise) {
    Fusion* f = fusion.get();
    TensorView* drawn = uniform(
        f,
        constant(f, 0.0),
        constant(f, 1.0),
        {constant(f, int64_t{4})},
        DataType::Float,
        std::nullopt);
    drawn->setDeviceMesh(DeviceMesh({0, 1}));
    f->addOutput(drawn);
  }
  runFusionPasses(fusion.get());
  hir::LoweringOptions options;
  options.backend = backend;
  options.device = 0;
  auto hic = hir::lowerToHostIr(std::move(fusion), options);
  hir::runHostPasses(
      *hic, {.symmetric_memory = backend == hir::CommunicatorBackend::kCuda});
  return hic;
}

TEST(CudaGraphsByDefault, ForProgramsWhoseEveryMoveIsTheCudaBackends) {
  const c10::Device gpu(c10::DeviceType::CUDA, 0);
  const c10::Device cpu(c10::DeviceType::CPU);
  // Rings on copy engines: replayed.
  auto rings = mlpProgram(hir::CommunicatorBackend::kCuda);
  EXPECT_TRUE(useCudaGraphsByDefault(*rings, gpu)) << rings->toString();
  // NCCL's collectives, Gloo's on CPU tensors: not.
  auto nccl = mlpProgram(hir::CommunicatorBackend::kNccl);
  EXPECT_FALSE(useCudaGraphsByDefault(*nccl, gpu)) << nccl->toString();
  auto gloo = mlpProgram(hir::CommunicatorBackend::kGloo);
  EXPECT_FALSE(useCudaGraphsByDefault(*gloo, cpu));
  // Random numbers drawn at every run: not (asked for, a user error).
  auto noisy = mlpProgram(hir::CommunicatorBackend::kCuda, Extra::kNoise);
  EXPECT_FALSE(useCudaGraphsByDefault(*noisy, gpu)) << noisy->toString();
  EXPECT_VALUE_ERROR(checkCudaGraphs(*noisy, gpu), "draws new numbers");
  // Rings and one of NCCL's collectives: not (NCCL's collectives gained no
  // GPU time replayed).
  auto mixed = mlpProgram(hir::CommunicatorBackend::kCuda, Extra::kGather);
  const std::string text = mixed->toString();
  ASSERT_NE(text.find("type=Allgather"), std::string::npos) << text;
  ASSERT_NE(text.find("backend=CUDA"), std::string::npos) << text;
  EXPECT_FALSE(useCudaGraphsByDefault(*mixed, gpu)) << text;
}

// `fusion` lowered for device 0 with the fused kernels forced, on the CUDA
// backend.
std::unique_ptr<hir::HostIrContainer> fusedProgram(
    std::unique_ptr<Fusion> fusion) {
  runFusionPasses(fusion.get());
  hir::LoweringOptions options;
  options.backend = hir::CommunicatorBackend::kCuda;
  options.fused_matmul_communication = FusedMatmulChoice::kOn;
  options.fused_kernels_available = true;
  auto hic = hir::lowerToHostIr(std::move(fusion), options);
  hir::runHostPasses(*hic, {.symmetric_memory = true});
  return hic;
}

// The allgather's moves wait only for the peers' flags; the
// reduce-scatter's kernel, which pulls the partial sums, waits only in the
// kernel, its call's number in device memory: both replayed as the rings
// are.
TEST(CudaGraphsByDefault, TheFusedStatementsAreReplayed) {
  const c10::Device gpu(c10::DeviceType::CUDA, 0);
  for (const bool gathered : {true, false}) {
    auto hic = fusedProgram(
        gathered
            ? test::makeGatheredLinear(/*h=*/8, 2, 1, DataType::BFloat16, false)
            : test::makeScatteredLinear(
                  /*h=*/8, 2, 1, DataType::BFloat16, false));
    const std::string text = hic->toString();
    ASSERT_NE(
        text.find(
            gathered ? "AllgatherLinear(T0_g" : "LinearReduceScatter(T0_g"),
        std::string::npos)
        << text;
    ASSERT_NE(
        text.find(gathered ? "kernel=sm90)" : "kernel=sm90_pulls)"),
        std::string::npos)
        << text;
    EXPECT_TRUE(useCudaGraphsByDefault(*hic, gpu)) << text;
    checkCudaGraphs(*hic, gpu);
  }
}

#ifdef MDFUSER_HAS_CUDA

bool haveGpu() {
  return at::cuda::is_available();
}

// out = in * 2 + the number of positive elements, read on the host: a
// synchronizing call, which a capture cannot hold.
ProgramGraphs::Run hostReading(const at::Tensor& in) {
  return [in](bool) {
    const int64_t positive = (in > 0).sum().item<int64_t>();
    return std::vector<at::Tensor>{in * 2 + positive};
  };
}

TEST(ProgramGraphs, ByDefaultAProgramThatCannotBeCapturedRunsItsStatements) {
  if (!haveGpu()) {
    GTEST_SKIP() << "no GPU";
  }
  const c10::Device device(c10::DeviceType::CUDA, 0);
  at::Tensor in = at::arange(-2, 6, at::TensorOptions().device(device));
  ProgramGraphs graphs(device, nullptr, nullptr, /*by_default=*/true);
  for (int i = 0; i < 4; ++i) {
    in.neg_();
    const at::Tensor want = in * 2 + (in > 0).sum().item<int64_t>();
    std::vector<at::Tensor> out = graphs.run({in}, {}, i, hostReading(in));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(at::equal(out[0], want)) << "call " << i;
  }
  // The first call runs the statements, the second tries a capture, which
  // fails: it and every later call run the statements.
  EXPECT_EQ(graphs.stats().captures, 0);
  EXPECT_EQ(graphs.stats().failed_captures, 1);
  EXPECT_EQ(graphs.stats().eager, 4);
  EXPECT_EQ(graphs.stats().replays, 0);
}

TEST(ProgramGraphs, AskedForACaptureThatFailsIsTheCallersError) {
  if (!haveGpu()) {
    GTEST_SKIP() << "no GPU";
  }
  const c10::Device device(c10::DeviceType::CUDA, 0);
  at::Tensor in = at::arange(-2, 6, at::TensorOptions().device(device));
  ProgramGraphs graphs(device, nullptr, nullptr, /*by_default=*/false);
  graphs.run({in}, {}, 0, hostReading(in));
  EXPECT_ANY_THROW(graphs.run({in}, {}, 1, hostReading(in)));
  (void)cudaGetLastError();
}

TEST(ProgramGraphs, ByDefaultACapturableProgramReplays) {
  if (!haveGpu()) {
    GTEST_SKIP() << "no GPU";
  }
  const c10::Device device(c10::DeviceType::CUDA, 0);
  at::Tensor in = at::arange(-2, 6, at::TensorOptions().device(device));
  ProgramGraphs graphs(device, nullptr, nullptr, /*by_default=*/true);
  auto twice = [&in](bool) { return std::vector<at::Tensor>{in * 2}; };
  for (int i = 0; i < 4; ++i) {
    in.add_(1);
    // Each output dropped before the next call: the graph replays.
    EXPECT_TRUE(at::equal(graphs.run({in}, {}, i, twice)[0], in * 2));
  }
  EXPECT_EQ(graphs.stats().eager, 1);
  EXPECT_EQ(graphs.stats().captures, 1);
  EXPECT_EQ(graphs.stats().replays, 3);
  EXPECT_EQ(graphs.stats().failed_captures, 0);
}

#else

TEST(ProgramGraphs, NeedCuda) {
  GTEST_SKIP() << "a build without CUDA";
}

#endif

} // namespace
} // namespace mdfuser
