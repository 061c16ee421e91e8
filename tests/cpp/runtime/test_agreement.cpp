// SPDX-License-Identifier: MIT
//
// The agreement check's parts that need no peers: what a rank's fingerprint
// holds, how it travels, which ranks compare, and the error every rank
// raises when two fingerprints differ.

#include <optional>

#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "common/expect_error.h"
#include "common/row_parallel.h"
#include "runtime/agreement.h"

namespace mdfuser {
namespace {

// The row-parallel linear with h = 4 on two devices: local shards are
// inp [t, 8] and w [4, 8].
class AgreementTest : public ::testing::Test {
 protected:
  AgreementTest()
      : fusion_(test::makeRowParallelLinear(4, 2, 3, DataType::Float)) {}

  RunFingerprint of(int64_t rows, ExecuteOptions options = {}) {
    return fingerprintOf(
        *fusion_, {at::zeros({rows, 8}), at::zeros({4, 8})}, options);
  }

  std::unique_ptr<Fusion> fusion_;
};

std::string messageOf(const std::optional<UserError>& error) {
  return error.has_value() ? error->what() : "(none)";
}

TEST_F(AgreementTest, EqualFingerprintsAgree) {
  EXPECT_FALSE(disagreement({0, 1}, {of(6), of(6)}).has_value());
}

TEST_F(AgreementTest, DifferentShapesNameBothRanksAndValues) {
  std::optional<UserError> error =
      disagreement({0, 1, 2}, {of(6), of(6), of(0)});
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->kind(), UserError::Kind::kValue);
  EXPECT_EQ(
      std::string(error->what()),
      "input 0 (T0) has shape [6, 8] on rank 0 and [0, 8] on rank 2; every "
      "rank of the fusion's mesh must pass shards of the same shapes, dtypes "
      "and device types");
}

TEST_F(AgreementTest, StridesMayDiffer) {
  RunFingerprint transposed =
      fingerprintOf(*fusion_, {at::zeros({8, 6}).t(), at::zeros({4, 8})}, {});
  EXPECT_FALSE(disagreement({0, 1}, {of(6), transposed}).has_value());
}

TEST_F(AgreementTest, DifferentOptionsNameTheOption) {
  ExecuteOptions copies;
  copies.alias_layout_ops = false;
  EXPECT_EQ(
      messageOf(disagreement({0, 1}, {of(6), of(6, copies)})),
      "the execute options differ: alias_layout_ops=1 on rank 0 and "
      "alias_layout_ops=0 on rank 1; every rank of the fusion's mesh must "
      "pass the same options");
}

TEST_F(AgreementTest, EveryOptionIsCompared) {
  // Each option away from its default is a disagreement naming it.
  const ExecuteOptions defaults;
  for (size_t i = 0; i < defaults.values().size(); ++i) {
    ExecuteOptions changed;
    switch (i) {
      case 0:
        changed.inplace_allreduce = false;
        break;
      case 1:
        changed.compute_on_main_stream = true;
        break;
      case 2:
        changed.alias_layout_ops = false;
        break;
      case 3:
        changed.fuse_layer_norms = false;
        break;
      case 4:
        changed.ring_decomposition = true;
        break;
      case 5:
        changed.cuda_graph = ExecuteOptions::Choice::kOn;
        break;
      case 6:
        changed.ring_prologues_first = ExecuteOptions::Choice::kOn;
        break;
      case 7:
        changed.concurrent_moves = ExecuteOptions::Choice::kOn;
        break;
      case 8:
        changed.exchange_allreduce = ExecuteOptions::Choice::kOn;
        break;
      case 9:
        changed.direct_reduce_scatter = false;
        break;
      case 10:
        changed.backend = hir::CommunicatorBackend::kGloo;
        break;
      case 11:
        changed.fused_matmul_communication = ExecuteOptions::Choice::kOff;
        break;
      default:
        FAIL() << "option " << defaults.values()[i].name << " has no case here";
    }
    const std::string name(defaults.values()[i].name);
    EXPECT_NE(
        messageOf(disagreement({0, 1}, {of(6), of(6, changed)}))
            .find("the execute options differ: " + name + "="),
        std::string::npos)
        << name;
  }
}

TEST_F(AgreementTest, DifferentDefinitionsShowTheFirstDifferentLine) {
  std::unique_ptr<Fusion> other =
      test::makeRowParallelLinear(4, 2, 4, DataType::Float);
  RunFingerprint theirs = fingerprintOf(
      *other, {at::zeros({6, 8}), at::zeros({4, 8})}, ExecuteOptions{});
  const std::string message = messageOf(disagreement({0, 1}, {of(6), theirs}));
  EXPECT_NE(
      message.find("the fusion definitions differ between rank 0 and rank 1: "
                   "line "),
      std::string::npos)
      << message;
  EXPECT_NE(message.find("{3}"), std::string::npos) << message;
  EXPECT_NE(message.find("{4}"), std::string::npos) << message;
}

TEST_F(AgreementTest, AnErrorOfOneRankIsEveryRanksError) {
  RunFingerprint failed;
  failed.error = UserError(UserError::Kind::kType, "input 1 (T1) is bad");
  std::optional<UserError> error = disagreement({0, 3}, {of(6), failed});
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->kind(), UserError::Kind::kType);
  EXPECT_EQ(std::string(error->what()), "rank 3: input 1 (T1) is bad");
}

TEST_F(AgreementTest, FingerprintsSurviveEncoding) {
  RunFingerprint print = of(6);
  print.error = UserError(UserError::Kind::kType, "a message: with 12:colons");
  RunFingerprint decoded = RunFingerprint::decode(print.encode());
  ASSERT_EQ(decoded.fields.size(), print.fields.size());
  for (size_t i = 0; i < print.fields.size(); ++i) {
    EXPECT_EQ(decoded.fields[i].kind, print.fields[i].kind);
    EXPECT_EQ(decoded.fields[i].what, print.fields[i].what);
    EXPECT_EQ(decoded.fields[i].value, print.fields[i].value);
  }
  ASSERT_TRUE(decoded.error.has_value());
  EXPECT_EQ(decoded.error->kind(), UserError::Kind::kType);
  EXPECT_EQ(std::string(decoded.error->what()), print.error->what());
  EXPECT_INTERNAL_ERROR(
      RunFingerprint::decode(print.encode().substr(0, 20)), "fingerprint");
}

TEST_F(AgreementTest, TheTeamsAreTheMeshAxesTheTensorsAreSpreadOn) {
  using Teams = std::vector<std::vector<int64_t>>;
  EXPECT_EQ(agreementTeams(*fusion_, 1, 2), (Teams{{0, 1}}));
  // Outside the mesh, alone in the world, or on a mesh of one device, a
  // rank compares with no one.
  EXPECT_TRUE(agreementTeams(*fusion_, 2, 4).empty());
  EXPECT_TRUE(agreementTeams(*fusion_, 0, 1).empty());
  std::unique_ptr<Fusion> single =
      test::makeRowParallelLinear(4, 1, 3, DataType::Float);
  EXPECT_TRUE(agreementTeams(*single, 0, 2).empty());
}

// x [t, k] on a 2 x 2 mesh, its rows spread on `pt`.
std::unique_ptr<Fusion> onTwoByTwo(std::optional<ParallelType> pt) {
  auto fusion = std::make_unique<Fusion>();
  TensorView* x = fusion->defineTensor({-1, 8}, {}, DataType::Float);
  fusion->addOutput(set(x));
  x->setDeviceMesh(DeviceMesh({0, 1, 2, 3}, {2, 2}));
  if (pt.has_value()) {
    x->outerSplit(0, 2);
    x->parallelize(0, *pt);
  }
  return fusion;
}

TEST_F(AgreementTest, OnATwoByTwoMeshRowsAndColumnsAgreeApart) {
  using Teams = std::vector<std::vector<int64_t>>;
  // mesh_x is the inner axis: rows (0 1) and (2 3).
  EXPECT_EQ(
      agreementTeams(*onTwoByTwo(ParallelType::DIDx), 2, 4), (Teams{{2, 3}}));
  EXPECT_EQ(
      agreementTeams(*onTwoByTwo(ParallelType::DIDy), 2, 4), (Teams{{0, 2}}));
  // Replicated on the mesh: no collective, nothing to agree on.
  EXPECT_TRUE(agreementTeams(*onTwoByTwo(std::nullopt), 2, 4).empty());
}

} // namespace
} // namespace mdfuser
