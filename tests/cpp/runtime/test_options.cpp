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

// cuda_graph, ring_prologues_first, concurrent_moves and
// fused_matmul_communication: asked for, refused or left to mdfuser, each a
// program of its own (the option is part of the cache key).
TEST(ExecuteOptions, ChoicesAreAskedForOrRefusedByName) {
  using Choice = ExecuteOptions::Choice;
  for (const std::string name :
       {"cuda_graph",
        "ring_prologues_first",
        "concurrent_moves",
        "exchange_allreduce",
        "fused_matmul_communication"}) {
    SCOPED_TRACE(name);
    auto chosen = [&](const ExecuteOptions& options) {
      return name == "cuda_graph"             ? options.cuda_graph
             : name == "ring_prologues_first" ? options.ring_prologues_first
             : name == "concurrent_moves"     ? options.concurrent_moves
             : name == "exchange_allreduce"
                 ? options.exchange_allreduce
                 : options.fused_matmul_communication;
    };
    EXPECT_EQ(chosen(ExecuteOptions::parse({}, {})), Choice::kDefault);
    EXPECT_EQ(chosen(ExecuteOptions::parse({name}, {})), Choice::kOn);
    EXPECT_EQ(chosen(ExecuteOptions::parse({}, {name})), Choice::kOff);
    EXPECT_VALUE_ERROR(
        ExecuteOptions::parse({name}, {name}),
        name + " is both in _enable_options and in _disable_options");
    std::vector<std::string> texts;
    for (const ExecuteOptions& options :
         {ExecuteOptions::parse({}, {}),
          ExecuteOptions::parse({name}, {}),
          ExecuteOptions::parse({}, {name})}) {
      for (const ExecuteOptions::Value& value : options.values()) {
        if (value.name == name) {
          texts.emplace_back(value.text);
        }
      }
    }
    EXPECT_EQ(texts, (std::vector<std::string>{"default", "1", "0"}));
  }
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
      "ring_prologues_first, concurrent_moves, exchange_allreduce, "
      "fused_matmul_communication, host_ir_lowering");
  EXPECT_VALUE_ERROR(
      ExecuteOptions::parse({}, {"host_ir_lowering"}),
      "unknown option 'host_ir_lowering' in _disable_options");
}

} // namespace
} // namespace mdfuser
