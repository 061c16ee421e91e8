// SPDX-License-Identifier: MIT
//
// RingProloguesFirst: a Stream loop whose iterations compute, then run a
// ring, becomes a loop of the prologues, each after the previous chunk's,
// and a loop of the rings over the same index; other programs are left as
// they are. On hand-built programs (before and after), then on the
// programs lowering gives the ring pairs.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/host_ir_outline.h"
#include "common/program_builder.h"
#include "common/row_parallel.h"
#include "common/transformer_mlp.h"
#include "host_ir/lower.h"
#include "host_ir/passes/pass_manager.h"
#include "host_ir/passes/ring_prologues_first.h"
#include "host_ir/verifier.h"
#include "ir/ops.h"
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

// Hand-built programs: a Stream loop as AssignStreams leaves it, whose
// iterations compute a part of T2 from a part of T0, then move it round a
// ring into T1.
class RingProloguesFirstTest : public ::testing::Test {
 protected:
  RingProloguesFirstTest() {
    test::ProgramBuilder b;
    in_ = b.input({4});
    received_ = b.tensor({4});
    out_ = b.tensor({4});
    b.output(out_);
    hic_ = b.build();
    in_part_ = like(in_, MemoryType::Local);
    out_part_ = like(out_, MemoryType::Local);
    scratch_ = like(in_, MemoryType::Global);
    main_ = hic_->create<Stream>();
    top().pushBack(hic_->create<GetCurrentStream>(main_));
    chunks_ = hic_->create<ForLoop>(
        symbol(hic_->ir()),
        constant(hic_->ir(), 0),
        constant(hic_->ir(), 2),
        ParallelType::Stream);
    body().pushBack(
        hic_->create<SetCurrentStream>(hic_->create<Stream>(chunks_->index())));
    body().pushBack(hic_->create<Synchronize>(main_));
    body().pushBack(part(in_part_, in_));
    body().pushBack(part(out_part_, out_));
  }

  TensorView* like(const TensorView* tv, MemoryType memory) {
    return hic_->create<TensorView>(
        tv->logical(), tv->dtype(), tv->contiguity(), memory);
  }
  Scope& top() {
    return hic_->topLevel();
  }
  Scope& body() {
    return chunks_->body();
  }
  Expr* part(TensorView* view, TensorView* of) {
    return hic_->create<ShardByStream>(
        view,
        of,
        chunks_->index(),
        0,
        mul(chunks_->index(), constant(hic_->ir(), 2)),
        constant(hic_->ir(), 2));
  }
  // The ring: out_part_ moves to the next device, the previous one's
  // arrives in received_.
  ForLoop* ring() {
    auto* steps = hic_->create<ForLoop>(
        symbol(hic_->ir()),
        constant(hic_->ir(), 0),
        constant(hic_->ir(), 1),
        ParallelType::Serial);
    auto* c = hic_->create<Communication>(
        test::collectivePermute({0, 1}),
        out_part_,
        received_,
        CommunicatorBackend::kGloo);
    steps->body().pushBack(c);
    steps->body().pushBack(hic_->create<Wait>(c));
    return steps;
  }
  std::string run() {
    top().pushBack(chunks_);
    top().pushBack(hic_->create<SetCurrentStream>(main_));
    ringProloguesFirst(*hic_);
    verify(*hic_);
    return test::outline(*hic_);
  }

  TensorView* in_;
  TensorView* received_;
  TensorView* out_;
  TensorView* in_part_;
  TensorView* out_part_;
  TensorView* scratch_;
  std::unique_ptr<HostIrContainer> hic_;
  Stream* main_;
  ForLoop* chunks_;
};

// How the split programs below start (the prologues' loop up to its
// computation) and end (the rings' loop).
constexpr const char* kPrologueStart = R"(Stream 0 = GetCurrentStream
FOR i0 stream
  SetCurrentStream(Stream i0)
  Synchronize(Stream 0)
  Synchronize(Stream max(i0 - 1, 0))
  T3 = ShardByStream(T0, i0)
  T4 = ShardByStream(T2, i0)
)";
constexpr const char* kRings = R"(FOR i0 stream
  SetCurrentStream(Stream i0)
  T4 = ShardByStream(T2, i0)
  FOR i1 serial
    Communication 0 T4 -> T1
    Wait 0
SetCurrentStream(Stream 0)
)";

TEST_F(RingProloguesFirstTest, TheProloguesRunFirstEachAfterThePrevious) {
  body().pushBack(hic_->create<LoadStoreOp>(out_part_, in_part_));
  body().pushBack(ring());
  // Before: the chunk's part of T2 from its part of T0, then the ring, in
  // one loop. After: the views the ring uses are made again.
  EXPECT_EQ(run(), std::string(kPrologueStart) + "  T4 = set(T3)\n" + kRings);
}

TEST_F(
    RingProloguesFirstTest, ABufferOfTheIterationThatTheRingUsesKeepsTheLoop) {
  body().pushBack(hic_->create<Allocate>(
      received_, std::vector<Scalar*>{constant(hic_->ir(), 4)}));
  body().pushBack(hic_->create<LoadStoreOp>(out_part_, in_part_));
  body().pushBack(ring());
  const std::string after = run();
  EXPECT_EQ(after.find("Synchronize(Stream max("), std::string::npos) << after;
  EXPECT_EQ(streamLoops(*hic_).size(), 1u) << after;
}

TEST_F(RingProloguesFirstTest, ABufferOnlyThePrologueUsesStaysInIt) {
  body().pushBack(hic_->create<Allocate>(
      scratch_, std::vector<Scalar*>{constant(hic_->ir(), 2)}));
  body().pushBack(hic_->create<LoadStoreOp>(scratch_, in_part_));
  body().pushBack(hic_->create<LoadStoreOp>(out_part_, scratch_));
  body().pushBack(hic_->create<Deallocate>(scratch_));
  body().pushBack(ring());
  EXPECT_EQ(
      run(),
      std::string(kPrologueStart) +
          "  Allocate T5\n  T5 = set(T3)\n  T4 = set(T5)\n  Deallocate T5\n" +
          kRings);
}

TEST_F(RingProloguesFirstTest, ARingWithoutComputationBeforeItKeepsTheLoop) {
  body().pushBack(ring());
  const std::string after = run();
  EXPECT_EQ(streamLoops(*hic_).size(), 1u) << after;
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
