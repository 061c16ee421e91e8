// SPDX-License-Identifier: MIT
//
// Who a process is, read from mpirun's or torchrun's environment, and the
// communicator options read from the environment.

#include <gtest/gtest.h>

#include "common/env_guard.h"
#include "common/expect_error.h"
#include "runtime/communicator.h"

namespace mdfuser {
namespace {

const char* kLauncherVariables[] = {
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "TORCHELASTIC_USE_AGENT_STORE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "MDFUSER_PORT",
    "MDFUSER_TIMEOUT_S",
    "MDFUSER_NCCL_HIGH_PRIORITY"};

// Starts every test from an environment without launcher variables.
class LaunchInfoTest : public ::testing::Test {
 protected:
  LaunchInfoTest() {
    for (const char* name : kLauncherVariables) {
      env_.unset(name);
    }
  }
  test::EnvGuard env_;
};

TEST_F(LaunchInfoTest, NoLauncherMeansAWorldOfOne) {
  LaunchInfo info = LaunchInfo::fromEnvironment();
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.size, 1);
  EXPECT_EQ(info.launcher, "");
}

TEST_F(LaunchInfoTest, ReadsOpenMpi) {
  env_.set("OMPI_COMM_WORLD_RANK", "3")
      .set("OMPI_COMM_WORLD_SIZE", "4")
      .set("OMPI_COMM_WORLD_LOCAL_RANK", "1")
      .set("OMPI_COMM_WORLD_LOCAL_SIZE", "2");
  LaunchInfo info = LaunchInfo::fromEnvironment();
  EXPECT_EQ(info.launcher, "mpirun");
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.size, 4);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_size, 2);
  EXPECT_FALSE(info.agent_store);
}

TEST_F(LaunchInfoTest, ReadsTorchrun) {
  env_.set("RANK", "1")
      .set("WORLD_SIZE", "2")
      .set("LOCAL_RANK", "1")
      .set("LOCAL_WORLD_SIZE", "2")
      .set("TORCHELASTIC_USE_AGENT_STORE", "True");
  LaunchInfo info = LaunchInfo::fromEnvironment();
  EXPECT_EQ(info.launcher, "torchrun");
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.size, 2);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_TRUE(info.agent_store);
}

TEST_F(LaunchInfoTest, MalformedValuesAreUserErrors) {
  env_.set("WORLD_SIZE", "two").set("RANK", "0");
  EXPECT_VALUE_ERROR(
      LaunchInfo::fromEnvironment(), "WORLD_SIZE='two' is not an integer");
}

TEST_F(LaunchInfoTest, RankMustBeInTheWorld) {
  env_.set("WORLD_SIZE", "2").set("RANK", "2");
  EXPECT_VALUE_ERROR(LaunchInfo::fromEnvironment(), "rank 2 of a world of 2");
}

TEST_F(LaunchInfoTest, MissingRankIsNamed) {
  env_.set("OMPI_COMM_WORLD_SIZE", "2");
  EXPECT_VALUE_ERROR(
      LaunchInfo::fromEnvironment(), "OMPI_COMM_WORLD_RANK is missing");
}

TEST_F(LaunchInfoTest, CommunicatorOptionsDefaults) {
  CommunicatorOptions options = CommunicatorOptions::fromEnvironment();
  EXPECT_EQ(options.master_addr, "localhost");
  EXPECT_EQ(options.port, 29500);
  EXPECT_EQ(options.timeout, std::chrono::seconds(300));
}

TEST_F(LaunchInfoTest, MdfuserPortWinsOverMasterPort) {
  env_.set("MASTER_ADDR", "10.0.0.7")
      .set("MASTER_PORT", "1234")
      .set("MDFUSER_PORT", "4321")
      .set("MDFUSER_TIMEOUT_S", "7");
  CommunicatorOptions options = CommunicatorOptions::fromEnvironment();
  EXPECT_EQ(options.master_addr, "10.0.0.7");
  EXPECT_EQ(options.port, 4321);
  EXPECT_EQ(options.launcher_port, 1234) << "torchrun's store stays put";
  EXPECT_EQ(options.timeout, std::chrono::seconds(7));
}

TEST_F(LaunchInfoTest, NcclPriorityIsAnOption) {
  EXPECT_FALSE(CommunicatorOptions::fromEnvironment().nccl_high_priority);
  env_.set("MDFUSER_NCCL_HIGH_PRIORITY", "1");
  EXPECT_TRUE(CommunicatorOptions::fromEnvironment().nccl_high_priority);
  env_.set("MDFUSER_NCCL_HIGH_PRIORITY", "2");
  EXPECT_VALUE_ERROR(
      CommunicatorOptions::fromEnvironment(),
      "MDFUSER_NCCL_HIGH_PRIORITY must be 0 or 1, got 2");
}

TEST_F(LaunchInfoTest, BadPortAndTimeoutAreUserErrors) {
  env_.set("MASTER_PORT", "70000");
  EXPECT_VALUE_ERROR(
      CommunicatorOptions::fromEnvironment(),
      "rendezvous port MASTER_PORT=70000 is not in 1..65535");
  env_.unset("MASTER_PORT").set("MDFUSER_TIMEOUT_S", "0");
  EXPECT_VALUE_ERROR(
      CommunicatorOptions::fromEnvironment(),
      "MDFUSER_TIMEOUT_S must be positive");
}

} // namespace
} // namespace mdfuser
