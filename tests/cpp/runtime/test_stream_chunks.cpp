// SPDX-License-Identifier: MIT
//
// What the machine model decides beyond the chunk count: whether the rings'
// first GEMMs go first (streamLoopsWaitForTheLink) and whether the
// allreduces of partial sums are exchanged (exchangesPartialSumsByDefault).

#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "common/row_parallel.h"
#include "passes/pipeline.h"
#include "runtime/communicator.h"
#include "runtime/stream_chunks.h"

namespace mdfuser {
namespace {

// A model of slow GEMMs (1e6 flop/s) and a link of `link` bytes a second,
// so that the shapes of a test weigh more than the statements' 1 us.
MachineModel modelWithLink(double link) {
  MachineModel model;
  model.gemm_flops = 1e6;
  model.gemm_half_outputs = 0;
  model.memory_bytes = 1e9;
  model.link_bytes = link;
  model.statement_seconds = 1e-6;
  return model;
}

TEST(StreamChunks, TheFirstGemmsGoFirstWhereTheLinkBoundsTheLoops) {
  // Rank 0 of two, which binds the inputs without communicating.
  LaunchInfo launch;
  launch.size = 2;
  launch.local_size = 2;
  launch.launcher = "mpirun";
  Communicator comm{launch, CommunicatorOptions{}};
  // The row-parallel linear over two devices in two stream chunks, on
  // device 0: 64 tokens, a GEMM of 2 * 8 * 4 flops a token (4e-3 s in all)
  // and an allreduce of 4 Float a token (1024 bytes).
  std::unique_ptr<Fusion> fusion = test::makeRowParallelLinear(
      /*h=*/4, /*d=*/2, /*s=*/2, DataType::Float);
  runFusionPasses(fusion.get());
  const std::vector<at::Tensor> inputs = {
      at::zeros({64, 8}), at::zeros({4, 8})};
  const c10::Device cpu(c10::DeviceType::CPU);
  // 1024 bytes take 1e-2 s at 1e5 B/s, 1e-6 s at 1e9.
  setMachineModel("cpu", modelWithLink(1e5));
  EXPECT_TRUE(streamLoopsWaitForTheLink(*fusion, inputs, comm, cpu));
  setMachineModel("cpu", modelWithLink(1e9));
  EXPECT_FALSE(streamLoopsWaitForTheLink(*fusion, inputs, comm, cpu));

  // Without stream loops there is nothing to order.
  std::unique_ptr<Fusion> whole = test::makeShardedLinear(DeviceMesh({0, 1}));
  runFusionPasses(whole.get());
  setMachineModel("cpu", modelWithLink(1e5));
  EXPECT_FALSE(streamLoopsWaitForTheLink(
      *whole, {at::zeros({64, 4}), at::zeros({4, 4})}, comm, cpu));
}

TEST(StreamChunks, LinkBoundAllreducesOfPartialSumsAreExchanged) {
  LaunchInfo launch;
  launch.size = 2;
  launch.local_size = 2;
  launch.launcher = "mpirun";
  Communicator comm{launch, CommunicatorOptions{}};
  const c10::Device cpu(c10::DeviceType::CPU);
  // The row-parallel linear of the test above, as defined: its stream
  // loops are there before the passes.
  std::unique_ptr<Fusion> definition = test::makeRowParallelLinear(
      /*h=*/4, /*d=*/2, /*s=*/2, DataType::Float);
  EXPECT_TRUE(hasStreamLoops(*definition));
  const OneChunkFusion one = compileAtOneChunk(
      *definition, {at::zeros({64, 8}), at::zeros({4, 8})}, comm);
  setMachineModel("cpu", modelWithLink(1e5));
  EXPECT_TRUE(exchangesPartialSumsByDefault(one, cpu));
  setMachineModel("cpu", modelWithLink(1e9));
  EXPECT_FALSE(exchangesPartialSumsByDefault(one, cpu));

  // Without stream loops there is nothing to exchange.
  std::unique_ptr<Fusion> whole = test::makeShardedLinear(DeviceMesh({0, 1}));
  EXPECT_FALSE(hasStreamLoops(*whole));
  setMachineModel("cpu", modelWithLink(1e5));
  EXPECT_FALSE(exchangesPartialSumsByDefault(
      compileAtOneChunk(*whole, {at::zeros({64, 4}), at::zeros({4, 4})}, comm),
      cpu));
}

} // namespace
} // namespace mdfuser
