// SPDX-License-Identifier: MIT
//
// InplaceAllreduce: an operation writes the allreduce's buffer directly
// when the temporary it would write feeds nothing but the allreduce.

#include <gtest/gtest.h>

#include "common/host_ir_outline.h"
#include "common/program_builder.h"
#include "common/row_parallel.h"
#include "host_ir/lower.h"
#include "host_ir/passes/inplace_allreduce.h"
#include "host_ir/verifier.h"
#include "passes/pipeline.h"

namespace mdfuser {
namespace {

using namespace hir;

std::unique_ptr<HostIrContainer> lowered(int64_t s) {
  std::unique_ptr<Fusion> fusion = test::makeRowParallelLinear(2, 2, s);
  runFusionPasses(fusion.get());
  return lowerToHostIr(std::move(fusion), {});
}

TEST(InplaceAllreduce, LinearWritesTheOutputChunkAndItIsReducedInPlace) {
  auto hic = lowered(3);
  ASSERT_EQ(test::outline(*hic), R"(FOR i1 stream
  T4 = ShardByStream(T0, i1)
  T3 = linear(T4, T1)
  T5 = ShardByStream(T2, i1)
  Communication 0 T3 -> T5
  Wait 0
)");
  inplaceAllreduce(*hic);
  verify(*hic);
  EXPECT_EQ(test::outline(*hic), R"(FOR i1 stream
  T4 = ShardByStream(T0, i1)
  T5 = ShardByStream(T2, i1)
  T5 = linear(T4, T1)
  Communication 0 T5 -> T5
  Wait 0
)") << "the chunk view moves up so that the linear can write it; T3 is gone";
}

TEST(InplaceAllreduce, WithoutStreamsTheOutputItselfIsWritten) {
  auto fusion = test::makeShardedLinear(DeviceMesh({0, 1}));
  runFusionPasses(fusion.get());
  auto hic = lowerToHostIr(std::move(fusion), {});
  inplaceAllreduce(*hic);
  EXPECT_EQ(test::outline(*hic), R"(T2 = linear(T0, T1)
Communication 0 T2 -> T2
Wait 0
)");
}

// Posts Allreduce(in -> out) and its Wait at the end of the program.
void allreduce(HostIrContainer& hic, TensorView* in, TensorView* out) {
  auto* comm = hic.create<Communication>(
      test::allreduce({0, 1}), in, out, CommunicatorBackend::kGloo);
  hic.topLevel().pushBack(comm);
  hic.topLevel().pushBack(hic.create<Wait>(comm));
}

TEST(InplaceAllreduce, TemporaryWithAnotherUseIsKept) {
  // T1 also feeds a copy: its producer must keep writing it.
  test::ProgramBuilder b;
  TensorView* t0 = b.input({4});
  TensorView* t1 = b.tensor({4});
  TensorView* t2 = b.tensor({4});
  TensorView* t3 = b.tensor({4});
  b.output(t2);
  b.output(t3);
  auto hic = b.build();
  hic->topLevel().pushBack(hic->create<LoadStoreOp>(t1, t0));
  allreduce(*hic, t1, t2);
  hic->topLevel().pushBack(hic->create<LoadStoreOp>(t3, t1));
  const std::string before = test::outline(*hic);
  inplaceAllreduce(*hic);
  EXPECT_EQ(test::outline(*hic), before);
}

TEST(InplaceAllreduce, ProducerReadingTheOutputBufferIsKept) {
  // T1 = set(T2) then allreduce T1 into T2: writing T2 directly would
  // overwrite what the producer reads.
  test::ProgramBuilder b;
  b.input({4});
  TensorView* t1 = b.tensor({4});
  TensorView* t2 = b.tensor({4});
  b.output(t2);
  auto hic = b.build();
  hic->topLevel().pushBack(hic->create<LoadStoreOp>(t1, t2));
  allreduce(*hic, t1, t2);
  const std::string before = test::outline(*hic);
  inplaceAllreduce(*hic);
  EXPECT_EQ(test::outline(*hic), before);
}

} // namespace
} // namespace mdfuser
