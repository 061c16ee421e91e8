// SPDX-License-Identifier: MIT
//
// Lowering a fusion into a host program, before any host pass: which
// operations go into a Stream loop, where chunk views appear, and what
// becomes a communication.

#include <gtest/gtest.h>

#include "common/column_parallel.h"
#include "common/expect_error.h"
#include "common/host_ir_outline.h"
#include "common/row_parallel.h"
#include "host_ir/lower.h"
#include "ir/scalar_eval.h"
#include "passes/pipeline.h"

namespace mdfuser {
namespace {

using hir::Communication;
using hir::CommunicatorBackend;
using hir::ForLoop;
using hir::HostIrContainer;
using hir::ShardByDevice;
using hir::ShardByStream;
using hir::Wait;

std::unique_ptr<HostIrContainer> lower(
    std::unique_ptr<Fusion> fusion, hir::LoweringOptions options = {}) {
  runFusionPasses(fusion.get());
  return hir::lowerToHostIr(std::move(fusion), options);
}

TEST(Lower, StreamSplitOperationsShareOneStreamLoop) {
  auto hic = lower(test::makeRowParallelLinear(/*h=*/2, /*d=*/2, /*s=*/3));
  const auto& top = hic->topLevel().exprs();
  ASSERT_EQ(top.size(), 1u);
  auto* loop = dynamic_cast<ForLoop*>(top[0]);
  ASSERT_NE(loop, nullptr);
  EXPECT_EQ(loop->parallelType(), ParallelType::Stream);
  EXPECT_EQ(loop->stop()->value(), 3);

  // Input chunk view, local linear, output chunk view, allreduce, wait.
  const auto& body = loop->body().exprs();
  ASSERT_EQ(body.size(), 5u);
  auto* in_view = dynamic_cast<ShardByStream*>(body[0]);
  ASSERT_NE(in_view, nullptr);
  EXPECT_EQ(in_view->in(), hic->inputs()[0]);
  EXPECT_EQ(in_view->out()->memoryType(), MemoryType::Local);
  auto* partial = dynamic_cast<LinearOp*>(body[1]);
  ASSERT_NE(partial, nullptr);
  EXPECT_EQ(partial->in(), in_view->out());
  EXPECT_EQ(partial->weight(), hic->inputs()[1]) << "the weight is not chunked";
  auto* out_view = dynamic_cast<ShardByStream*>(body[2]);
  ASSERT_NE(out_view, nullptr);
  EXPECT_EQ(out_view->in(), hic->outputs()[0]);
  auto* allreduce = dynamic_cast<Communication*>(body[3]);
  ASSERT_NE(allreduce, nullptr);
  EXPECT_EQ(allreduce->type(), CommunicationType::Allreduce);
  EXPECT_EQ(allreduce->in(), partial->out());
  EXPECT_EQ(allreduce->out(), out_view->out());
  EXPECT_EQ(allreduce->team(), (std::vector<int64_t>{0, 1}));
  auto* wait = dynamic_cast<Wait*>(body[4]);
  ASSERT_NE(wait, nullptr);
  EXPECT_EQ(wait->communication(), allreduce);
}

// out = cast(cast(x) * cast(w) + cast(b)) for x [t, 8] in BFloat16 split
// into 2 stream chunks, w and b [8] broadcast to every chunk: what a
// layer_norm's affine part looks like. With `sum_chunks`, also the sum of
// the products over the chunked axis, added back to them.
std::unique_ptr<Fusion> scaleAndShift(bool sum_chunks = false) {
  auto fusion = std::make_unique<Fusion>();
  TensorView* x = fusion->defineTensor({-1, 8}, {}, DataType::BFloat16);
  TensorView* w = fusion->defineTensor({8}, {}, DataType::BFloat16);
  TensorView* b = fusion->defineTensor({8}, {}, DataType::BFloat16);
  TensorView* y =
      binaryOp(OpType::Mul, cast(x, DataType::Float), cast(w, DataType::Float));
  if (sum_chunks) {
    y = binaryOp(OpType::Add, y, reduce(OpType::Sum, y, {0}, /*keepdim=*/true));
  }
  TensorView* z = binaryOp(OpType::Add, y, cast(b, DataType::Float));
  fusion->addOutput(cast(z, DataType::BFloat16));
  const DeviceMesh mesh({0});
  for (TensorView* tv : {x, w, b}) {
    tv->setDeviceMesh(mesh);
  }
  x->outerSplit(0, 2);
  x->parallelize(0, ParallelType::Stream);
  return fusion;
}

TEST(Lower, LoopInvariantOperationsRunInFrontOfTheStreamLoop) {
  // The upcasts of w and b have no stream split; they read nothing the
  // loop writes, so they run once before it instead of cutting it in
  // three.
  auto hic = lower(scaleAndShift());
  const auto& top = hic->topLevel().exprs();
  ASSERT_EQ(top.size(), 3u) << hic->toString();
  for (int i = 0; i < 2; ++i) {
    auto* up = dynamic_cast<TensorOp*>(top[i]);
    ASSERT_NE(up, nullptr) << hic->toString();
    EXPECT_EQ(up->type(), OpType::Cast);
    EXPECT_EQ(up->tensorInputs().front(), hic->inputs()[1 + i]);
  }
  auto* loop = dynamic_cast<ForLoop*>(top[2]);
  ASSERT_NE(loop, nullptr);
  EXPECT_EQ(loop->parallelType(), ParallelType::Stream);
  std::vector<OpType> in_loop;
  for (Expr* e : loop->body().exprs()) {
    if (auto* op = dynamic_cast<TensorOp*>(e)) {
      in_loop.push_back(op->type());
    }
  }
  EXPECT_EQ(
      in_loop,
      (std::vector<OpType>{
          OpType::Cast, OpType::Mul, OpType::Add, OpType::Cast}));
}

TEST(Lower, AnOperationReadingTheLoopUnsplitEndsIt) {
  // The sum over the chunked axis reads every chunk of the products: it
  // runs after their loop, and what follows it in a second loop, with the
  // upcast of b in front of that one.
  auto hic = lower(scaleAndShift(/*sum_chunks=*/true));
  std::vector<std::string> top;
  for (Expr* e : hic->topLevel().exprs()) {
    auto* op = dynamic_cast<TensorOp*>(e);
    top.push_back(op != nullptr ? std::string(op->opName()) : "FOR");
  }
  EXPECT_EQ(
      top,
      (std::vector<std::string>{
          "cast", "FOR", "sum", "broadcast", "cast", "FOR"}))
      << hic->toString();
}

TEST(Lower, BackendFollowsTheOptions) {
  auto hic = lower(
      test::makeRowParallelLinear(2, 2, 3),
      {.backend = CommunicatorBackend::kGloo});
  EXPECT_NE(hic->toString().find("backend=Gloo)"), std::string::npos);
}

TEST(Lower, WithoutStreamSplitNothingLoops) {
  auto fusion = test::makeShardedLinear(DeviceMesh({0, 1}));
  auto hic = lower(std::move(fusion));
  const auto& top = hic->topLevel().exprs();
  ASSERT_EQ(top.size(), 3u);
  EXPECT_NE(dynamic_cast<LinearOp*>(top[0]), nullptr);
  EXPECT_NE(dynamic_cast<Communication*>(top[1]), nullptr);
  EXPECT_NE(dynamic_cast<Wait*>(top[2]), nullptr);
}

TEST(Lower, TeamIsTheMeshAxisThroughTheDevice) {
  // A 2x2 mesh sharded on mesh_x: device 3 reduces with device 2.
  auto fusion = test::makeShardedLinear(DeviceMesh({0, 1, 2, 3}, {2, 2}));
  auto hic = lower(std::move(fusion), {.device = 3});
  auto* allreduce = dynamic_cast<Communication*>(hic->topLevel().exprs()[1]);
  ASSERT_NE(allreduce, nullptr);
  EXPECT_EQ(allreduce->team(), (std::vector<int64_t>{2, 3}));
}

TEST(Lower, AGatheringSetBecomesAnAllgather) {
  // set() from a sharded tensor to one the user placed on the mesh without
  // sharding it needs an allgather.
  auto fusion = std::make_unique<Fusion>();
  TensorView* in = fusion->defineTensor({4, 8}, {}, DataType::Float);
  TensorView* out = set(in);
  fusion->addOutput(out);
  const DeviceMesh mesh({0, 1});
  in->setDeviceMesh(mesh);
  out->setDeviceMesh(mesh);
  in->outerSplit(0, 2);
  in->parallelize(0, ParallelType::DIDx);
  auto hic = lower(std::move(fusion));
  ASSERT_EQ(hic->topLevel().exprs().size(), 2u);
  auto* comm = dynamic_cast<Communication*>(hic->topLevel().exprs()[0]);
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(comm->type(), CommunicationType::Allgather);
  EXPECT_EQ(comm->spec().axis, 0);
  EXPECT_EQ(comm->team(), (std::vector<int64_t>{0, 1}));
}

TEST(Lower, StreamChunksThatAreDevicePartsAreBroadcastFromThem) {
  // The column-parallel linear whose gathered input is split into one stream
  // chunk per device: iteration i broadcasts device i's part into the chunk,
  // then multiplies it.
  auto hic = lower(
      test::makeColumnParallelLinear(/*h=*/3, /*d=*/3, /*swizzle=*/false),
      {.device = 2});
  const auto& top = hic->topLevel().exprs();
  ASSERT_EQ(top.size(), 1u) << hic->toString();
  auto* loop = dynamic_cast<ForLoop*>(top[0]);
  ASSERT_NE(loop, nullptr) << hic->toString();
  EXPECT_EQ(loop->stop()->value(), 3);
  Communication* broadcast = nullptr;
  LinearOp* gemm = nullptr;
  for (Expr* e : loop->body().exprs()) {
    if (auto* c = dynamic_cast<Communication*>(e)) {
      broadcast = c;
    } else if (auto* l = dynamic_cast<LinearOp*>(e)) {
      EXPECT_NE(broadcast, nullptr) << "the GEMM follows the broadcast";
      gemm = l;
    }
  }
  ASSERT_NE(broadcast, nullptr) << hic->toString();
  ASSERT_NE(gemm, nullptr) << hic->toString();
  EXPECT_EQ(broadcast->type(), CommunicationType::Broadcast);
  EXPECT_EQ(broadcast->rootIndex(), loop->index());
  EXPECT_EQ(broadcast->team(), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(broadcast->in(), hic->inputs()[0]) << "this device's whole part";
  EXPECT_EQ(gemm->in(), broadcast->out());
  EXPECT_NE(
      broadcast->toString().find(
          "root=team[" + loop->index()->toString() + "]"),
      std::string::npos)
      << broadcast->toString();
}

int64_t count(const std::string& text, const std::string& what) {
  int64_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

TEST(Lower, ASwizzledGatherAndItsLinearAreOneRing) {
  // Without the ring_decomposition option: the ring's d - 1 steps of one
  // permute and a GEMM, then the last GEMM; no allgather, no Stream loop.
  auto hic = lower(
      test::makeColumnParallelLinear(/*h=*/3, /*d=*/3, /*swizzle=*/true),
      {.device = 1});
  const std::string program = hic->toString();
  EXPECT_EQ(count(program, "type=CollectivePermute"), 1) << program;
  EXPECT_EQ(count(program, "FOR i"), 1) << program;
  EXPECT_EQ(count(program, "from 0 to 2:"), 1) << program;
  EXPECT_EQ(count(program, "= linear("), 2) << program;
  EXPECT_EQ(count(program, "type=Allgather"), 0) << program;

  auto plain = lower(
      test::makeColumnParallelLinear(/*h=*/3, /*d=*/3, /*swizzle=*/false),
      {.device = 1});
  EXPECT_EQ(count(plain->toString(), "CollectivePermute"), 0)
      << plain->toString();
}

// Copies a replicated [t, 3] input into an output split on its rows into
// s stream chunks and across two devices (stream split above the device
// split or below it). Returns, per iteration on `device`, the rows
// [start, start + length) its ShardByDevice takes.
std::vector<std::pair<int64_t, int64_t>> rowsOfLocalSlice(
    bool stream_above, int64_t t, int64_t s, int64_t device) {
  auto fusion = std::make_unique<Fusion>();
  TensorView* in = fusion->defineTensor({-1, 3}, {}, DataType::Float);
  TensorView* out = set(in);
  fusion->addOutput(out);
  const DeviceMesh mesh({0, 1});
  in->setDeviceMesh(mesh);
  out->setDeviceMesh(mesh);
  out->outerSplit(0, stream_above ? s : 2);
  out->parallelize(0, stream_above ? ParallelType::Stream : ParallelType::DIDx);
  out->outerSplit(1, stream_above ? 2 : s);
  out->parallelize(1, stream_above ? ParallelType::DIDx : ParallelType::Stream);
  auto hic = lower(std::move(fusion), {.device = device});
  auto* loop = dynamic_cast<ForLoop*>(hic->topLevel().exprs().at(0));
  EXPECT_NE(loop, nullptr);
  if (loop == nullptr) {
    return {};
  }
  ShardByDevice* part = nullptr;
  for (Expr* e : loop->body().exprs()) {
    if (auto* p = dynamic_cast<ShardByDevice*>(e)) {
      part = p;
    }
  }
  EXPECT_NE(part, nullptr) << hic->toString();
  if (part == nullptr) {
    return {};
  }
  EXPECT_EQ(part->in(), hic->inputs()[0]) << "a part of the whole input";
  EXPECT_EQ(part->axis(), 0);
  ScalarEvaluator eval;
  eval.bind(hic->inputs()[0]->logical()[0]->extent(), t);
  std::vector<std::pair<int64_t, int64_t>> rows;
  for (int64_t i = 0; i < s; ++i) {
    eval.bind(loop->index(), i);
    rows.emplace_back(
        eval.evaluate(part->start()), eval.evaluate(part->length()));
  }
  return rows;
}

TEST(Lower, LocalSliceIntoStreamChunksTakesTheDevicesPartOfEachChunk) {
  using Rows = std::vector<std::pair<int64_t, int64_t>>;
  // [stream{2}, device{2}, 2] of 8 rows: chunk i is rows [4i, 4i + 4), of
  // which device 1 holds the second half.
  EXPECT_EQ(rowsOfLocalSlice(true, 8, 2, 1), (Rows{{2, 2}, {6, 2}}));
  EXPECT_EQ(rowsOfLocalSlice(true, 8, 2, 0), (Rows{{0, 2}, {4, 2}}));
  // [device{2}, stream{3}, ...] of 10 rows: device 1's shard is rows 5-9,
  // in chunks of 2, 2 and 1.
  EXPECT_EQ(rowsOfLocalSlice(false, 10, 3, 1), (Rows{{5, 2}, {7, 2}, {9, 1}}));
  EXPECT_EQ(rowsOfLocalSlice(false, 10, 3, 0), (Rows{{0, 2}, {2, 2}, {4, 1}}));
}

// The text of `fusion` lowered for device 0 on the CUDA backend, the pair
// of its one linear in LoweringOptions::pairs_without_rings when
// `without_ring`, with the options `options` otherwise.
std::string loweredOnCuda(
    std::unique_ptr<Fusion> fusion,
    bool without_ring,
    hir::LoweringOptions options = {}) {
  runFusionPasses(fusion.get());
  options.backend = CommunicatorBackend::kCuda;
  for (const TensorOp* op : fusion->exprs()) {
    if (without_ring && op->type() == OpType::Linear) {
      options.pairs_without_rings.insert(op);
    }
  }
  return hir::lowerToHostIr(std::move(fusion), options)->toString();
}

TEST(Lower, APairWithoutRingKeepsItsCollectiveOnTheCudaBackend) {
  auto gather = [] {
    return test::makeGatheredLinear(6, 2, 1, DataType::BFloat16, false);
  };
  auto scatter = [] {
    return test::makeScatteredLinear(6, 2, 1, DataType::BFloat16, false);
  };
  const std::string ring = loweredOnCuda(gather(), false);
  EXPECT_GT(test::occurrences(ring, "type=CollectivePermute"), 0u) << ring;
  const std::string gathered = loweredOnCuda(gather(), true);
  EXPECT_EQ(test::occurrences(gathered, "CollectivePermute"), 0u) << gathered;
  EXPECT_EQ(test::occurrences(gathered, "type=Allgather"), 1u) << gathered;
  EXPECT_EQ(test::occurrences(gathered, "backend=NCCL"), 1u) << gathered;
  const std::string scattered = loweredOnCuda(scatter(), true);
  EXPECT_EQ(test::occurrences(scattered, "CollectivePermute"), 0u) << scattered;
  EXPECT_EQ(test::occurrences(scattered, "type=ReduceScatter"), 1u)
      << scattered;
}

TEST(Lower, RingsOrFusedKernelsAskedForOverrideAPairWithoutRing) {
  hir::LoweringOptions rings;
  rings.ring_decomposition = true;
  const std::string ring = loweredOnCuda(
      test::makeGatheredLinear(6, 2, 1, DataType::BFloat16, false),
      true,
      rings);
  EXPECT_GT(test::occurrences(ring, "type=CollectivePermute"), 0u) << ring;
  hir::LoweringOptions fused;
  fused.fused_matmul_communication = FusedMatmulChoice::kOn;
  fused.fused_kernels_available = true;
  const std::string kernel = loweredOnCuda(
      test::makeScatteredLinear(6, 2, 1, DataType::BFloat16, false),
      true,
      fused);
  EXPECT_EQ(test::occurrences(kernel, "= LinearReduceScatter("), 1u) << kernel;
}

// The allgather + linear of six rows over two devices lowered for device 0
// on the CUDA backend with `choice`, its linear among the pairs the
// runtime chose for the fused kernel when `chosen`.
std::string gatheredLinearWithChoice(FusedMatmulChoice choice, bool chosen) {
  auto fusion = test::makeGatheredLinear(6, 2, 1, DataType::BFloat16, false);
  runFusionPasses(fusion.get());
  hir::LoweringOptions options;
  options.backend = CommunicatorBackend::kCuda;
  options.fused_matmul_communication = choice;
  options.fused_kernels_available = true;
  for (const TensorOp* op : fusion->exprs()) {
    if (chosen && op->type() == OpType::Linear) {
      options.fused_pairs.insert(op);
    }
  }
  return hir::lowerToHostIr(std::move(fusion), options)->toString();
}

TEST(Lower, APairTheRuntimeChoseTakesTheFusedKernelByDefault) {
  const std::string chosen =
      gatheredLinearWithChoice(FusedMatmulChoice::kAuto, true);
  EXPECT_EQ(test::occurrences(chosen, "= AllgatherLinear("), 1u) << chosen;
  EXPECT_EQ(test::occurrences(chosen, "CollectivePermute"), 0u) << chosen;
  // Not chosen, or the kernels refused by the user: the ring.
  for (const auto& [choice, is_chosen] :
       {std::pair{FusedMatmulChoice::kAuto, false},
        std::pair{FusedMatmulChoice::kOff, true}}) {
    const std::string ring = gatheredLinearWithChoice(choice, is_chosen);
    EXPECT_EQ(test::occurrences(ring, "AllgatherLinear("), 0u) << ring;
    EXPECT_GT(test::occurrences(ring, "type=CollectivePermute"), 0u) << ring;
  }
}

// Chunk i of an axis of extent t split into s chunks covers rows
// [i * ceil(t / s), ...), clamped: the last chunks may be short or empty.
std::vector<int64_t> chunkLengths(int64_t t, int64_t s) {
  auto hic = lower(test::makeRowParallelLinear(2, 2, s));
  auto* loop = static_cast<ForLoop*>(hic->topLevel().exprs()[0]);
  auto* view = static_cast<ShardByStream*>(loop->body().exprs()[0]);
  ScalarEvaluator eval;
  eval.bind(hic->inputs()[0]->logical()[0]->extent(), t);
  std::vector<int64_t> lengths;
  for (int64_t i = 0; i < s; ++i) {
    eval.bind(loop->index(), i);
    EXPECT_EQ(eval.evaluate(view->start()), std::min(t, i * ((t + s - 1) / s)));
    lengths.push_back(eval.evaluate(view->length()));
  }
  return lengths;
}

TEST(Lower, ChunksOfUnevenAxesAreShortOrEmpty) {
  EXPECT_EQ(chunkLengths(9, 3), (std::vector<int64_t>{3, 3, 3}));
  EXPECT_EQ(chunkLengths(7, 3), (std::vector<int64_t>{3, 3, 1}));
  EXPECT_EQ(chunkLengths(10, 4), (std::vector<int64_t>{3, 3, 3, 1}));
  EXPECT_EQ(chunkLengths(2, 3), (std::vector<int64_t>{1, 1, 0}));
  EXPECT_EQ(chunkLengths(1, 3), (std::vector<int64_t>{1, 0, 0}));
}

} // namespace
} // namespace mdfuser
