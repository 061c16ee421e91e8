// SPDX-License-Identifier: MIT
//
// The fused allgather + linear (LoweringOptions::fused_matmul_communication)
// on the CUDA backend: the allgather of the tokens feeding a column-parallel
// linear becomes one AllgatherLinear statement, where it would otherwise be
// a ring of CollectivePermutes beside per-part GEMMs. Pairs the kernel
// cannot compute (a bias, Float) keep the ring; so does the option off or
// left to mdfuser (auto is off for now). Forced where the kernels are
// unusable it is a ValueError before anything is lowered.

#include <gtest/gtest.h>

#include "common/column_parallel.h"
#include "common/expect_error.h"
#include "common/host_ir_outline.h"
#include "host_ir/lower.h"
#include "host_ir/passes/pass_manager.h"
#include "host_ir/verifier.h"
#include "passes/pipeline.h"

namespace mdfuser {
namespace {

std::unique_ptr<Fusion> makeGatherLinear(
    int64_t d, int64_t s, DataType dtype, bool bias) {
  return test::makeGatheredLinear(/*h=*/6, d, s, dtype, bias);
}

struct Lowered {
  std::unique_ptr<hir::HostIrContainer> hic;
  std::string text;
};

Lowered lower(
    std::unique_ptr<Fusion> fusion,
    FusedMatmulChoice choice,
    int64_t device = 0,
    bool available = true,
    hir::CommunicatorBackend backend = hir::CommunicatorBackend::kCuda) {
  runFusionPasses(fusion.get());
  hir::LoweringOptions options;
  options.device = device;
  options.backend = backend;
  options.fused_matmul_communication = choice;
  options.fused_kernels_available = available;
  auto hic = hir::lowerToHostIr(std::move(fusion), options);
  hir::runHostPasses(*hic, {.symmetric_memory = true});
  hir::verify(*hic, {.buffers_allocated = true});
  std::string text = hic->toString();
  return {std::move(hic), std::move(text)};
}

// Device 0 of two, one stream chunk: T3, the output (T2's columns of this
// device over every token), is allocated and computed by the one statement
// from this device's tokens T0 and its weight rows T1.
constexpr const char* kExpectedAtTwoDevices =
    R"(%HostIrContainer { (T0_g___bfloat[ideviceIdx.x7{2}, iS8{ceilDiv(i0, 2)}, iS1{6}] (DeviceMesh{0 1}), T1_g___bfloat[ideviceIdx.x9{2}, iS10{12}, iS3{6}] (DeviceMesh{0 1})) -> (T2_g___bfloat[ideviceIdx.x11{2}, iS4{i0}, iS12{12}, rS6{6}] (DeviceMesh{0 1})) :
  T2_g___bfloat[ideviceIdx.x11{2}, iS4{i0}, iS12{12}, rS6{6}] (DeviceMesh{0 1}) = ALLOCATE(mem_type=global, zero_init=false)
  T2_g___bfloat[ideviceIdx.x11{2}, iS4{i0}, iS12{12}, rS6{6}] (DeviceMesh{0 1}) = AllgatherLinear(T0_g___bfloat[ideviceIdx.x7{2}, iS8{ceilDiv(i0, 2)}, iS1{6}] (DeviceMesh{0 1}), T1_g___bfloat[ideviceIdx.x9{2}, iS10{12}, iS3{6}] (DeviceMesh{0 1}), team=(0 1), kernel=sm90)
} // %HostIrContainer
)";

TEST(FusedMatmulGolden, AllgatherLinearAtTwoDevices) {
  EXPECT_EQ(
      lower(
          makeGatherLinear(2, 1, DataType::BFloat16, false),
          FusedMatmulChoice::kOn)
          .text,
      kExpectedAtTwoDevices);
}

TEST(FusedMatmulGolden, OneStatementReplacesTheRing) {
  for (int64_t d : {2, 3}) {
    for (int64_t device = 0; device < d; ++device) {
      SCOPED_TRACE(testing::Message() << "d = " << d << ", device " << device);
      for (DataType dtype : {DataType::BFloat16, DataType::Half}) {
        const std::string fused =
            lower(makeGatherLinear(d, 1, dtype, false), FusedMatmulChoice::kOn)
                .text;
        EXPECT_EQ(test::occurrences(fused, "= AllgatherLinear("), 1) << fused;
        EXPECT_EQ(test::occurrences(fused, "CollectivePermute"), 0) << fused;
        EXPECT_EQ(test::occurrences(fused, "RingChunk"), 0) << fused;
        EXPECT_EQ(test::occurrences(fused, "= linear("), 0) << fused;
        const std::string team = d == 2 ? "team=(0 1)," : "team=(0 1 2),";
        EXPECT_EQ(test::occurrences(fused, team + " kernel=sm90)"), 1) << fused;
      }
    }
  }
}

TEST(FusedMatmulGolden, PairsTheKernelCannotComputeKeepTheRing) {
  for (int64_t d : {2, 3}) {
    SCOPED_TRACE(testing::Message() << "d = " << d);
    const std::string with_bias =
        lower(
            makeGatherLinear(d, 1, DataType::BFloat16, true),
            FusedMatmulChoice::kOn)
            .text;
    const std::string of_float =
        lower(
            makeGatherLinear(d, 1, DataType::Float, false),
            FusedMatmulChoice::kOn)
            .text;
    for (const std::string& program : {with_bias, of_float}) {
      EXPECT_EQ(test::occurrences(program, "AllgatherLinear"), 0) << program;
      EXPECT_EQ(test::occurrences(program, "type=CollectivePermute"), 1)
          << program;
      EXPECT_EQ(test::occurrences(program, "= linear("), 2) << program;
    }
  }
}

TEST(FusedMatmulGolden, OffAndAutoKeepTheRing) {
  for (FusedMatmulChoice choice :
       {FusedMatmulChoice::kOff, FusedMatmulChoice::kAuto}) {
    const std::string ring =
        lower(makeGatherLinear(2, 1, DataType::BFloat16, false), choice).text;
    EXPECT_EQ(test::occurrences(ring, "AllgatherLinear"), 0) << ring;
    EXPECT_EQ(test::occurrences(ring, "type=CollectivePermute"), 1) << ring;
  }
  // Auto and off ask nothing of the kernels: no error where they are
  // missing.
  const std::string ring =
      lower(
          makeGatherLinear(2, 1, DataType::BFloat16, false),
          FusedMatmulChoice::kAuto,
          0,
          /*available=*/false)
          .text;
  EXPECT_EQ(test::occurrences(ring, "type=CollectivePermute"), 1) << ring;
}

// Inside a Stream loop the ring stays, also when the kernel is forced: the
// kernel computes the whole GEMM while the rows arrive, which the loop's
// chunks would cut into launches; the ring pipelines the chunks instead.
TEST(FusedMatmulGolden, InsideAStreamLoopTheRingStays) {
  for (int64_t d : {2, 3}) {
    SCOPED_TRACE(testing::Message() << "d = " << d);
    const std::string text =
        lower(
            makeGatherLinear(d, 2, DataType::BFloat16, false),
            FusedMatmulChoice::kOn)
            .text;
    EXPECT_EQ(test::occurrences(text, "AllgatherLinear"), 0) << text;
    EXPECT_EQ(test::occurrences(text, "type=CollectivePermute"), 1) << text;
  }
}

TEST(FusedMatmulGolden, ForcedWhereTheKernelsAreUnusableIsAValueError) {
  EXPECT_VALUE_ERROR(
      lower(
          makeGatherLinear(2, 1, DataType::BFloat16, false),
          FusedMatmulChoice::kOn,
          0,
          /*available=*/false),
      "fused_matmul_communication\"] asks for the fused allgather + linear "
      "kernel, which this run cannot have: this device or build has no "
      "fused kernels");
  EXPECT_VALUE_ERROR(
      lower(
          makeGatherLinear(2, 1, DataType::BFloat16, false),
          FusedMatmulChoice::kOn,
          0,
          /*available=*/true,
          hir::CommunicatorBackend::kNccl),
      "it needs the CUDA communication backend (CommunicatorBackend.cuda), "
      "got NCCL");
}

} // namespace
} // namespace mdfuser
