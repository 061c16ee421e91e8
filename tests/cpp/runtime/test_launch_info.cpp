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
    "TORCHELASTIC_RUN_ID",
    "OMPI_MCA_ess_base_jobid",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_LOCALID",
    "SLURM_TASKS_PER_NODE",
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
    "SLURM_JOB_NODELIST",
    "SLURM_STEP_NODELIST",
    "MASTER_ADDR",
    "MASTER_PORT",
    "MDFUSER_PORT",
    "MDFUSER_TIMEOUT_S",
    "MDFUSER_RENDEZVOUS_TIMEOUT_S",
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
  EXPECT_EQ(options.rendezvous_timeout, std::chrono::seconds(300));
}

TEST_F(LaunchInfoTest, RendezvousTimeoutFollowsTheTimeoutUnlessSet) {
  env_.set("MDFUSER_TIMEOUT_S", "7");
  EXPECT_EQ(
      CommunicatorOptions::fromEnvironment().rendezvous_timeout,
      std::chrono::seconds(7));
  env_.set("MDFUSER_RENDEZVOUS_TIMEOUT_S", "90");
  const CommunicatorOptions options = CommunicatorOptions::fromEnvironment();
  EXPECT_EQ(options.timeout, std::chrono::seconds(7));
  EXPECT_EQ(options.rendezvous_timeout, std::chrono::seconds(90));
  env_.set("MDFUSER_RENDEZVOUS_TIMEOUT_S", "-1");
  EXPECT_VALUE_ERROR(
      CommunicatorOptions::fromEnvironment(),
      "MDFUSER_RENDEZVOUS_TIMEOUT_S must be positive, got -1");
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

TEST_F(LaunchInfoTest, RankWithoutWorldSizeIsAnError) {
  env_.set("RANK", "1");
  EXPECT_VALUE_ERROR(
      LaunchInfo::fromEnvironment(),
      "torchrun variables are set but WORLD_SIZE is missing");
}

TEST_F(LaunchInfoTest, OpenMpiAndTorchrunMustAgree) {
  env_.set("OMPI_COMM_WORLD_RANK", "1")
      .set("OMPI_COMM_WORLD_SIZE", "2")
      .set("RANK", "1")
      .set("WORLD_SIZE", "2");
  EXPECT_EQ(LaunchInfo::fromEnvironment().launcher, "mpirun");
  env_.set("RANK", "0").set("WORLD_SIZE", "4");
  EXPECT_VALUE_ERROR(
      LaunchInfo::fromEnvironment(),
      "Open MPI says this is rank 1 of 2 (OMPI_COMM_WORLD_RANK, "
      "OMPI_COMM_WORLD_SIZE), but torchrun's variables say RANK=0, "
      "WORLD_SIZE=4; launch with one launcher, or unset the other's "
      "variables");
}

TEST_F(LaunchInfoTest, ReadsSrun) {
  env_.set("SLURM_PROCID", "5")
      .set("SLURM_NTASKS", "8")
      .set("SLURM_LOCALID", "1")
      .set("SLURM_TASKS_PER_NODE", "4(x2)")
      .set("SLURM_JOB_ID", "77")
      .set("SLURM_STEP_ID", "3")
      .set("SLURM_STEP_NODELIST", "gpu[07-08]")
      .set("SLURM_JOB_NODELIST", "gpu[01-08]");
  LaunchInfo info = LaunchInfo::fromEnvironment();
  EXPECT_EQ(info.launcher, "srun");
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.size, 8);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_size, 4);
  EXPECT_EQ(info.jobString(), "srun job 77.3 of 8 ranks");
  // The store runs on the step's first host, unless MASTER_ADDR says.
  EXPECT_EQ(CommunicatorOptions::fromEnvironment().master_addr, "gpu07");
  env_.set("MASTER_ADDR", "head");
  EXPECT_EQ(CommunicatorOptions::fromEnvironment().master_addr, "head");
  env_.set("SLURM_NTASKS", "");
  EXPECT_VALUE_ERROR(
      LaunchInfo::fromEnvironment(),
      "SLURM variables are set but SLURM_NTASKS is missing");
}

TEST_F(LaunchInfoTest, TorchrunAndOpenMpiWinOverSrun) {
  // torchrun or mpirun inside an srun step: SLURM's variables describe
  // the step's tasks, not the processes of the job.
  env_.set("SLURM_PROCID", "0").set("SLURM_NTASKS", "1");
  env_.set("RANK", "3").set("WORLD_SIZE", "4").set("TORCHELASTIC_RUN_ID", "x");
  LaunchInfo info = LaunchInfo::fromEnvironment();
  EXPECT_EQ(info.launcher, "torchrun");
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.jobString(), "torchrun job x of 4 ranks");
  env_.unset("RANK").unset("WORLD_SIZE");
  env_.set("OMPI_COMM_WORLD_RANK", "2").set("OMPI_COMM_WORLD_SIZE", "3");
  env_.set("OMPI_MCA_ess_base_jobid", "99");
  info = LaunchInfo::fromEnvironment();
  EXPECT_EQ(info.launcher, "mpirun");
  EXPECT_EQ(info.jobString(), "mpirun job 99 of 3 ranks");
}

TEST_F(LaunchInfoTest, FirstHostOfASlurmNodeList) {
  EXPECT_EQ(firstHostOf("node7"), "node7");
  EXPECT_EQ(firstHostOf("node7,node9"), "node7");
  EXPECT_EQ(firstHostOf("node[03-05,9],gpu1"), "node03");
  EXPECT_EQ(firstHostOf("rack[2,4]-n[10-11]"), "rack2-n10");
  EXPECT_VALUE_ERROR(firstHostOf("node[3"), "malformed SLURM node list");
  EXPECT_VALUE_ERROR(firstHostOf(""), "malformed SLURM node list");
}

} // namespace
} // namespace mdfuser
