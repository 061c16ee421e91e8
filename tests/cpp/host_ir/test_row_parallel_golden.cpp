// SPDX-License-Identifier: MIT
//
// The host program of the row-parallel linear (d = 2 devices, s = 3 stream
// chunks, h = 2), compared whole: this program is what mdfuser exists to
// produce, so any change to it should be a deliberate change to this file.
//
// Read it top to bottom:
//  - T2, the output, is allocated once, outside the loop;
//  - the main stream is captured as Stream 0;
//  - each iteration i1 switches to its worker stream, waits for the main
//    stream, takes chunk i1 of the input (T4) and of the output (T5),
//    computes the local partial linear straight into T5 and allreduces T5
//    in place;
//  - the main stream becomes current again and waits for every worker, in a
//    join loop with its own index i2.

#include <gtest/gtest.h>

#include "common/row_parallel.h"
#include "host_ir/lower.h"
#include "host_ir/passes/pass_manager.h"
#include "passes/pipeline.h"

namespace mdfuser {
namespace {

constexpr const char* kExpected =
    R"(%HostIrContainer { (T0_g___bfloat[istreamIdx7{3}, ideviceIdx.x9{2}, iS8{ceilDiv(i0, 3)}, iS10{4}] (DeviceMesh{0 1}), T1_g___bfloat[ideviceIdx.x11{2}, iS2{2}, iS12{4}] (DeviceMesh{0 1})) -> (T2_g___bfloat[istreamIdx15{3}, rdeviceIdx.x24{2}, iS16{ceilDiv(i0, 3)}, iS5{2}] (DeviceMesh{0 1})) :
  T2_g___bfloat[istreamIdx15{3}, rdeviceIdx.x24{2}, iS16{ceilDiv(i0, 3)}, iS5{2}] (DeviceMesh{0 1}) = ALLOCATE(mem_type=global, zero_init=false)
  Stream 0 = GetCurrentStream()
  FOR i1 from 0 to 3:
    SetCurrentStream(Stream i1)
    Synchronize(Stream 0)
    T4_l___bfloat[istreamIdx7{3}, ideviceIdx.x9{2}, iS8{ceilDiv(i0, 3)}, iS10{4}] (DeviceMesh{0 1}) = ShardByStream(T0_g___bfloat[istreamIdx7{3}, ideviceIdx.x9{2}, iS8{ceilDiv(i0, 3)}, iS10{4}] (DeviceMesh{0 1}), stream_index = i1)
    T5_l___bfloat[istreamIdx15{3}, rdeviceIdx.x24{2}, iS16{ceilDiv(i0, 3)}, iS5{2}] (DeviceMesh{0 1}) = ShardByStream(T2_g___bfloat[istreamIdx15{3}, rdeviceIdx.x24{2}, iS16{ceilDiv(i0, 3)}, iS5{2}] (DeviceMesh{0 1}), stream_index = i1)
    T5_l___bfloat[istreamIdx15{3}, rdeviceIdx.x24{2}, iS16{ceilDiv(i0, 3)}, iS5{2}] (DeviceMesh{0 1})
       = linear(T4_l___bfloat[istreamIdx7{3}, ideviceIdx.x9{2}, iS8{ceilDiv(i0, 3)}, iS10{4}] (DeviceMesh{0 1}),
                T1_g___bfloat[ideviceIdx.x11{2}, iS2{2}, iS12{4}] (DeviceMesh{0 1}))
    Communication 0 (type=Allreduce, team=(0 1), input=T5_l___bfloat[istreamIdx15{3}, rdeviceIdx.x24{2}, iS16{ceilDiv(i0, 3)}, iS5{2}] (DeviceMesh{0 1}), output=T5_l___bfloat[istreamIdx15{3}, rdeviceIdx.x24{2}, iS16{ceilDiv(i0, 3)}, iS5{2}] (DeviceMesh{0 1}), backend=NCCL)
    Wait(Communication 0)
  SetCurrentStream(Stream 0)
  FOR i2 from 0 to 3:
    Synchronize(Stream i2)
} // %HostIrContainer
)";

// The same without InplaceAllreduce: the partial sums go to a temporary T3,
// allocated in each iteration and freed after the Wait, never before.
constexpr const char* kExpectedWithCopy =
    R"(%HostIrContainer { (T0_g___bfloat[istreamIdx7{3}, ideviceIdx.x9{2}, iS8{ceilDiv(i0, 3)}, iS10{4}] (DeviceMesh{0 1}), T1_g___bfloat[ideviceIdx.x11{2}, iS2{2}, iS12{4}] (DeviceMesh{0 1})) -> (T2_g___bfloat[istreamIdx15{3}, rdeviceIdx.x24{2}, iS16{ceilDiv(i0, 3)}, iS5{2}] (DeviceMesh{0 1})) :
  T2_g___bfloat[istreamIdx15{3}, rdeviceIdx.x24{2}, iS16{ceilDiv(i0, 3)}, iS5{2}] (DeviceMesh{0 1}) = ALLOCATE(mem_type=global, zero_init=false)
  Stream 0 = GetCurrentStream()
  FOR i1 from 0 to 3:
    SetCurrentStream(Stream i1)
    Synchronize(Stream 0)
    T4_l___bfloat[istreamIdx7{3}, ideviceIdx.x9{2}, iS8{ceilDiv(i0, 3)}, iS10{4}] (DeviceMesh{0 1}) = ShardByStream(T0_g___bfloat[istreamIdx7{3}, ideviceIdx.x9{2}, iS8{ceilDiv(i0, 3)}, iS10{4}] (DeviceMesh{0 1}), stream_index = i1)
    T3_g___bfloat[istreamIdx22{3}, ideviceIdx.x20{2}rf, iS23{ceilDiv(i0, 3)}, iS18{2}, rS21{4}rf] (DeviceMesh{0 1}) = ALLOCATE(mem_type=global, zero_init=false)
    T3_g___bfloat[istreamIdx22{3}, ideviceIdx.x20{2}rf, iS23{ceilDiv(i0, 3)}, iS18{2}, rS21{4}rf] (DeviceMesh{0 1})
       = linear(T4_l___bfloat[istreamIdx7{3}, ideviceIdx.x9{2}, iS8{ceilDiv(i0, 3)}, iS10{4}] (DeviceMesh{0 1}),
                T1_g___bfloat[ideviceIdx.x11{2}, iS2{2}, iS12{4}] (DeviceMesh{0 1}))
    T5_l___bfloat[istreamIdx15{3}, rdeviceIdx.x24{2}, iS16{ceilDiv(i0, 3)}, iS5{2}] (DeviceMesh{0 1}) = ShardByStream(T2_g___bfloat[istreamIdx15{3}, rdeviceIdx.x24{2}, iS16{ceilDiv(i0, 3)}, iS5{2}] (DeviceMesh{0 1}), stream_index = i1)
    Communication 0 (type=Allreduce, team=(0 1), input=T3_g___bfloat[istreamIdx22{3}, ideviceIdx.x20{2}rf, iS23{ceilDiv(i0, 3)}, iS18{2}, rS21{4}rf] (DeviceMesh{0 1}), output=T5_l___bfloat[istreamIdx15{3}, rdeviceIdx.x24{2}, iS16{ceilDiv(i0, 3)}, iS5{2}] (DeviceMesh{0 1}), backend=NCCL)
    Wait(Communication 0)
    Deallocate(T3_g___bfloat[istreamIdx22{3}, ideviceIdx.x20{2}rf, iS23{ceilDiv(i0, 3)}, iS18{2}, rS21{4}rf] (DeviceMesh{0 1}))
  SetCurrentStream(Stream 0)
  FOR i2 from 0 to 3:
    Synchronize(Stream i2)
} // %HostIrContainer
)";

TEST(RowParallelGolden, WholeHostProgramAtTwoDevicesThreeChunks) {
  std::unique_ptr<Fusion> fusion =
      test::makeRowParallelLinear(/*h=*/2, /*d=*/2, /*s=*/3);
  runFusionPasses(fusion.get());
  auto hic = hir::lowerToHostIr(std::move(fusion), {});
  hir::runHostPasses(*hic);
  EXPECT_EQ(hic->toString(), kExpected);
}

TEST(RowParallelGolden, WithoutInplaceAllreduce) {
  std::unique_ptr<Fusion> fusion = test::makeRowParallelLinear(2, 2, 3);
  runFusionPasses(fusion.get());
  auto hic = hir::lowerToHostIr(std::move(fusion), {});
  hir::runHostPasses(*hic, {.inplace_allreduce = false});
  EXPECT_EQ(hic->toString(), kExpectedWithCopy);
}

TEST(RowParallelGolden, PrintingIsDeterministic) {
  auto compile = [] {
    std::unique_ptr<Fusion> fusion = test::makeRowParallelLinear(2, 2, 3);
    runFusionPasses(fusion.get());
    auto hic = hir::lowerToHostIr(std::move(fusion), {});
    hir::runHostPasses(*hic);
    return hic->toString();
  };
  EXPECT_EQ(compile(), compile());
}

} // namespace
} // namespace mdfuser
