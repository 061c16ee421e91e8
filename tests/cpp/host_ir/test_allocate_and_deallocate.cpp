// SPDX-License-Identifier: MIT
//
// AllocateAndDeallocate on hand-built programs: each test writes the program
// before the pass and the outline expected after it.

#include <gtest/gtest.h>

#include "common/host_ir_outline.h"
#include "common/program_builder.h"
#include "common/row_parallel.h"
#include "common/transformer_mlp.h"
#include "host_ir/lower.h"
#include "host_ir/passes/allocate_and_deallocate.h"
#include "host_ir/passes/pass_manager.h"
#include "host_ir/verifier.h"
#include "ir/scalar_eval.h"
#include "passes/pipeline.h"

namespace mdfuser {
namespace {

using namespace hir;

Expr* copy(HostIrContainer& hic, TensorView* out, TensorView* in) {
  return hic.create<LoadStoreOp>(out, in);
}

ForLoop* loop(HostIrContainer& hic, int64_t n, ParallelType pt) {
  return hic.create<ForLoop>(
      symbol(hic.ir()), constant(hic.ir(), 0), constant(hic.ir(), n), pt);
}

std::string run(HostIrContainer& hic) {
  allocateAndDeallocate(hic);
  verify(hic, {.buffers_allocated = true});
  return test::outline(hic);
}

TEST(AllocateAndDeallocate, IntermediateLivesFromFirstToLastUse) {
  test::ProgramBuilder b;
  TensorView* t0 = b.input({4});
  TensorView* t1 = b.tensor({4});
  TensorView* t2 = b.tensor({4});
  b.output(t2);
  auto hic = b.build();
  hic->topLevel().pushBack(copy(*hic, t1, t0));
  hic->topLevel().pushBack(copy(*hic, t2, t1));

  EXPECT_EQ(run(*hic), R"(Allocate T1
T1 = set(T0)
Allocate T2
T2 = set(T1)
Deallocate T1
)") << "inputs are never allocated, outputs never deallocated";
}

TEST(AllocateAndDeallocate, ChunkTemporaryStaysInsideTheNestedLoop) {
  // A serial loop around a stream loop; T1 lives in one iteration of the
  // inner loop, T2 is the program's output.
  test::ProgramBuilder b;
  TensorView* t0 = b.input({4});
  TensorView* t1 = b.tensor({4});
  TensorView* t2 = b.tensor({4});
  b.output(t2);
  auto hic = b.build();
  ForLoop* outer = loop(*hic, 2, ParallelType::Serial);
  ForLoop* inner = loop(*hic, 3, ParallelType::Stream);
  inner->body().pushBack(copy(*hic, t1, t0));
  inner->body().pushBack(copy(*hic, t2, t1));
  outer->body().pushBack(inner);
  hic->topLevel().pushBack(outer);

  EXPECT_EQ(run(*hic), R"(Allocate T2
FOR i0 serial
  FOR i1 stream
    Allocate T1
    T1 = set(T0)
    T2 = set(T1)
    Deallocate T1
)");
}

TEST(AllocateAndDeallocate, TensorReadBeforeWrittenInALoopIsHoisted) {
  // T1 carries a value from one iteration to the next: it must outlive the
  // loop body.
  test::ProgramBuilder b;
  TensorView* t0 = b.input({4});
  TensorView* t1 = b.tensor({4});
  TensorView* t2 = b.tensor({4});
  b.output(t2);
  auto hic = b.build();
  ForLoop* l = loop(*hic, 3, ParallelType::Serial);
  l->body().pushBack(copy(*hic, t2, t1));
  l->body().pushBack(copy(*hic, t1, t0));
  hic->topLevel().pushBack(l);

  allocateAndDeallocate(*hic);
  EXPECT_EQ(test::outline(*hic), R"(Allocate T1
Allocate T2
FOR i0 serial
  T2 = set(T1)
  T1 = set(T0)
Deallocate T1
)");
}

TEST(AllocateAndDeallocate, BufferOutlivesItsCommunicationUntilTheWait) {
  test::ProgramBuilder b;
  TensorView* t0 = b.input({4});
  TensorView* t1 = b.tensor({4});
  TensorView* t2 = b.tensor({4});
  TensorView* t3 = b.tensor({4});
  b.output(t2);
  b.output(t3);
  auto hic = b.build();
  auto* comm = hic->create<Communication>(
      test::allreduce({0, 1}), t1, t2, CommunicatorBackend::kGloo);
  hic->topLevel().pushBack(copy(*hic, t1, t0));
  hic->topLevel().pushBack(comm);
  hic->topLevel().pushBack(copy(*hic, t3, t0));
  hic->topLevel().pushBack(hic->create<Wait>(comm));

  EXPECT_EQ(run(*hic), R"(Allocate T1
T1 = set(T0)
Allocate T2
Communication 0 T1 -> T2
Allocate T3
T3 = set(T0)
Wait 0
Deallocate T1
)");
}

TEST(AllocateAndDeallocate, RowParallelChunkHasTheShapeOfItsIteration) {
  std::unique_ptr<Fusion> fusion =
      test::makeRowParallelLinear(/*h=*/2, /*d=*/2, /*s=*/3);
  runFusionPasses(fusion.get());
  auto hic = lowerToHostIr(std::move(fusion), {});
  EXPECT_EQ(run(*hic), R"(Allocate T2
FOR i1 stream
  T4 = ShardByStream(T0, i1)
  Allocate T3
  T3 = linear(T4, T1)
  T5 = ShardByStream(T2, i1)
  Communication 0 T3 -> T5
  Wait 0
  Deallocate T3
)") << "the output is written through chunk views, so it is allocated "
       "whole, outside the loop";

  // With t = 7 rows in 3 chunks, the partial sums of iteration 2 hold the
  // last row only: [1 row, h = 2, 1 device slot].
  auto* l = static_cast<ForLoop*>(hic->topLevel().exprs()[1]);
  auto* alloc = static_cast<Allocate*>(l->body().exprs()[1]);
  ScalarEvaluator eval;
  eval.bind(hic->inputs()[0]->logical()[0]->extent(), 7);
  std::vector<int64_t> shape;
  for (int64_t i : {0, 2}) {
    eval.bind(l->index(), i);
    shape.clear();
    for (Scalar* extent : alloc->shape()) {
      shape.push_back(eval.evaluate(extent));
    }
    EXPECT_EQ(shape, (std::vector<int64_t>{i == 0 ? 3 : 1, 2, 1}));
  }
  auto* out_alloc = static_cast<Allocate*>(hic->topLevel().exprs()[0]);
  shape.clear();
  for (Scalar* extent : out_alloc->shape()) {
    shape.push_back(eval.evaluate(extent));
  }
  EXPECT_EQ(shape, (std::vector<int64_t>{7, 2}));
}

// The most buffers alive at once in `scope` (a loop body counted once),
// given `live` on entry; fails when a buffer allocated in a scope outlives
// it (other than an output).
int64_t peakLiveBuffers(
    const HostIrContainer& hic, const Scope& scope, int64_t live) {
  int64_t peak = live;
  int64_t here = 0;
  for (const Expr* e : scope.exprs()) {
    if (const auto* a = dynamic_cast<const Allocate*>(e)) {
      ++here;
      peak = std::max(peak, live + here);
      (void)a;
    } else if (dynamic_cast<const Deallocate*>(e) != nullptr) {
      --here;
    } else if (const auto* l = dynamic_cast<const ForLoop*>(e)) {
      peak = std::max(peak, peakLiveBuffers(hic, l->body(), live + here));
    }
  }
  int64_t outputs_allocated = 0;
  for (const Expr* e : scope.exprs()) {
    if (const auto* a = dynamic_cast<const Allocate*>(e);
        a != nullptr && hic.isOutput(a->buffer())) {
      ++outputs_allocated;
    }
  }
  EXPECT_EQ(here, outputs_allocated)
      << "a buffer allocated in a scope is not freed in it";
  return peak;
}

TEST(AllocateAndDeallocate, AWholeBlockKeepsFewBuffersAlive) {
  // The sequence-parallel MLP: in each chunk the gathered input, the
  // pre-activation, the activation, the partial sums and the scattered sum
  // are each freed after their last use, so at most three buffers (with
  // the output) are alive at once, whatever the number of operations.
  for (const char* mode : {"tp", "sp"}) {
    auto fusion = test::makeMlp(/*h=*/2, /*d=*/2, /*s=*/2, mode);
    runFusionPasses(fusion.get());
    auto hic = lowerToHostIr(std::move(fusion), {});
    runHostPasses(*hic);
    int64_t allocations = 0;
    std::vector<const Scope*> scopes = {&hic->topLevel()};
    while (!scopes.empty()) {
      const Scope* scope = scopes.back();
      scopes.pop_back();
      for (const Expr* e : scope->exprs()) {
        allocations += dynamic_cast<const Allocate*>(e) != nullptr ? 1 : 0;
        if (const auto* l = dynamic_cast<const ForLoop*>(e)) {
          scopes.push_back(&l->body());
        }
      }
    }
    EXPECT_GE(allocations, std::string(mode) == "sp" ? 6 : 4) << mode;
    EXPECT_EQ(peakLiveBuffers(*hic, hic->topLevel(), 0), 3) << mode;
  }
}

} // namespace
} // namespace mdfuser
