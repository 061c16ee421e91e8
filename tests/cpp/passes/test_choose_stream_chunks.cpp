// SPDX-License-Identifier: MIT
//
// An outer_split without a factor leaves the number of stream chunks to
// mdfuser: the fusion prints it as "auto" until it is chosen, the counts
// worth trying divide the split extent, and the cost model picks one chunk
// when the host's issue of a chunk costs more than it hides, the largest
// count when chunks are free, and a count between the two otherwise.

#include <gtest/gtest.h>

#include "common/column_parallel.h"
#include "common/expect_error.h"
#include "common/row_parallel.h"
#include "common/transformer_mlp.h"
#include "multidevice/fused_matmul_choice.h"
#include "passes/choose_stream_chunks.h"
#include "passes/pipeline.h"

namespace mdfuser {
namespace {

constexpr int64_t kH = 512;
constexpr int64_t kD = 2;

// The row-parallel linear of `t` rows and hidden size `h` with its chunk
// count chosen as `count`, the fusion passes run, and `extents` bound to its
// input's rows.
std::unique_ptr<Fusion> compiled(
    int64_t count, int64_t t, int64_t h, ScalarEvaluator& extents) {
  auto fusion = test::makeRowParallelLinear(h, kD, test::kChosenChunks);
  chooseStreamChunks(*fusion, count);
  runFusionPasses(fusion.get());
  extents.bind(fusion->inputs()[0]->logical()[0]->extent(), t);
  return fusion;
}

std::vector<std::pair<int64_t, double>> estimates(
    const MachineModel& model,
    int64_t t,
    int64_t h = kH,
    const Decompositions& decompositions = {}) {
  auto probe = test::makeRowParallelLinear(h, kD, test::kChosenChunks);
  const std::vector<const Split*> splits = chosenSplits(*probe);
  ScalarEvaluator probe_extents;
  probe_extents.bind(probe->inputs()[0]->logical()[0]->extent(), t);
  std::vector<std::pair<int64_t, double>> result;
  for (int64_t count : candidateChunkCounts(splits, probe_extents)) {
    ScalarEvaluator extents;
    auto fusion = compiled(count, t, h, extents);
    result.emplace_back(
        count,
        estimateStreamSeconds(*fusion, extents, model, count, decompositions));
  }
  return result;
}

// An H100-like machine.
MachineModel hopper() {
  MachineModel model;
  model.gemm_flops = 600e12;
  model.gemm_half_outputs = 256.0 * 4096;
  model.memory_bytes = 2.5e12;
  model.link_bytes = 150e9;
  model.statement_seconds = 8e-6;
  model.move_seconds = 5e-6;
  return model;
}

TEST(ChooseStreamChunks, ChosenCountPrintsAutoUntilChosen) {
  auto fusion = test::makeRowParallelLinear(4, kD, test::kChosenChunks);
  EXPECT_NE(fusion->toString().find("istreamIdx7{auto}"), std::string::npos)
      << fusion->toString();
  EXPECT_EQ(chosenSplits(*fusion).size(), 1);
  chooseStreamChunks(*fusion, 3);
  EXPECT_TRUE(chosenSplits(*fusion).empty());
  runFusionPasses(fusion.get());
  // The same program as a split of 3 written by the user.
  auto written = test::makeRowParallelLinear(4, kD, 3);
  runFusionPasses(written.get());
  EXPECT_EQ(fusion->toString(), written->toString());
}

TEST(ChooseStreamChunks, ChosenCountOnAnAxisNotOnStreamsIsRefused) {
  auto fusion = std::make_unique<Fusion>();
  TensorView* inp = fusion->defineTensor({-1, 8}, {}, DataType::Float);
  fusion->addOutput(set(inp));
  inp->outerSplitChosen(0);
  EXPECT_VALUE_ERROR(
      chosenSplits(*fusion),
      "outer_split without a factor lets mdfuser choose the number of stream "
      "chunks, but its outer part iS");
  EXPECT_VALUE_ERROR(
      chosenSplits(*fusion),
      "is not parallelized; parallelize it on "
      "ParallelType.stream, or give the split a factor");
}

TEST(ChooseStreamChunks, ChosenCountAboveAnInputsDeviceSplitIsRefused) {
  // The tokens in chunks, then each chunk across the devices: the count
  // would decide which rows each device's shard holds.
  auto fusion = std::make_unique<Fusion>();
  TensorView* x = fusion->defineTensor({-1, 8}, {}, DataType::Float);
  fusion->addOutput(set(x));
  x->setDeviceMesh(DeviceMesh({0, 1}));
  x->outerSplitChosen(0);
  x->parallelize(0, ParallelType::Stream);
  x->outerSplit(1, 2);
  x->parallelize(1, ParallelType::DIDx);
  EXPECT_VALUE_ERROR(
      chosenSplits(*fusion),
      "splits an axis into stream chunks above its split across devices "
      "(mesh_x): the count mdfuser chooses would decide how the fusion's "
      "input or output is laid out across devices");
}

TEST(ChooseStreamChunks, CandidatesDivideTheSplitExtent) {
  auto fusion = test::makeRowParallelLinear(4, kD, test::kChosenChunks);
  const std::vector<const Split*> splits = chosenSplits(*fusion);
  ScalarEvaluator extents;
  extents.bind(fusion->inputs()[0]->logical()[0]->extent(), 12);
  EXPECT_EQ(
      candidateChunkCounts(splits, extents),
      (std::vector<int64_t>{1, 2, 3, 4, 6, 12}));
  ScalarEvaluator large;
  large.bind(fusion->inputs()[0]->logical()[0]->extent(), 8192);
  EXPECT_EQ(
      candidateChunkCounts(splits, large),
      (std::vector<int64_t>{1, 2, 4, 8, 16}));
  ScalarEvaluator empty;
  empty.bind(fusion->inputs()[0]->logical()[0]->extent(), 0);
  EXPECT_EQ(candidateChunkCounts(splits, empty), std::vector<int64_t>{1});
}

TEST(ChooseStreamChunks, OneChunkCostsItsThreeStages) {
  // One chunk of t = 1024 rows: a [1024, 4h / d] x [4h / d, h] GEMM, then
  // the allreduce of the [1024, h] partial sums (bf16), and the host's issue
  // of its two operations; no overlap. The allreduce's ring over d devices
  // takes 2 (d - 1) steps.
  const MachineModel model = hopper();
  const int64_t t = 1024;
  ScalarEvaluator extents;
  auto fusion = compiled(1, t, kH, extents);
  const double k = 4.0 * kH / kD;
  const double outputs = 1.0 * t * kH;
  const double gemm =
      2.0 * t * kH * k /
      (model.gemm_flops * (outputs / (outputs + model.gemm_half_outputs)));
  const double allreduce = model.statement_seconds +
                           2.0 * (kD - 1) * model.move_seconds +
                           1.0 * t * kH * 2 / model.link_bytes;
  const double expected = gemm + allreduce + 2 * model.statement_seconds;
  EXPECT_NEAR(
      estimateStreamSeconds(*fusion, extents, model, 1, {}),
      expected,
      1e-3 * expected);
}

TEST(ChooseStreamChunks, AnAllreduceOverDDevicesTakesItsRingsSteps) {
  // Each device moves 2 (d - 1) / d of the [t, h] partial sums in 2 (d - 1)
  // steps, besides the statement that issues the allreduce.
  const MachineModel model = hopper();
  const int64_t t = 1024;
  for (int64_t d : {2, 4, 8}) {
    auto fusion = test::makeRowParallelLinear(kH, d, 1);
    runFusionPasses(fusion.get());
    ScalarEvaluator extents;
    extents.bind(fusion->inputs()[0]->logical()[0]->extent(), t);
    const StreamWork work = estimateStreamWork(*fusion, extents, model, 1, {});
    const double steps = 2.0 * (d - 1);
    const double moved = steps / d * t * kH * 2;
    const double expected = model.statement_seconds +
                            steps * model.move_seconds +
                            moved / model.link_bytes;
    EXPECT_NEAR(work.communication, expected, 1e-6 * expected) << "d = " << d;
  }
}

TEST(ChooseStreamChunks, RingsComputeTheGemmInOnePartPerDevice) {
  // Rings (the CUDA backend) compute the row-parallel GEMM in d parts, each
  // of t / d rows: the GEMM of one chunk costs what d GEMMs of fewer
  // outputs do; the allreduce is the same.
  const MachineModel model = hopper();
  const int64_t t = 1024;
  ScalarEvaluator extents;
  auto fusion = compiled(1, t, kH, extents);
  const StreamWork whole = estimateStreamWork(*fusion, extents, model, 1, {});
  const StreamWork parts =
      estimateStreamWork(*fusion, extents, model, 1, {.rings = true});
  const double flops = 2.0 * t * kH * (4.0 * kH / kD);
  const double outputs = 1.0 * t * kH / kD;
  EXPECT_NEAR(
      parts.compute,
      flops /
          (model.gemm_flops * (outputs / (outputs + model.gemm_half_outputs))),
      1e-3 * parts.compute);
  EXPECT_GT(parts.compute, whole.compute);
  EXPECT_DOUBLE_EQ(parts.communication, whole.communication);
  // Smaller parts make more chunks cost more: rings never choose more.
  EXPECT_LE(
      fastestChunkCount(estimates(model, 8192, 8192, {.rings = true})).count,
      fastestChunkCount(estimates(model, 8192, 8192, {})).count);
}

TEST(ChooseStreamChunks, AnExchangedAllreduceIsOneMoveBesideOneGemm) {
  // Exchanged (LoweringOptions::exchange_allreduce), the allreduce of the
  // row-parallel linear's partial sums over two devices moves the whole
  // [t, h] partial sum in one move that waits for no step (no step
  // latency), beside the GEMM in one part; over four devices the lowering
  // does not exchange, and the rings are priced.
  const MachineModel model = hopper();
  const int64_t t = 1024;
  for (int64_t d : {2, 4}) {
    auto fusion = test::makeRowParallelLinear(kH, d, 2);
    runFusionPasses(fusion.get());
    ScalarEvaluator extents;
    extents.bind(fusion->inputs()[0]->logical()[0]->extent(), t);
    const StreamWork whole = estimateStreamWork(*fusion, extents, model, 2, {});
    const StreamWork rings =
        estimateStreamWork(*fusion, extents, model, 2, {.rings = true});
    const StreamWork exchanged = estimateStreamWork(
        *fusion, extents, model, 2, {.rings = true, .exchanged = true});
    if (d == 4) {
      EXPECT_DOUBLE_EQ(exchanged.compute, rings.compute);
      EXPECT_DOUBLE_EQ(exchanged.communication, rings.communication);
      continue;
    }
    EXPECT_DOUBLE_EQ(exchanged.compute, whole.compute);
    EXPECT_LT(exchanged.compute, rings.compute);
    const double moved = 0.5 * t * kH * 2;
    const double expected = model.statement_seconds + moved / model.link_bytes;
    EXPECT_NEAR(exchanged.communication, expected, 1e-6 * expected);
    EXPECT_NEAR(
        rings.communication - exchanged.communication,
        2 * model.move_seconds,
        1e-6 * expected);
  }
}

TEST(ChooseStreamChunks, ExchangedLinkBoundLoopsTakeMoreChunks) {
  // Two H200s as mdfuser.calibration measured them (2026-11-29), the
  // row-parallel linear at h = 1024, t = 65536, whose allreduce the link
  // bounds: as a reduce-scatter and an allgather (two steps a chunk, the
  // GEMM in two parts) the model chooses 4 chunks; exchanged (one move a
  // chunk that waits for no step, the GEMM whole) 8, where the exchange
  // measured 0.543 ms against 0.553 at 4.
  MachineModel h200;
  h200.gemm_flops = 7.396e14;
  h200.gemm_half_outputs = 1.295e6;
  h200.memory_bytes = 4.09e12;
  h200.link_bytes = 3.697e11;
  h200.statement_seconds = 10.2e-6;
  h200.move_seconds = 11.0e-6;
  EXPECT_EQ(
      fastestChunkCount(estimates(h200, 65536, 1024, {.rings = true})).count,
      4);
  EXPECT_EQ(
      fastestChunkCount(
          estimates(h200, 65536, 1024, {.rings = true, .exchanged = true}))
          .count,
      8);
}

TEST(ChooseStreamChunks, OnlyPairwiseAllreducesOfPartialSumsAreExchanged) {
  auto compiledFusion = [](std::unique_ptr<Fusion> fusion) {
    runFusionPasses(fusion.get());
    return fusion;
  };
  // The row-parallel linear, and the tensor-parallel MLP, whose second
  // linear's bias the fusion passes add after the allreduce.
  EXPECT_TRUE(streamLoopsExchangePartialSums(
      *compiledFusion(test::makeRowParallelLinear(kH, 2, 2))));
  EXPECT_TRUE(streamLoopsExchangePartialSums(
      *compiledFusion(test::makeMlp(kH, 2, 2, "tp"))));
  // Over four devices; without stream loops; a reduce-scatter; the
  // sequence-parallel MLP's allgather and reduce-scatter.
  EXPECT_FALSE(streamLoopsExchangePartialSums(
      *compiledFusion(test::makeRowParallelLinear(kH, 4, 2))));
  EXPECT_FALSE(streamLoopsExchangePartialSums(
      *compiledFusion(test::makeShardedLinear(DeviceMesh({0, 1})))));
  EXPECT_FALSE(streamLoopsExchangePartialSums(*compiledFusion(
      test::makeScatteredLinear(kH, 2, 2, DataType::BFloat16, false))));
  EXPECT_FALSE(streamLoopsExchangePartialSums(
      *compiledFusion(test::makeMlp(kH, 2, 2, "sp"))));
}

TEST(ChooseStreamChunks, AFusedAllgatherLinearIsOneGemmWithItsMovesHidden) {
  // The fused kernel (`fused`) computes an allgather and its linear as one
  // GEMM of the gathered shape: no ring parts, no communication, one
  // statement, where the pair runs as one chunk. A pair it cannot compute
  // (Float) is costed as its ring, and so is a pair cut into several
  // chunks, where lowering keeps the ring.
  const MachineModel model = hopper();
  const int64_t t = 1024;
  for (DataType dtype : {DataType::BFloat16, DataType::Float}) {
    auto fusion =
        test::makeGatheredLinear(kH, kD, /*s=*/2, dtype, /*bias=*/false);
    runFusionPasses(fusion.get());
    ScalarEvaluator extents;
    extents.bind(fusion->inputs()[0]->logical()[0]->extent(), t);
    const auto work = [&](int64_t count, bool fused) {
      return estimateStreamWork(
          *fusion, extents, model, count, {.rings = true, .fused = fused});
    };
    const StreamWork chunked_ring = work(2, false);
    const StreamWork chunked_fused = work(2, true);
    EXPECT_DOUBLE_EQ(chunked_fused.compute, chunked_ring.compute);
    EXPECT_DOUBLE_EQ(chunked_fused.communication, chunked_ring.communication);
    const StreamWork ring = work(1, false);
    const StreamWork fused = work(1, true);
    if (dtype == DataType::Float) {
      EXPECT_DOUBLE_EQ(fused.compute, ring.compute);
      EXPECT_DOUBLE_EQ(fused.communication, ring.communication);
      continue;
    }
    // t gathered rows times the 4h / d columns of this device, over h.
    const double outputs = 1.0 * t * (4.0 * kH / kD);
    const double gemm =
        2.0 * outputs * kH /
        (model.gemm_flops * (outputs / (outputs + model.gemm_half_outputs)));
    EXPECT_NEAR(fused.compute, gemm, 1e-6 * gemm);
    EXPECT_LT(fused.compute, ring.compute);
    EXPECT_EQ(fused.communication, 0.0);
    EXPECT_GT(ring.communication, 0.0);
    EXPECT_LT(fused.host, ring.host);
  }
}

TEST(ChooseStreamChunks, AFusedLinearReduceScatterIsOneGemmWithItsMovesHidden) {
  // The same for a linear and the reduce-scatter of its partial sums: one
  // GEMM over every row of this device's part of in_features, where the
  // ring computes one part per device and moves the partial sums.
  const MachineModel model = hopper();
  const int64_t t = 1024;
  for (DataType dtype : {DataType::BFloat16, DataType::Float}) {
    auto fusion =
        test::makeScatteredLinear(kH, kD, /*s=*/2, dtype, /*bias=*/false);
    runFusionPasses(fusion.get());
    ScalarEvaluator extents;
    extents.bind(fusion->inputs()[0]->logical()[0]->extent(), t);
    const auto work = [&](int64_t count, bool fused) {
      return estimateStreamWork(
          *fusion, extents, model, count, {.rings = true, .fused = fused});
    };
    const StreamWork chunked_ring = work(2, false);
    const StreamWork chunked_fused = work(2, true);
    EXPECT_DOUBLE_EQ(chunked_fused.compute, chunked_ring.compute);
    EXPECT_DOUBLE_EQ(chunked_fused.communication, chunked_ring.communication);
    const StreamWork ring = work(1, false);
    const StreamWork fused = work(1, true);
    if (dtype == DataType::Float) {
      EXPECT_DOUBLE_EQ(fused.compute, ring.compute);
      EXPECT_DOUBLE_EQ(fused.communication, ring.communication);
      continue;
    }
    // t rows times the h columns, over this device's 4h / d of
    // in_features.
    const double outputs = 1.0 * t * kH;
    const double gemm =
        2.0 * outputs * (4.0 * kH / kD) /
        (model.gemm_flops * (outputs / (outputs + model.gemm_half_outputs)));
    EXPECT_NEAR(fused.compute, gemm, 1e-6 * gemm);
    EXPECT_LT(fused.compute, ring.compute);
    EXPECT_EQ(fused.communication, 0.0);
    EXPECT_GT(ring.communication, 0.0);
    EXPECT_LT(fused.host, ring.host);
  }
}

TEST(ChooseStreamChunks, AReduceScatterOfPartialSumsFormsAFusedPair) {
  // The pair the cost model asks the fused kernel about: the reduce-scatter
  // of the linear's partial sums, over both devices, along the tokens,
  // whose count is symbolic; the linear itself forms none.
  auto fusion = test::makeScatteredLinear(
      kH, kD, /*s=*/1, DataType::BFloat16, /*bias=*/false);
  runFusionPasses(fusion.get());
  int64_t pairs = 0;
  for (const TensorOp* op : fusion->exprs()) {
    const std::optional<LinearReduceScatterPair> pair =
        linearReduceScatterPairOf(op);
    if (!pair.has_value()) {
      continue;
    }
    ++pairs;
    EXPECT_EQ(pair->team_size, kD);
    EXPECT_EQ(pair->axis, 0);
    EXPECT_EQ(pair->in_rank, 2);
    EXPECT_EQ(pair->weight_rank, 2);
    EXPECT_EQ(pair->out_rank, 2);
    EXPECT_FALSE(pair->bias);
    EXPECT_EQ(pair->out_dtype, DataType::BFloat16);
    EXPECT_FALSE(pair->rows.has_value());
    EXPECT_EQ(fusedLinearReduceScatterObstacle(*pair), "");
  }
  EXPECT_EQ(pairs, 1);
}

TEST(ChooseStreamChunks, SlowCollectiveStepsGiveFewerChunks) {
  // The balanced shape (the GEMM and the allreduce about as long): free
  // steps make the most chunks fastest, each step of 40 us fewer.
  MachineModel model = hopper();
  model.statement_seconds = 0;
  model.move_seconds = 0;
  const int64_t free_steps =
      fastestChunkCount(estimates(model, 65536, 1024)).count;
  model.move_seconds = 40e-6;
  const ChunkChoice slow = fastestChunkCount(estimates(model, 65536, 1024));
  EXPECT_EQ(free_steps, 16);
  EXPECT_LT(slow.count, free_steps) << slow.toString();
  EXPECT_GT(slow.count, 1) << slow.toString();
}

TEST(ChooseStreamChunks, ExpensiveStatementsGiveOneChunk) {
  MachineModel model = hopper();
  model.statement_seconds = 1.0;
  EXPECT_EQ(fastestChunkCount(estimates(model, 8192)).count, 1);
}

TEST(ChooseStreamChunks, FreeChunksGiveTheMostChunks) {
  MachineModel model = hopper();
  model.statement_seconds = 0;
  model.move_seconds = 0;
  model.gemm_half_outputs = 0;
  EXPECT_EQ(fastestChunkCount(estimates(model, 8192)).count, 16);
}

TEST(ChooseStreamChunks, CostlyChunksGiveACountBetween) {
  // h = t = 8192: the allreduce takes a quarter of the GEMM's time; a few
  // chunks hide most of it, more make GEMMs of too few rows to run at
  // their full rate.
  MachineModel model = hopper();
  model.statement_seconds = 20e-6;
  const ChunkChoice choice = fastestChunkCount(estimates(model, 8192, 8192));
  EXPECT_GT(choice.count, 1) << choice.toString();
  EXPECT_LT(choice.count, 16) << choice.toString();
  for (const auto& [count, seconds] : choice.seconds) {
    if (count == choice.count) {
      EXPECT_LE(seconds, choice.seconds.front().second) << choice.toString();
    }
  }
}

TEST(ChooseStreamChunks, TiesGoToTheSmallerCount) {
  EXPECT_EQ(fastestChunkCount({{1, 2.0}, {2, 1.0}, {4, 1.0}}).count, 2);
  EXPECT_EQ(
      fastestChunkCount({{1, 2.0}, {2, 1.0}}).toString(),
      "stream chunks: 2 (estimated 1: 2e+06 us, 2: 1e+06 us)");
}

} // namespace
} // namespace mdfuser
