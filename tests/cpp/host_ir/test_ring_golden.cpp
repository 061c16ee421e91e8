// SPDX-License-Identifier: MIT
//
// The host programs of the ring decompositions (LoweringOptions::
// ring_decomposition) at d = 2 devices, seen from device 0, compared whole.
//
// The sequence-parallel MLP (one stream chunk) holds two of them:
//  - allgather + column-parallel linear: T8, the gathered input, receives
//    this device's own part (RingChunk index 0) by a copy; loop i1 moves the
//    part held (index (2 - i1) % 2) to the next device on the communication
//    stream while the linear consumes it on the compute stream, and waits
//    for the part arriving (index (3 - i1) % 2) after the GEMM; the last
//    part is consumed after the loop, moving nowhere;
//  - row-parallel linear + reduce-scatter: T9 starts as this device's
//    partial sum of the other device's part (index 1); loop i2 sends it on,
//    receives the previous device's partial sum of this device's part into
//    T18, and the linear adds T18 as its C operand (an addmm) while
//    computing its own partial sum, leaving T9 fully reduced.
// The row-parallel linear with an allreduce runs the reduce-scatter ring in
// place on the output's parts (loop i2), then an allgather ring of the
// reduced parts (loop i3).

#include <gtest/gtest.h>

#include "common/host_ir_outline.h"
#include "common/row_parallel.h"
#include "common/transformer_mlp.h"
#include "host_ir/lower.h"
#include "host_ir/passes/pass_manager.h"
#include "passes/pipeline.h"

namespace mdfuser {
namespace {

constexpr const char* kExpectedMlp =
    R"(%HostIrContainer { (T0_g___bfloat[ideviceIdx.x24{2}, iS25{ceilDiv(i0, 2)}, iS1{2}] (DeviceMesh{0 1}), T1_g___bfloat[ideviceIdx.x18{2}, iS19{4}, iS3{2}] (DeviceMesh{0 1}), T2_g___bfloat[ideviceIdx.x20{2}, iS21{4}] (DeviceMesh{0 1}), T3_g___bfloat[ideviceIdx.x22{2}, iS5{2}, iS23{4}] (DeviceMesh{0 1}), T4_g___bfloat[iS7{2}] (DeviceMesh{0 1})) -> (T8_g___bfloat[ideviceIdx.x26{2}, iS27{ceilDiv(i0, 2)}, iS16{2}] (DeviceMesh{0 1})) :
  Stream 0 = GetCurrentStream()
  T9_g___bfloat[iS34{i0}, iS35{2}] (DeviceMesh{0 1}) = ALLOCATE(mem_type=global, zero_init=false)
  T13_l___bfloat[iS34{i0}, iS35{2}] (DeviceMesh{0 1}) = RingChunk(T9_g___bfloat[iS34{i0}, iS35{2}] (DeviceMesh{0 1}), axis = 0, index = 0, parts = 2)
  T13_l___bfloat[iS34{i0}, iS35{2}] (DeviceMesh{0 1})
     = set(T0_g___bfloat[ideviceIdx.x24{2}, iS25{ceilDiv(i0, 2)}, iS1{2}] (DeviceMesh{0 1}))
  T5_g___bfloat[ideviceIdx.x28{2}, iS8{i0}, iS29{4}, rS10{2}] (DeviceMesh{0 1}) = ALLOCATE(mem_type=global, zero_init=false)
  FOR i1 from 0 to 1:
    T14_l___bfloat[iS34{i0}, iS35{2}] (DeviceMesh{0 1}) = RingChunk(T9_g___bfloat[iS34{i0}, iS35{2}] (DeviceMesh{0 1}), axis = 0, index = (2 - i1) % 2, parts = 2)
    T15_l___bfloat[iS34{i0}, iS35{2}] (DeviceMesh{0 1}) = RingChunk(T9_g___bfloat[iS34{i0}, iS35{2}] (DeviceMesh{0 1}), axis = 0, index = (3 - i1) % 2, parts = 2)
    SetCurrentStream(CommunicationStream 0)
    Synchronize(Stream 0)
    Communication 0 (type=CollectivePermute, team=(0 1), input=T14_l___bfloat[iS34{i0}, iS35{2}] (DeviceMesh{0 1}), output=T15_l___bfloat[iS34{i0}, iS35{2}] (DeviceMesh{0 1}), backend=NCCL)
    SetCurrentStream(Stream 0)
    T16_l___bfloat[ideviceIdx.x28{2}, iS8{i0}, iS29{4}, rS10{2}] (DeviceMesh{0 1}) = RingChunk(T5_g___bfloat[ideviceIdx.x28{2}, iS8{i0}, iS29{4}, rS10{2}] (DeviceMesh{0 1}), axis = 0, index = (2 - i1) % 2, parts = 2)
    T16_l___bfloat[ideviceIdx.x28{2}, iS8{i0}, iS29{4}, rS10{2}] (DeviceMesh{0 1})
       = linear(T14_l___bfloat[iS34{i0}, iS35{2}] (DeviceMesh{0 1}),
                T1_g___bfloat[ideviceIdx.x18{2}, iS19{4}, iS3{2}] (DeviceMesh{0 1}),
                T2_g___bfloat[ideviceIdx.x20{2}, iS21{4}] (DeviceMesh{0 1}))
    Wait(Communication 0)
  T17_l___bfloat[iS34{i0}, iS35{2}] (DeviceMesh{0 1}) = RingChunk(T9_g___bfloat[iS34{i0}, iS35{2}] (DeviceMesh{0 1}), axis = 0, index = 1, parts = 2)
  T18_l___bfloat[ideviceIdx.x28{2}, iS8{i0}, iS29{4}, rS10{2}] (DeviceMesh{0 1}) = RingChunk(T5_g___bfloat[ideviceIdx.x28{2}, iS8{i0}, iS29{4}, rS10{2}] (DeviceMesh{0 1}), axis = 0, index = 1, parts = 2)
  T18_l___bfloat[ideviceIdx.x28{2}, iS8{i0}, iS29{4}, rS10{2}] (DeviceMesh{0 1})
     = linear(T17_l___bfloat[iS34{i0}, iS35{2}] (DeviceMesh{0 1}),
              T1_g___bfloat[ideviceIdx.x18{2}, iS19{4}, iS3{2}] (DeviceMesh{0 1}),
              T2_g___bfloat[ideviceIdx.x20{2}, iS21{4}] (DeviceMesh{0 1}))
  Deallocate(T9_g___bfloat[iS34{i0}, iS35{2}] (DeviceMesh{0 1}))
  T7_g___bfloat[ideviceIdx.x32{2}, iS13{i0}, iS33{4}] (DeviceMesh{0 1}) = ALLOCATE(mem_type=global, zero_init=false)
  T7_g___bfloat[ideviceIdx.x32{2}, iS13{i0}, iS33{4}] (DeviceMesh{0 1})
     = gelu_tanh(T5_g___bfloat[ideviceIdx.x28{2}, iS8{i0}, iS29{4}, rS10{2}] (DeviceMesh{0 1}))
  Deallocate(T5_g___bfloat[ideviceIdx.x28{2}, iS8{i0}, iS29{4}, rS10{2}] (DeviceMesh{0 1}))
  T20_l___bfloat[ideviceIdx.x32{2}, iS13{i0}, iS33{4}] (DeviceMesh{0 1}) = RingChunk(T7_g___bfloat[ideviceIdx.x32{2}, iS13{i0}, iS33{4}] (DeviceMesh{0 1}), axis = 0, index = 1, parts = 2)
  T10_g___bfloat[ideviceIdx.x39{2}, iS40{ceilDiv(i0, 2)}, iS37{2}, rS52{2}] (DeviceMesh{0 1}) = ALLOCATE(mem_type=global, zero_init=false)
  T10_g___bfloat[ideviceIdx.x39{2}, iS40{ceilDiv(i0, 2)}, iS37{2}, rS52{2}] (DeviceMesh{0 1})
     = linear(T20_l___bfloat[ideviceIdx.x32{2}, iS13{i0}, iS33{4}] (DeviceMesh{0 1}),
              T3_g___bfloat[ideviceIdx.x22{2}, iS5{2}, iS23{4}] (DeviceMesh{0 1}))
  FOR i2 from 1 to 2:
    T19_g___bfloat[ideviceIdx.x39{2}, iS40{ceilDiv(i0, 2)}, iS37{2}, rS52{2}] (DeviceMesh{0 1}) = ALLOCATE(mem_type=global, zero_init=false)
    SetCurrentStream(CommunicationStream 0)
    Synchronize(Stream 0)
    Communication 1 (type=CollectivePermute, team=(0 1), input=T10_g___bfloat[ideviceIdx.x39{2}, iS40{ceilDiv(i0, 2)}, iS37{2}, rS52{2}] (DeviceMesh{0 1}), output=T19_g___bfloat[ideviceIdx.x39{2}, iS40{ceilDiv(i0, 2)}, iS37{2}, rS52{2}] (DeviceMesh{0 1}), backend=NCCL)
    SetCurrentStream(Stream 0)
    Wait(Communication 1)
    T21_l___bfloat[ideviceIdx.x32{2}, iS13{i0}, iS33{4}] (DeviceMesh{0 1}) = RingChunk(T7_g___bfloat[ideviceIdx.x32{2}, iS13{i0}, iS33{4}] (DeviceMesh{0 1}), axis = 0, index = (3 - i2) % 2, parts = 2)
    T10_g___bfloat[ideviceIdx.x39{2}, iS40{ceilDiv(i0, 2)}, iS37{2}, rS52{2}] (DeviceMesh{0 1})
       = linear(T21_l___bfloat[ideviceIdx.x32{2}, iS13{i0}, iS33{4}] (DeviceMesh{0 1}),
                T3_g___bfloat[ideviceIdx.x22{2}, iS5{2}, iS23{4}] (DeviceMesh{0 1}),
                T19_g___bfloat[ideviceIdx.x39{2}, iS40{ceilDiv(i0, 2)}, iS37{2}, rS52{2}] (DeviceMesh{0 1}))
    Deallocate(T19_g___bfloat[ideviceIdx.x39{2}, iS40{ceilDiv(i0, 2)}, iS37{2}, rS52{2}] (DeviceMesh{0 1}))
  Deallocate(T7_g___bfloat[ideviceIdx.x32{2}, iS13{i0}, iS33{4}] (DeviceMesh{0 1}))
  T8_g___bfloat[ideviceIdx.x26{2}, iS27{ceilDiv(i0, 2)}, iS16{2}] (DeviceMesh{0 1}) = ALLOCATE(mem_type=global, zero_init=false)
  T8_g___bfloat[ideviceIdx.x26{2}, iS27{ceilDiv(i0, 2)}, iS16{2}] (DeviceMesh{0 1})
     = add(T10_g___bfloat[ideviceIdx.x39{2}, iS40{ceilDiv(i0, 2)}, iS37{2}, rS52{2}] (DeviceMesh{0 1}),
           T4_g___bfloat[iS7{2}] (DeviceMesh{0 1}))
  Deallocate(T10_g___bfloat[ideviceIdx.x39{2}, iS40{ceilDiv(i0, 2)}, iS37{2}, rS52{2}] (DeviceMesh{0 1}))
} // %HostIrContainer
)";

constexpr const char* kExpectedAllreduce =
    R"(%HostIrContainer { (T0_g___bfloat[istreamIdx7{1}, ideviceIdx.x9{2}, iS8{i0}, iS10{4}] (DeviceMesh{0 1}), T1_g___bfloat[ideviceIdx.x11{2}, iS2{2}, iS12{4}] (DeviceMesh{0 1})) -> (T2_g___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1})) :
  T2_g___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}) = ALLOCATE(mem_type=global, zero_init=false)
  Stream 0 = GetCurrentStream()
  FOR i1 from 0 to 1:
    SetCurrentStream(Stream i1)
    Synchronize(Stream 0)
    T4_l___bfloat[istreamIdx7{1}, ideviceIdx.x9{2}, iS8{i0}, iS10{4}] (DeviceMesh{0 1}) = ShardByStream(T0_g___bfloat[istreamIdx7{1}, ideviceIdx.x9{2}, iS8{i0}, iS10{4}] (DeviceMesh{0 1}), stream_index = i1)
    T5_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}) = ShardByStream(T2_g___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}), stream_index = i1)
    T6_l___bfloat[istreamIdx7{1}, ideviceIdx.x9{2}, iS8{i0}, iS10{4}] (DeviceMesh{0 1}) = RingChunk(T4_l___bfloat[istreamIdx7{1}, ideviceIdx.x9{2}, iS8{i0}, iS10{4}] (DeviceMesh{0 1}), axis = 0, index = 1, parts = 2)
    T7_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}) = RingChunk(T5_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}), axis = 0, index = 1, parts = 2)
    T7_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1})
       = linear(T6_l___bfloat[istreamIdx7{1}, ideviceIdx.x9{2}, iS8{i0}, iS10{4}] (DeviceMesh{0 1}),
                T1_g___bfloat[ideviceIdx.x11{2}, iS2{2}, iS12{4}] (DeviceMesh{0 1}))
    FOR i2 from 1 to 2:
      T8_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}) = RingChunk(T5_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}), axis = 0, index = (2 - i2) % 2, parts = 2)
      T9_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}) = RingChunk(T5_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}), axis = 0, index = (3 - i2) % 2, parts = 2)
      SetCurrentStream(CommunicationStream i1)
      Synchronize(Stream i1)
      Communication 0 (type=CollectivePermute, team=(0 1), input=T8_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}), output=T9_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}), backend=NCCL)
      SetCurrentStream(Stream i1)
      Wait(Communication 0)
      T10_l___bfloat[istreamIdx7{1}, ideviceIdx.x9{2}, iS8{i0}, iS10{4}] (DeviceMesh{0 1}) = RingChunk(T4_l___bfloat[istreamIdx7{1}, ideviceIdx.x9{2}, iS8{i0}, iS10{4}] (DeviceMesh{0 1}), axis = 0, index = (3 - i2) % 2, parts = 2)
      T9_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1})
         = linear(T10_l___bfloat[istreamIdx7{1}, ideviceIdx.x9{2}, iS8{i0}, iS10{4}] (DeviceMesh{0 1}),
                  T1_g___bfloat[ideviceIdx.x11{2}, iS2{2}, iS12{4}] (DeviceMesh{0 1}),
                  T9_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}))
    FOR i3 from 0 to 1:
      T11_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}) = RingChunk(T5_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}), axis = 0, index = (2 - i3) % 2, parts = 2)
      T12_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}) = RingChunk(T5_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}), axis = 0, index = (3 - i3) % 2, parts = 2)
      SetCurrentStream(CommunicationStream i1)
      Synchronize(Stream i1)
      Communication 1 (type=CollectivePermute, team=(0 1), input=T11_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}), output=T12_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}), backend=NCCL)
      SetCurrentStream(Stream i1)
      Wait(Communication 1)
  SetCurrentStream(Stream 0)
  FOR i4 from 0 to 1:
    Synchronize(Stream i4)
} // %HostIrContainer
)";

// The same row-parallel linear, direct (its one stream chunk): device 0
// computes its partial sum of part 1 into the output's part 1 and sends it
// to device 1; its own partial sum (part 0) runs beside that move, the
// partial sum device 1 sent is added after its Wait; then the reduced part
// 0 goes to device 1 and part 1 arrives in the output.
constexpr const char* kExpectedDirectAllreduce =
    R"(%HostIrContainer { (T0_g___bfloat[istreamIdx7{1}, ideviceIdx.x9{2}, iS8{i0}, iS10{4}] (DeviceMesh{0 1}), T1_g___bfloat[ideviceIdx.x11{2}, iS2{2}, iS12{4}] (DeviceMesh{0 1})) -> (T2_g___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1})) :
  T2_g___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}) = ALLOCATE(mem_type=global, zero_init=false)
  Stream 0 = GetCurrentStream()
  FOR i1 from 0 to 1:
    SetCurrentStream(Stream i1)
    Synchronize(Stream 0)
    T4_l___bfloat[istreamIdx7{1}, ideviceIdx.x9{2}, iS8{i0}, iS10{4}] (DeviceMesh{0 1}) = ShardByStream(T0_g___bfloat[istreamIdx7{1}, ideviceIdx.x9{2}, iS8{i0}, iS10{4}] (DeviceMesh{0 1}), stream_index = i1)
    T5_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}) = ShardByStream(T2_g___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}), stream_index = i1)
    T7_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}) = RingChunk(T5_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}), axis = 0, index = 1, parts = 2)
    T8_l___bfloat[istreamIdx7{1}, ideviceIdx.x9{2}, iS8{i0}, iS10{4}] (DeviceMesh{0 1}) = RingChunk(T4_l___bfloat[istreamIdx7{1}, ideviceIdx.x9{2}, iS8{i0}, iS10{4}] (DeviceMesh{0 1}), axis = 0, index = 1, parts = 2)
    T7_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1})
       = linear(T8_l___bfloat[istreamIdx7{1}, ideviceIdx.x9{2}, iS8{i0}, iS10{4}] (DeviceMesh{0 1}),
                T1_g___bfloat[ideviceIdx.x11{2}, iS2{2}, iS12{4}] (DeviceMesh{0 1}))
    T6_g___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}) = ALLOCATE(mem_type=global, zero_init=false)
    T9_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}) = RingChunk(T6_g___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}), axis = 0, index = 1, parts = 2)
    T10_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}) = RingChunk(T6_g___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}), axis = 0, index = 0, parts = 2)
    SetCurrentStream(CommunicationStream i1)
    Synchronize(Stream i1)
    Communication 0 (type=CollectivePermute, team=(0 1), input=T7_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}), output=T10_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}), backend=NCCL)
    SetCurrentStream(Stream i1)
    T11_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}) = RingChunk(T5_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}), axis = 0, index = 0, parts = 2)
    T12_l___bfloat[istreamIdx7{1}, ideviceIdx.x9{2}, iS8{i0}, iS10{4}] (DeviceMesh{0 1}) = RingChunk(T4_l___bfloat[istreamIdx7{1}, ideviceIdx.x9{2}, iS8{i0}, iS10{4}] (DeviceMesh{0 1}), axis = 0, index = 0, parts = 2)
    T11_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1})
       = linear(T12_l___bfloat[istreamIdx7{1}, ideviceIdx.x9{2}, iS8{i0}, iS10{4}] (DeviceMesh{0 1}),
                T1_g___bfloat[ideviceIdx.x11{2}, iS2{2}, iS12{4}] (DeviceMesh{0 1}))
    Wait(Communication 0)
    T11_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1})
       = add(T11_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}),
             T10_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}))
    Deallocate(T6_g___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}))
    T13_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}) = RingChunk(T5_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}), axis = 0, index = 0, parts = 2)
    T14_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}) = RingChunk(T5_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}), axis = 0, index = 1, parts = 2)
    SetCurrentStream(CommunicationStream i1)
    Synchronize(Stream i1)
    Communication 1 (type=CollectivePermute, team=(0 1), input=T11_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}), output=T14_l___bfloat[istreamIdx15{1}, rdeviceIdx.x24{2}, iS16{i0}, iS5{2}] (DeviceMesh{0 1}), backend=NCCL)
    SetCurrentStream(Stream i1)
    Wait(Communication 1)
  SetCurrentStream(Stream 0)
  FOR i2 from 0 to 1:
    Synchronize(Stream i2)
} // %HostIrContainer
)";

std::string compile(
    std::unique_ptr<Fusion> fusion,
    int64_t device,
    bool ring = true,
    bool direct = true) {
  runFusionPasses(fusion.get());
  hir::LoweringOptions options;
  options.device = device;
  options.ring_decomposition = ring;
  options.direct_reduce_scatter = direct;
  auto hic = hir::lowerToHostIr(std::move(fusion), options);
  hir::runHostPasses(*hic);
  return hic->toString();
}

TEST(RingGolden, SequenceParallelMlpAtTwoDevices) {
  EXPECT_EQ(
      compile(test::makeMlp(2, 2, 1, "sp"), 0, true, /*direct=*/false),
      kExpectedMlp);
}

TEST(RingGolden, RowParallelLinearWithAllreduceAtTwoDevices) {
  EXPECT_EQ(
      compile(
          test::makeRowParallelLinear(/*h=*/2, /*d=*/2, /*s=*/1),
          0,
          true,
          /*direct=*/false),
      kExpectedAllreduce);
}

TEST(RingGolden, ADirectAllreduceOfOneChunkAtTwoDevices) {
  EXPECT_EQ(
      compile(test::makeRowParallelLinear(/*h=*/2, /*d=*/2, /*s=*/1), 0),
      kExpectedDirectAllreduce);
}

// At d = 2 the direct forms are for one chunk: with several, each chunk's
// move runs beside the next chunk's GEMMs, and the rings stay.
TEST(RingGolden, TwoDevicesKeepTheRingsForSeveralChunks) {
  for (int64_t s : {2, 3}) {
    const std::string mlp = compile(test::makeMlp(2, 2, s, "sp"), 0);
    const std::string ar = compile(test::makeRowParallelLinear(2, 2, s), 0);
    EXPECT_EQ(test::occurrences(mlp + ar, "= add("), 1) << mlp << ar;
    EXPECT_EQ(test::occurrences(ar, "type=CollectivePermute"), 2) << ar;
    EXPECT_EQ(test::occurrences(ar, "FOR i"), 4) << ar;
  }
  // One chunk: the reduce-scatter's own GEMM before its Wait, one add more
  // than the ring (the MLP's bias is the other).
  const std::string direct = compile(test::makeMlp(2, 2, 1, "sp"), 0);
  const size_t own = direct.rfind("= linear(");
  const size_t wait = direct.find("Wait(Communication 1)");
  ASSERT_NE(wait, std::string::npos) << direct;
  EXPECT_LT(own, wait) << direct;
  EXPECT_EQ(test::occurrences(direct, "= add("), 2) << direct;
}

// With the chunks' GEMMs in order on one stream (compute_on_main_stream),
// nothing would run beside a ring's move: the direct forms at any count,
// each chunk's GEMMs on the main stream, the add of its arrival on its
// worker.
TEST(RingGolden, TwoDevicesGoDirectWithTheGemmsInOrder) {
  auto fusion = test::makeRowParallelLinear(2, 2, 3);
  runFusionPasses(fusion.get());
  hir::LoweringOptions options;
  options.ring_decomposition = true;
  options.gemms_in_order = true;
  auto hic = hir::lowerToHostIr(std::move(fusion), options);
  hir::runHostPasses(
      *hic, {.stream_schedule = hir::StreamSchedule::kCommunicationPerStream});
  const std::string ar = hic->toString();
  EXPECT_EQ(test::occurrences(ar, "= add("), 1) << ar;
  EXPECT_EQ(test::occurrences(ar, "type=CollectivePermute"), 2) << ar;
  // The stream loop and the join; no loop of ring steps.
  EXPECT_EQ(test::occurrences(ar, "FOR i"), 2) << ar;
  const size_t worker = ar.find("SetCurrentStream(Stream i1)");
  ASSERT_NE(worker, std::string::npos) << ar;
  EXPECT_LT(ar.rfind("= linear("), worker) << ar;
  EXPECT_GT(ar.find("= add("), worker) << ar;
}

// Exchanged (exchange_allreduce): each chunk's whole partial sum goes to
// the other device in one move, and the other's is added to it; no parts,
// no ring loop.
TEST(RingGolden, TwoDevicesExchangeTheirPartialSums) {
  for (int64_t s : {1, 3}) {
    auto fusion = test::makeRowParallelLinear(2, 2, s);
    runFusionPasses(fusion.get());
    hir::LoweringOptions options;
    options.ring_decomposition = true;
    options.exchange_allreduce = true;
    auto hic = hir::lowerToHostIr(std::move(fusion), options);
    hir::runHostPasses(*hic);
    const std::string ar = hic->toString();
    EXPECT_EQ(test::occurrences(ar, "type=CollectivePermute"), 1) << ar;
    EXPECT_EQ(test::occurrences(ar, "RingChunk"), 0) << ar;
    EXPECT_EQ(test::occurrences(ar, "= add("), 1) << ar;
    EXPECT_EQ(test::occurrences(ar, "= linear("), 1) << ar;
    EXPECT_LT(ar.find("Wait(Communication 0)"), ar.find("= add(")) << ar;
  }
}

TEST(RingGolden, EachDeviceStartsOnItsOwnPart) {
  // Device 1 copies its part into index 1 and consumes index 0 last.
  const std::string program = compile(test::makeMlp(2, 2, 1, "sp"), 1);
  EXPECT_NE(
      program.find("axis = 0, index = 1, parts = 2)\n  T13_l___bfloat"),
      std::string::npos)
      << program;
  EXPECT_NE(program.find("index = (3 - i1) % 2, parts = 2)"), std::string::npos)
      << program;
}

TEST(RingGolden, CollectivesStayTheDefault) {
  for (bool ring : {false, true}) {
    const std::string mlp = compile(test::makeMlp(2, 2, 2, "sp"), 0, ring);
    const std::string ar =
        compile(test::makeRowParallelLinear(2, 2, 3), 0, ring);
    EXPECT_EQ(test::occurrences(mlp, "type=Allgather"), ring ? 0 : 1) << mlp;
    EXPECT_EQ(test::occurrences(mlp, "type=ReduceScatter"), ring ? 0 : 1)
        << mlp;
    EXPECT_EQ(test::occurrences(ar, "type=Allreduce"), ring ? 0 : 1) << ar;
    EXPECT_EQ(
        test::occurrences(mlp + ar, "type=CollectivePermute"), ring ? 4 : 0);
  }
}

TEST(RingGolden, PairsThatDoNotMatchKeepTheirCollectives) {
  const DeviceMesh mesh({0, 1});
  // An allgather feeding no linear.
  auto gather_only = [&] {
    auto fusion = std::make_unique<Fusion>();
    TensorView* in = fusion->defineTensor({4, 8}, {}, DataType::Float);
    TensorView* out = set(in);
    fusion->addOutput(out);
    in->setDeviceMesh(mesh);
    out->setDeviceMesh(mesh);
    in->outerSplit(0, 2);
    in->parallelize(0, ParallelType::DIDx);
    return fusion;
  };
  // A gathered tensor that is an output as well as a linear's input.
  auto gathered_output = [&] {
    auto fusion = std::make_unique<Fusion>();
    TensorView* x = fusion->defineTensor({4, 8}, {}, DataType::Float);
    TensorView* w = fusion->defineTensor({6, 8}, {}, DataType::Float);
    TensorView* gathered = set(x);
    fusion->addOutput(gathered);
    fusion->addOutput(linear(gathered, w));
    for (TensorView* tv : {x, w, gathered}) {
      tv->setDeviceMesh(mesh);
    }
    x->outerSplit(0, 2);
    x->parallelize(0, ParallelType::DIDx);
    w->outerSplit(0, 2);
    w->parallelize(0, ParallelType::DIDx);
    return fusion;
  };
  for (const std::string& program :
       {compile(gather_only(), 0), compile(gathered_output(), 0)}) {
    EXPECT_EQ(test::occurrences(program, "type=Allgather"), 1) << program;
    EXPECT_EQ(test::occurrences(program, "CollectivePermute"), 0) << program;
  }
  // A team of one device communicates nothing either way.
  EXPECT_EQ(
      compile(test::makeMlp(2, 1, 2, "sp"), 0),
      compile(test::makeMlp(2, 1, 2, "sp"), 0, /*ring=*/false));
}

// Over three devices the reduce-scatter sends each peer its partial sum
// directly: device 1 computes part 2's (for device 2, shift 1), then part
// 0's (for device 0, shift 2), then its own, adding device 0's partial sum
// as the GEMM's C operand and device 2's after it.
TEST(RingGolden, ADirectReduceScatterBeyondTwoDevices) {
  const std::string direct = compile(test::makeMlp(3, 3, 1, "sp"), 1);
  EXPECT_EQ(test::occurrences(direct, "type=CollectivePermute"), 3) << direct;
  EXPECT_EQ(test::occurrences(direct, "shift=2,"), 1) << direct;
  EXPECT_EQ(test::occurrences(direct, "type=ReduceScatter"), 0) << direct;
  const size_t part2 = direct.find("index = 2, parts = 3)");
  const size_t shift2 = direct.find("shift=2,");
  const size_t own = direct.find("index = 1, parts = 3)", shift2);
  const size_t add = direct.find("= add(");
  ASSERT_NE(part2, std::string::npos) << direct;
  ASSERT_NE(shift2, std::string::npos) << direct;
  ASSERT_NE(own, std::string::npos) << direct;
  ASSERT_NE(add, std::string::npos) << direct;
  EXPECT_LT(part2, shift2) << direct;
  EXPECT_LT(own, add) << direct;

  // Without it, the ring: one permute in the allgather's loop, one in the
  // reduce-scatter's, and one add fewer (the MLP's bias is the other).
  const std::string ring =
      compile(test::makeMlp(3, 3, 1, "sp"), 1, true, /*direct=*/false);
  EXPECT_EQ(test::occurrences(ring, "type=CollectivePermute"), 2) << ring;
  EXPECT_EQ(test::occurrences(ring, "shift="), 0) << ring;
  EXPECT_EQ(
      test::occurrences(direct, "= add("),
      test::occurrences(ring, "= add(") + 1)
      << direct;
}

TEST(RingGolden, PrintingIsDeterministic) {
  EXPECT_EQ(
      compile(test::makeMlp(2, 2, 2, "sp"), 0),
      compile(test::makeMlp(2, 2, 2, "sp"), 0));
}

} // namespace
} // namespace mdfuser
