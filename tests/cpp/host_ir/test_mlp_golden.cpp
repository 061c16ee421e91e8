// SPDX-License-Identifier: MIT
//
// The host programs of the MLP block (d = 2 devices, s = 2 stream chunks,
// h = 2) in its tensor-parallel and sequence-parallel forms, compared whole,
// as the row-parallel linear's is: they are what mdfuser compiles a
// transformer block into.
//
// TP: each chunk of tokens runs the column-parallel linear, the gelu and the
// row-parallel linear on local shards, allreduces the partial sums in place
// and adds the bias once. SP: each chunk is first allgathered along the
// tokens, and the row-parallel linear's partial sums are reduce-scattered
// back along them.

#include <gtest/gtest.h>

#include "common/transformer_mlp.h"
#include "host_ir/lower.h"
#include "host_ir/passes/pass_manager.h"
#include "passes/pipeline.h"

namespace mdfuser {
namespace {

std::string compile(const std::string& mode) {
  auto fusion = test::makeMlp(/*h=*/2, /*d=*/2, /*s=*/2, mode);
  runFusionPasses(fusion.get());
  auto hic = hir::lowerToHostIr(std::move(fusion), {});
  hir::runHostPasses(*hic);
  return hic->toString();
}

constexpr const char* kTensorParallel =
    R"(%HostIrContainer { (T0_g___bfloat[istreamIdx24{2}, iS25{ceilDiv(i0, 2)}, iS1{2}] (DeviceMesh{0 1}), T1_g___bfloat[ideviceIdx.x18{2}, iS19{4}, iS3{2}] (DeviceMesh{0 1}), T2_g___bfloat[ideviceIdx.x20{2}, iS21{4}] (DeviceMesh{0 1}), T3_g___bfloat[ideviceIdx.x22{2}, iS5{2}, iS23{4}] (DeviceMesh{0 1}), T4_g___bfloat[iS7{2}] (DeviceMesh{0 1})) -> (T8_g___bfloat[istreamIdx40{2}, iS41{ceilDiv(i0, 2)}, iS16{2}] (DeviceMesh{0 1})) :
  T8_g___bfloat[istreamIdx40{2}, iS41{ceilDiv(i0, 2)}, iS16{2}] (DeviceMesh{0 1}) = ALLOCATE(mem_type=global, zero_init=false)
  Stream 0 = GetCurrentStream()
  FOR i1 from 0 to 2:
    SetCurrentStream(Stream i1)
    Synchronize(Stream 0)
    T11_l___bfloat[istreamIdx24{2}, iS25{ceilDiv(i0, 2)}, iS1{2}] (DeviceMesh{0 1}) = ShardByStream(T0_g___bfloat[istreamIdx24{2}, iS25{ceilDiv(i0, 2)}, iS1{2}] (DeviceMesh{0 1}), stream_index = i1)
    T5_g___bfloat[istreamIdx28{2}, ideviceIdx.x26{2}, iS29{ceilDiv(i0, 2)}, iS27{4}, rS10{2}] (DeviceMesh{0 1}) = ALLOCATE(mem_type=global, zero_init=false)
    T5_g___bfloat[istreamIdx28{2}, ideviceIdx.x26{2}, iS29{ceilDiv(i0, 2)}, iS27{4}, rS10{2}] (DeviceMesh{0 1})
       = linear(T11_l___bfloat[istreamIdx24{2}, iS25{ceilDiv(i0, 2)}, iS1{2}] (DeviceMesh{0 1}),
                T1_g___bfloat[ideviceIdx.x18{2}, iS19{4}, iS3{2}] (DeviceMesh{0 1}),
                T2_g___bfloat[ideviceIdx.x20{2}, iS21{4}] (DeviceMesh{0 1}))
    T7_g___bfloat[istreamIdx36{2}, ideviceIdx.x34{2}, iS37{ceilDiv(i0, 2)}, iS35{4}] (DeviceMesh{0 1}) = ALLOCATE(mem_type=global, zero_init=false)
    T7_g___bfloat[istreamIdx36{2}, ideviceIdx.x34{2}, iS37{ceilDiv(i0, 2)}, iS35{4}] (DeviceMesh{0 1})
       = gelu_tanh(T5_g___bfloat[istreamIdx28{2}, ideviceIdx.x26{2}, iS29{ceilDiv(i0, 2)}, iS27{4}, rS10{2}] (DeviceMesh{0 1}))
    Deallocate(T5_g___bfloat[istreamIdx28{2}, ideviceIdx.x26{2}, iS29{ceilDiv(i0, 2)}, iS27{4}, rS10{2}] (DeviceMesh{0 1}))
    T9_g___bfloat[istreamIdx47{2}, rdeviceIdx.x56{2}, iS48{ceilDiv(i0, 2)}, iS43{2}] (DeviceMesh{0 1}) = ALLOCATE(mem_type=global, zero_init=false)
    T9_g___bfloat[istreamIdx47{2}, rdeviceIdx.x56{2}, iS48{ceilDiv(i0, 2)}, iS43{2}] (DeviceMesh{0 1})
       = linear(T7_g___bfloat[istreamIdx36{2}, ideviceIdx.x34{2}, iS37{ceilDiv(i0, 2)}, iS35{4}] (DeviceMesh{0 1}),
                T3_g___bfloat[ideviceIdx.x22{2}, iS5{2}, iS23{4}] (DeviceMesh{0 1}))
    Deallocate(T7_g___bfloat[istreamIdx36{2}, ideviceIdx.x34{2}, iS37{ceilDiv(i0, 2)}, iS35{4}] (DeviceMesh{0 1}))
    Communication 0 (type=Allreduce, team=(0 1), input=T9_g___bfloat[istreamIdx47{2}, rdeviceIdx.x56{2}, iS48{ceilDiv(i0, 2)}, iS43{2}] (DeviceMesh{0 1}), output=T9_g___bfloat[istreamIdx47{2}, rdeviceIdx.x56{2}, iS48{ceilDiv(i0, 2)}, iS43{2}] (DeviceMesh{0 1}), backend=NCCL)
    Wait(Communication 0)
    T12_l___bfloat[istreamIdx40{2}, iS41{ceilDiv(i0, 2)}, iS16{2}] (DeviceMesh{0 1}) = ShardByStream(T8_g___bfloat[istreamIdx40{2}, iS41{ceilDiv(i0, 2)}, iS16{2}] (DeviceMesh{0 1}), stream_index = i1)
    T12_l___bfloat[istreamIdx40{2}, iS41{ceilDiv(i0, 2)}, iS16{2}] (DeviceMesh{0 1})
       = add(T9_g___bfloat[istreamIdx47{2}, rdeviceIdx.x56{2}, iS48{ceilDiv(i0, 2)}, iS43{2}] (DeviceMesh{0 1}),
             T4_g___bfloat[iS7{2}] (DeviceMesh{0 1}))
    Deallocate(T9_g___bfloat[istreamIdx47{2}, rdeviceIdx.x56{2}, iS48{ceilDiv(i0, 2)}, iS43{2}] (DeviceMesh{0 1}))
  SetCurrentStream(Stream 0)
  FOR i2 from 0 to 2:
    Synchronize(Stream i2)
} // %HostIrContainer
)";
constexpr const char* kSequenceParallel =
    R"(%HostIrContainer { (T0_g___bfloat[istreamIdx24{2}, ideviceIdx.x26{2}, iS27{ceilDiv(ceilDiv(i0, 2), 2)}, iS1{2}] (DeviceMesh{0 1}), T1_g___bfloat[ideviceIdx.x18{2}, iS19{4}, iS3{2}] (DeviceMesh{0 1}), T2_g___bfloat[ideviceIdx.x20{2}, iS21{4}] (DeviceMesh{0 1}), T3_g___bfloat[ideviceIdx.x22{2}, iS5{2}, iS23{4}] (DeviceMesh{0 1}), T4_g___bfloat[iS7{2}] (DeviceMesh{0 1})) -> (T8_g___bfloat[istreamIdx28{2}, ideviceIdx.x30{2}, iS31{ceilDiv(ceilDiv(i0, 2), 2)}, iS16{2}] (DeviceMesh{0 1})) :
  T8_g___bfloat[istreamIdx28{2}, ideviceIdx.x30{2}, iS31{ceilDiv(ceilDiv(i0, 2), 2)}, iS16{2}] (DeviceMesh{0 1}) = ALLOCATE(mem_type=global, zero_init=false)
  Stream 0 = GetCurrentStream()
  FOR i1 from 0 to 2:
    SetCurrentStream(Stream i1)
    Synchronize(Stream 0)
    T13_l___bfloat[istreamIdx24{2}, ideviceIdx.x26{2}, iS27{ceilDiv(ceilDiv(i0, 2), 2)}, iS1{2}] (DeviceMesh{0 1}) = ShardByStream(T0_g___bfloat[istreamIdx24{2}, ideviceIdx.x26{2}, iS27{ceilDiv(ceilDiv(i0, 2), 2)}, iS1{2}] (DeviceMesh{0 1}), stream_index = i1)
    T9_g___bfloat[istreamIdx46{2}, iS47{ceilDiv(i0, 2)}, iS45{2}] (DeviceMesh{0 1}) = ALLOCATE(mem_type=global, zero_init=false)
    Communication 0 (type=Allgather, team=(0 1), axis=0, input=T13_l___bfloat[istreamIdx24{2}, ideviceIdx.x26{2}, iS27{ceilDiv(ceilDiv(i0, 2), 2)}, iS1{2}] (DeviceMesh{0 1}), output=T9_g___bfloat[istreamIdx46{2}, iS47{ceilDiv(i0, 2)}, iS45{2}] (DeviceMesh{0 1}), backend=NCCL)
    Wait(Communication 0)
    T5_g___bfloat[istreamIdx34{2}, ideviceIdx.x32{2}, iS35{ceilDiv(i0, 2)}, iS33{4}, rS10{2}] (DeviceMesh{0 1}) = ALLOCATE(mem_type=global, zero_init=false)
    T5_g___bfloat[istreamIdx34{2}, ideviceIdx.x32{2}, iS35{ceilDiv(i0, 2)}, iS33{4}, rS10{2}] (DeviceMesh{0 1})
       = linear(T9_g___bfloat[istreamIdx46{2}, iS47{ceilDiv(i0, 2)}, iS45{2}] (DeviceMesh{0 1}),
                T1_g___bfloat[ideviceIdx.x18{2}, iS19{4}, iS3{2}] (DeviceMesh{0 1}),
                T2_g___bfloat[ideviceIdx.x20{2}, iS21{4}] (DeviceMesh{0 1}))
    Deallocate(T9_g___bfloat[istreamIdx46{2}, iS47{ceilDiv(i0, 2)}, iS45{2}] (DeviceMesh{0 1}))
    T7_g___bfloat[istreamIdx42{2}, ideviceIdx.x40{2}, iS43{ceilDiv(i0, 2)}, iS41{4}] (DeviceMesh{0 1}) = ALLOCATE(mem_type=global, zero_init=false)
    T7_g___bfloat[istreamIdx42{2}, ideviceIdx.x40{2}, iS43{ceilDiv(i0, 2)}, iS41{4}] (DeviceMesh{0 1})
       = gelu_tanh(T5_g___bfloat[istreamIdx34{2}, ideviceIdx.x32{2}, iS35{ceilDiv(i0, 2)}, iS33{4}, rS10{2}] (DeviceMesh{0 1}))
    Deallocate(T5_g___bfloat[istreamIdx34{2}, ideviceIdx.x32{2}, iS35{ceilDiv(i0, 2)}, iS33{4}, rS10{2}] (DeviceMesh{0 1}))
    T12_g___bfloat[istreamIdx67{2}, ideviceIdx.x65{2}rf, iS68{ceilDiv(i0, 2)}, iS63{2}, rS66{4}rf] (DeviceMesh{0 1}) = ALLOCATE(mem_type=global, zero_init=false)
    T12_g___bfloat[istreamIdx67{2}, ideviceIdx.x65{2}rf, iS68{ceilDiv(i0, 2)}, iS63{2}, rS66{4}rf] (DeviceMesh{0 1})
       = linear(T7_g___bfloat[istreamIdx42{2}, ideviceIdx.x40{2}, iS43{ceilDiv(i0, 2)}, iS41{4}] (DeviceMesh{0 1}),
                T3_g___bfloat[ideviceIdx.x22{2}, iS5{2}, iS23{4}] (DeviceMesh{0 1}))
    Deallocate(T7_g___bfloat[istreamIdx42{2}, ideviceIdx.x40{2}, iS43{ceilDiv(i0, 2)}, iS41{4}] (DeviceMesh{0 1}))
    T10_g___bfloat[istreamIdx51{2}, ideviceIdx.x53{2}, iS54{ceilDiv(ceilDiv(i0, 2), 2)}, iS49{2}, rS70{2}] (DeviceMesh{0 1}) = ALLOCATE(mem_type=global, zero_init=false)
    Communication 1 (type=ReduceScatter, team=(0 1), axis=0, input=T12_g___bfloat[istreamIdx67{2}, ideviceIdx.x65{2}rf, iS68{ceilDiv(i0, 2)}, iS63{2}, rS66{4}rf] (DeviceMesh{0 1}), output=T10_g___bfloat[istreamIdx51{2}, ideviceIdx.x53{2}, iS54{ceilDiv(ceilDiv(i0, 2), 2)}, iS49{2}, rS70{2}] (DeviceMesh{0 1}), backend=NCCL)
    Wait(Communication 1)
    Deallocate(T12_g___bfloat[istreamIdx67{2}, ideviceIdx.x65{2}rf, iS68{ceilDiv(i0, 2)}, iS63{2}, rS66{4}rf] (DeviceMesh{0 1}))
    T14_l___bfloat[istreamIdx28{2}, ideviceIdx.x30{2}, iS31{ceilDiv(ceilDiv(i0, 2), 2)}, iS16{2}] (DeviceMesh{0 1}) = ShardByStream(T8_g___bfloat[istreamIdx28{2}, ideviceIdx.x30{2}, iS31{ceilDiv(ceilDiv(i0, 2), 2)}, iS16{2}] (DeviceMesh{0 1}), stream_index = i1)
    T14_l___bfloat[istreamIdx28{2}, ideviceIdx.x30{2}, iS31{ceilDiv(ceilDiv(i0, 2), 2)}, iS16{2}] (DeviceMesh{0 1})
       = add(T10_g___bfloat[istreamIdx51{2}, ideviceIdx.x53{2}, iS54{ceilDiv(ceilDiv(i0, 2), 2)}, iS49{2}, rS70{2}] (DeviceMesh{0 1}),
             T4_g___bfloat[iS7{2}] (DeviceMesh{0 1}))
    Deallocate(T10_g___bfloat[istreamIdx51{2}, ideviceIdx.x53{2}, iS54{ceilDiv(ceilDiv(i0, 2), 2)}, iS49{2}, rS70{2}] (DeviceMesh{0 1}))
  SetCurrentStream(Stream 0)
  FOR i2 from 0 to 2:
    Synchronize(Stream i2)
} // %HostIrContainer
)";

TEST(MlpGolden, TensorParallelAtTwoDevicesTwoChunks) {
  EXPECT_EQ(compile("tp"), kTensorParallel);
}

TEST(MlpGolden, SequenceParallelAtTwoDevicesTwoChunks) {
  EXPECT_EQ(compile("sp"), kSequenceParallel);
}

} // namespace
} // namespace mdfuser
