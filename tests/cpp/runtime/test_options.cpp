// SPDX-License-Identifier: MIT

#include <gtest/gtest.h>

#include "common/expect_error.h"
#include "runtime/options.h"

namespace mdfuser {
namespace {

TEST(DumpOptions, ParsesACommaSeparatedList) {
  DumpOptions options = DumpOptions::parse("host_ir, fusion_ir");
  EXPECT_TRUE(options.host_ir);
  EXPECT_TRUE(options.fusion_ir);
  EXPECT_FALSE(options.host_ir_passes);
  EXPECT_FALSE(options.fusion_ir_passes);
}

TEST(DumpOptions, EmptyMeansNothing) {
  DumpOptions options = DumpOptions::parse("");
  EXPECT_FALSE(
      options.host_ir || options.fusion_ir || options.host_ir_passes ||
      options.fusion_ir_passes);
}

TEST(DumpOptions, UnknownNameListsTheValidOnes) {
  EXPECT_VALUE_ERROR(
      DumpOptions::parse("host_ir,kernel_ir"),
      "unknown dump option 'kernel_ir' in NVFUSER_DUMP/MDFUSER_DUMP; valid "
      "options are: fusion_ir, fusion_ir_passes, host_ir, host_ir_passes");
}

TEST(ExecuteOptions, ComputeCanStayOnTheMainStream) {
  EXPECT_FALSE(ExecuteOptions::parse({}, {}).compute_on_main_stream);
  EXPECT_TRUE(ExecuteOptions::parse({"compute_on_main_stream"}, {})
                  .compute_on_main_stream);
}

TEST(ExecuteOptions, RingDecompositionIsChosenByName) {
  EXPECT_FALSE(ExecuteOptions::parse({}, {}).ring_decomposition);
  EXPECT_TRUE(
      ExecuteOptions::parse({"ring_decomposition"}, {}).ring_decomposition);
}

TEST(ExecuteOptions, CudaGraphsAreAskedForOrRefusedByName) {
  using Graphs = ExecuteOptions::Graphs;
  EXPECT_EQ(ExecuteOptions::parse({}, {}).cuda_graph, Graphs::kDefault);
  EXPECT_EQ(ExecuteOptions::parse({"cuda_graph"}, {}).cuda_graph, Graphs::kOn);
  EXPECT_EQ(ExecuteOptions::parse({}, {"cuda_graph"}).cuda_graph, Graphs::kOff);
  EXPECT_VALUE_ERROR(
      ExecuteOptions::parse({"cuda_graph"}, {"cuda_graph"}),
      "cuda_graph is both in _enable_options and in _disable_options");
  // Each a program of its own: the option is part of the cache key.
  std::vector<std::string> texts;
  for (const ExecuteOptions& options :
       {ExecuteOptions::parse({}, {}),
        ExecuteOptions::parse({"cuda_graph"}, {}),
        ExecuteOptions::parse({}, {"cuda_graph"})}) {
    for (const ExecuteOptions::Value& value : options.values()) {
      if (value.name == "cuda_graph") {
        texts.emplace_back(value.text);
      }
    }
  }
  EXPECT_EQ(texts, (std::vector<std::string>{"default", "1", "0"}));
}

TEST(ExecuteOptions, RingProloguesFirstIsChosenByName) {
  EXPECT_FALSE(ExecuteOptions::parse({}, {}).ring_prologues_first);
  const ExecuteOptions options =
      ExecuteOptions::parse({"ring_prologues_first"}, {});
  EXPECT_TRUE(options.ring_prologues_first);
  bool listed = false;
  for (const ExecuteOptions::Value& value : options.values()) {
    listed |= value.name == "ring_prologues_first" && value.number == 1;
  }
  EXPECT_TRUE(listed);
}

TEST(ExecuteOptions, InplaceAllreduceCanBeDisabled) {
  EXPECT_TRUE(ExecuteOptions::parse({}, {}).inplace_allreduce);
  EXPECT_FALSE(
      ExecuteOptions::parse({}, {"inplace_allreduce"}).inplace_allreduce);
}

TEST(ExecuteOptions, ReferenceNamesAreAcceptedAndUnknownNamesAreNot) {
  // nvFuser's names without meaning in mdfuser change nothing.
  const ExecuteOptions options = ExecuteOptions::parse(
      {"host_ir_lowering", "fast_math"}, {"infer_contiguity", "kernel_reuse"});
  EXPECT_TRUE(options.inplace_allreduce);
  EXPECT_FALSE(options.compute_on_main_stream);
  EXPECT_VALUE_ERROR(
      ExecuteOptions::parse({"warp_specialize"}, {}),
      "unknown option 'warp_specialize' in _enable_options; valid options "
      "are: compute_on_main_stream, ring_decomposition, cuda_graph, "
      "ring_prologues_first, host_ir_lowering");
  EXPECT_VALUE_ERROR(
      ExecuteOptions::parse({}, {"host_ir_lowering"}),
      "unknown option 'host_ir_lowering' in _disable_options");
}

} // namespace
} // namespace mdfuser
