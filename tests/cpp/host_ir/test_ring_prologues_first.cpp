// SPDX-License-Identifier: MIT
//
// RingProloguesFirst: a Stream loop whose iterations compute, then run a
// ring, becomes a loop of the prologues, each after the previous chunk's,
// and a loop of the rings over the same index; other programs are left as
// they are.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/row_parallel.h"
#include "common/transformer_mlp.h"
#include "host_ir/lower.h"
#include "host_ir/passes/pass_manager.h"
#include "host_ir/passes/ring_prologues_first.h"
#include "passes/pipeline.h"

namespace mdfuser {
namespace {

using namespace hir;

std::unique_ptr<HostIrContainer> compile(
    std::unique_ptr<Fusion> fusion,
    CommunicatorBackend backend,
    bool prologues_first,
    bool rings = true) {
  runFusionPasses(fusion.get());
  LoweringOptions lowering;
  lowering.backend = backend;
  lowering.ring_decomposition = rings;
  auto hic = lowerToHostIr(std::move(fusion), lowering);
  HostPassOptions passes;
  passes.ring_prologues_first = prologues_first;
  runHostPasses(*hic, passes); // verifies the program after every pass
  return hic;
}

std::vector<const ForLoop*> streamLoops(const HostIrContainer& hic) {
  std::vector<const ForLoop*> loops;
  for (const Expr* expr : hic.topLevel().exprs()) {
    const auto* loop = dynamic_cast<const ForLoop*>(expr);
    if (loop != nullptr && loop->parallelType() == ParallelType::Stream) {
      loops.push_back(loop);
    }
  }
  return loops;
}

// The statements of `loop` by name, loop bodies included ("linear",
// "CollectivePermute", "Allocate", ...).
std::multiset<std::string> kinds(const ForLoop& loop) {
  std::multiset<std::string> names;
  forEachExpr(loop.body(), [&](const Expr* e) {
    if (const auto* comm = dynamic_cast<const Communication*>(e)) {
      names.insert(std::string(communicationTypeName(comm->type())));
    } else {
      names.insert(std::string(e->opName()));
    }
  });
  return names;
}

TEST(RingProloguesFirst, TheRowParallelRingsStepZeroGemmsComeFirstInOrder) {
  for (CommunicatorBackend backend :
       {CommunicatorBackend::kGloo, CommunicatorBackend::kCuda}) {
    auto hic = compile(test::makeRowParallelLinear(2, 2, 4), backend, true);
    const std::vector<const ForLoop*> loops = streamLoops(*hic);
    ASSERT_EQ(loops.size(), 2u) << hic->toString();
    const ForLoop& prologues = *loops[0];
    const ForLoop& rings = *loops[1];
    EXPECT_EQ(prologues.index(), rings.index());

    // The prologues: step 0's GEMM, after the previous chunk's.
    const std::multiset<std::string> first = kinds(prologues);
    EXPECT_EQ(first.count("linear"), 1u);
    EXPECT_EQ(first.count("CollectivePermute"), 0u);
    EXPECT_EQ(first.count("ForLoop"), 0u);
    const std::string header = prologues.body().exprs()[2]->toString();
    EXPECT_EQ(header, "Synchronize(Stream max(i1 - 1, 0))") << hic->toString();

    // The rings: both, with the GEMMs that add the partial sums received.
    const std::multiset<std::string> second = kinds(rings);
    EXPECT_EQ(second.count("CollectivePermute"), 2u);
    EXPECT_EQ(second.count("linear"), 1u);
    EXPECT_EQ(
        second.count("ShardByStream"),
        2u + (backend == CommunicatorBackend::kCuda))
        << hic->toString();
  }
}

// A row-parallel linear whose partial sums are reduce-scattered along the
// tokens, in `s` stream chunks over two devices (linear_reduce_scatter of
// examples/ring_decomposition.py).
std::unique_ptr<Fusion> makeLinearReduceScatter(int64_t s) {
  auto fusion = std::make_unique<Fusion>();
  TensorView* x = fusion->defineTensor({-1, 16}, {}, DataType::BFloat16);
  TensorView* w = fusion->defineTensor({4, 16}, {}, DataType::BFloat16);
  TensorView* out = linear(x, w);
  fusion->addOutput(out);
  const DeviceMesh mesh({0, 1});
  for (TensorView* tv : {x, w, out}) {
    tv->setDeviceMesh(mesh);
  }
  x->outerSplit(0, s);
  x->parallelize(0, ParallelType::Stream);
  x->outerSplit(2, 2);
  x->parallelize(2, ParallelType::DIDx);
  w->outerSplit(1, 2);
  w->parallelize(1, ParallelType::DIDx);
  out->outerSplit(0, s);
  out->parallelize(0, ParallelType::Stream);
  out->outerSplit(1, 2);
  out->parallelize(1, ParallelType::DIDx);
  return fusion;
}

TEST(RingProloguesFirst, AReduceScatterRingSplitsToo) {
  // Its partial sums start in the output's chunk, a view made again in the
  // second loop; the receive buffer is allocated per step inside the ring.
  for (CommunicatorBackend backend :
       {CommunicatorBackend::kGloo, CommunicatorBackend::kCuda}) {
    auto hic = compile(makeLinearReduceScatter(3), backend, true);
    const std::vector<const ForLoop*> loops = streamLoops(*hic);
    ASSERT_EQ(loops.size(), 2u) << hic->toString();
    EXPECT_EQ(kinds(*loops[0]).count("linear"), 1u) << hic->toString();
    EXPECT_EQ(kinds(*loops[0]).count("Allocate"), 0u) << hic->toString();
    EXPECT_EQ(kinds(*loops[1]).count("CollectivePermute"), 1u);
    EXPECT_EQ(kinds(*loops[1]).count("Allocate"), 1u);
  }
}

TEST(RingProloguesFirst, ProloguesFillingABufferTheRingReadsAreLeftAlone) {
  // The sequence-parallel MLP: the allgather ring's buffer is allocated in
  // the iteration and filled with this device's part before the ring moves
  // it; splitting the loop would need that buffer for every chunk at once.
  auto with =
      compile(test::makeMlp(2, 2, 2, "sp"), CommunicatorBackend::kCuda, true);
  auto without =
      compile(test::makeMlp(2, 2, 2, "sp"), CommunicatorBackend::kCuda, false);
  EXPECT_EQ(with->toString(), without->toString());
}

TEST(RingProloguesFirst, ProgramsWithoutRingsAreLeftAsTheyAre) {
  auto without = compile(
      test::makeRowParallelLinear(2, 2, 4),
      CommunicatorBackend::kNccl,
      false,
      /*rings=*/false);
  auto with = compile(
      test::makeRowParallelLinear(2, 2, 4),
      CommunicatorBackend::kNccl,
      true,
      /*rings=*/false);
  EXPECT_EQ(with->toString(), without->toString());
}

TEST(RingProloguesFirst, OffByDefault) {
  auto hic = compile(
      test::makeRowParallelLinear(2, 2, 4), CommunicatorBackend::kGloo, false);
  EXPECT_EQ(streamLoops(*hic).size(), 1u);
}

} // namespace
} // namespace mdfuser
