// SPDX-License-Identifier: MIT
//
// The fused matmul–communication kernels (LoweringOptions::
// fused_matmul_communication) on the CUDA backend: the allgather of the
// tokens feeding a column-parallel linear becomes one AllgatherLinear
// statement, and a row-parallel linear whose partial sums are
// reduce-scattered along the tokens one LinearReduceScatter, where each
// would otherwise be a ring of CollectivePermutes beside per-part GEMMs.
// Pairs the kernels cannot compute (Float, and for the allgather a bias)
// keep the ring; so do pairs inside Stream loops, and the option off or
// left to mdfuser (auto is off for now). Forced where the kernels are
// unusable it is a ValueError before anything is lowered.

#include <gtest/gtest.h>

#include "common/column_parallel.h"
#include "common/expect_error.h"
#include "common/host_ir_outline.h"
#include "common/row_parallel.h"
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

std::unique_ptr<Fusion> makeLinearScatter(
    int64_t d, int64_t s, DataType dtype, bool bias) {
  return test::makeScatteredLinear(/*h=*/6, d, s, dtype, bias);
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
      "and linear + reduce-scatter kernels, which this run cannot have: this "
      "device or build has no fused kernels");
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

// Device 0 of two, one stream chunk: T2, the output (this device's rows of
// the sum), is allocated and computed by the one statement from this
// device's part of in_features of the tokens T0 and of the weight T1, by
// the kernel whose members pull the partial sums (sm90_pulls).
constexpr const char* kExpectedLinearReduceScatterAtTwoDevices =
    R"(%HostIrContainer { (T0_g___bfloat[ideviceIdx.x7{2}, iS0{i0}, iS8{12}] (DeviceMesh{0 1}), T1_g___bfloat[ideviceIdx.x9{2}, iS2{6}, iS10{12}] (DeviceMesh{0 1})) -> (T2_g___bfloat[ideviceIdx.x11{2}, iS12{ceilDiv(i0, 2)}, iS5{6}, rS24{2}] (DeviceMesh{0 1})) :
  T2_g___bfloat[ideviceIdx.x11{2}, iS12{ceilDiv(i0, 2)}, iS5{6}, rS24{2}] (DeviceMesh{0 1}) = ALLOCATE(mem_type=global, zero_init=false)
  T2_g___bfloat[ideviceIdx.x11{2}, iS12{ceilDiv(i0, 2)}, iS5{6}, rS24{2}] (DeviceMesh{0 1}) = LinearReduceScatter(T0_g___bfloat[ideviceIdx.x7{2}, iS0{i0}, iS8{12}] (DeviceMesh{0 1}), T1_g___bfloat[ideviceIdx.x9{2}, iS2{6}, iS10{12}] (DeviceMesh{0 1}), team=(0 1), kernel=sm90_pulls)
} // %HostIrContainer
)";

TEST(FusedMatmulGolden, LinearReduceScatterAtTwoDevices) {
  EXPECT_EQ(
      lower(
          makeLinearScatter(2, 1, DataType::BFloat16, false),
          FusedMatmulChoice::kOn)
          .text,
      kExpectedLinearReduceScatterAtTwoDevices);
}

TEST(FusedMatmulGolden, OneStatementReplacesTheReduceScatterRing) {
  // At three devices also the direct reduce-scatter (direct_reduce_scatter,
  // on by default) that lowering makes there otherwise.
  for (int64_t d : {2, 3}) {
    for (int64_t device = 0; device < d; ++device) {
      SCOPED_TRACE(testing::Message() << "d = " << d << ", device " << device);
      for (DataType dtype : {DataType::BFloat16, DataType::Half}) {
        const std::string fused =
            lower(makeLinearScatter(d, 1, dtype, false), FusedMatmulChoice::kOn)
                .text;
        EXPECT_EQ(test::occurrences(fused, "= LinearReduceScatter("), 1)
            << fused;
        EXPECT_EQ(test::occurrences(fused, "CollectivePermute"), 0) << fused;
        EXPECT_EQ(test::occurrences(fused, "type=ReduceScatter"), 0) << fused;
        EXPECT_EQ(test::occurrences(fused, "= linear("), 0) << fused;
        EXPECT_EQ(test::occurrences(fused, "= add("), 0) << fused;
        const std::string team = d == 2 ? "team=(0 1)," : "team=(0 1 2),";
        EXPECT_EQ(test::occurrences(fused, team + " kernel=sm90_pulls)"), 1)
            << fused;
      }
    }
  }
}

// A bias is not the kernel's to add: decomposeReshardings adds it after the
// sum (once, not on every device's partial sum), so the linear and its
// reduce-scatter are fused and the bias is added to the reduced rows.
TEST(FusedMatmulGolden, ABiasIsAddedAfterTheFusedReduceScatter) {
  const std::string text =
      test::outline(*lower(
                         makeLinearScatter(2, 1, DataType::BFloat16, true),
                         FusedMatmulChoice::kOn)
                         .hic);
  EXPECT_EQ(
      text,
      "Allocate T4\n"
      "T4 = LinearReduceScatter(T0, T1)\n"
      "Allocate T3\n"
      "T3 = add(T4, T2)\n"
      "Deallocate T4\n");
}

TEST(FusedMatmulGolden, AReduceScatterOfFloatsKeepsTheRing) {
  for (int64_t d : {2, 3}) {
    SCOPED_TRACE(testing::Message() << "d = " << d);
    const std::string program =
        lower(
            makeLinearScatter(d, 1, DataType::Float, false),
            FusedMatmulChoice::kOn)
            .text;
    EXPECT_EQ(test::occurrences(program, "LinearReduceScatter"), 0) << program;
    EXPECT_GE(test::occurrences(program, "type=CollectivePermute"), 1)
        << program;
  }
}

TEST(FusedMatmulGolden, OffAndAutoKeepTheReduceScatterRing) {
  for (FusedMatmulChoice choice :
       {FusedMatmulChoice::kOff, FusedMatmulChoice::kAuto}) {
    const std::string ring =
        lower(makeLinearScatter(2, 1, DataType::BFloat16, false), choice).text;
    EXPECT_EQ(test::occurrences(ring, "LinearReduceScatter"), 0) << ring;
    EXPECT_EQ(test::occurrences(ring, "type=CollectivePermute"), 1) << ring;
  }
}

// The kernel scatters the sum; an allreduce of the partial sums, which
// every device receives whole, keeps its ring.
TEST(FusedMatmulGolden, AnAllreduceKeepsItsRing) {
  auto fusion = std::make_unique<Fusion>();
  TensorView* x = fusion->defineTensor({-1, 24}, {}, DataType::BFloat16);
  TensorView* w = fusion->defineTensor({6, 24}, {}, DataType::BFloat16);
  fusion->addOutput(linear(x, w));
  for (TensorView* tv : {x, w}) {
    tv->setDeviceMesh(DeviceMesh({0, 1}));
    tv->outerSplit(1, 2);
    tv->parallelize(1, ParallelType::DIDx);
  }
  const std::string text =
      lower(std::move(fusion), FusedMatmulChoice::kOn).text;
  EXPECT_EQ(test::occurrences(text, "LinearReduceScatter"), 0) << text;
  EXPECT_GE(test::occurrences(text, "type=CollectivePermute"), 1) << text;
}

// As for the allgather: inside a Stream loop the ring pipelines the chunks.
TEST(FusedMatmulGolden, InsideAStreamLoopTheReduceScatterRingStays) {
  for (int64_t d : {2, 3}) {
    SCOPED_TRACE(testing::Message() << "d = " << d);
    const std::string text =
        lower(
            makeLinearScatter(d, 2, DataType::BFloat16, false),
            FusedMatmulChoice::kOn)
            .text;
    EXPECT_EQ(test::occurrences(text, "LinearReduceScatter"), 0) << text;
    EXPECT_GE(test::occurrences(text, "type=CollectivePermute"), 1) << text;
  }
}

} // namespace
} // namespace mdfuser
