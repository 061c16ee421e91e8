// SPDX-License-Identifier: MIT
#include "runtime/launch.h"

#include <cstdlib>
#include <optional>
#include <vector>

#include "ir/errors.h"

namespace mdfuser {

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    return std::nullopt;
  }
  return std::string(value);
}

namespace {

std::optional<int64_t> envInt(const char* name) {
  std::optional<std::string> value = env(name);
  if (!value.has_value()) {
    return std::nullopt;
  }
  size_t parsed = 0;
  int64_t result = 0;
  try {
    result = std::stoll(*value, &parsed);
  } catch (const std::exception&) {
    parsed = 0;
  }
  MDF_USER_CHECK(
      parsed == value->size(),
      "environment variable ",
      name,
      "='",
      *value,
      "' is not an integer");
  return result;
}

int64_t requireEnvInt(const char* name, const char* launcher) {
  std::optional<int64_t> value = envInt(name);
  MDF_USER_CHECK(
      value.has_value(),
      launcher,
      " variables are set but ",
      name,
      " is missing");
  return *value;
}

} // namespace

LaunchInfo LaunchInfo::fromEnvironment() {
  LaunchInfo info;
  const bool open_mpi = env("OMPI_COMM_WORLD_SIZE").has_value() ||
                        env("OMPI_COMM_WORLD_RANK").has_value();
  const bool torchrun =
      env("WORLD_SIZE").has_value() || env("RANK").has_value();
  if (open_mpi) {
    info.launcher = "mpirun";
    info.size = requireEnvInt("OMPI_COMM_WORLD_SIZE", "Open MPI");
    info.rank = requireEnvInt("OMPI_COMM_WORLD_RANK", "Open MPI");
    info.local_rank = envInt("OMPI_COMM_WORLD_LOCAL_RANK").value_or(info.rank);
    info.local_size = envInt("OMPI_COMM_WORLD_LOCAL_SIZE").value_or(info.size);
    info.job_id = env("OMPI_MCA_ess_base_jobid").value_or("");
    if (torchrun) {
      const std::optional<int64_t> rank = envInt("RANK");
      const std::optional<int64_t> size = envInt("WORLD_SIZE");
      MDF_USER_CHECK(
          rank.value_or(info.rank) == info.rank &&
              size.value_or(info.size) == info.size,
          "Open MPI says this is rank ",
          info.rank,
          " of ",
          info.size,
          " (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE), but torchrun's "
          "variables say RANK=",
          rank.has_value() ? std::to_string(*rank) : "(unset)",
          ", WORLD_SIZE=",
          size.has_value() ? std::to_string(*size) : "(unset)",
          "; launch with one launcher, or unset the other's variables");
    }
  } else if (torchrun) {
    info.launcher = "torchrun";
    info.size = requireEnvInt("WORLD_SIZE", "torchrun");
    info.rank = requireEnvInt("RANK", "torchrun");
    info.local_rank = envInt("LOCAL_RANK").value_or(info.rank);
    info.local_size = envInt("LOCAL_WORLD_SIZE").value_or(info.size);
    info.agent_store = env("TORCHELASTIC_USE_AGENT_STORE") == "True";
    info.job_id = env("TORCHELASTIC_RUN_ID").value_or("");
  } else if (env("SLURM_PROCID").has_value()) {
    info.launcher = "srun";
    info.size = requireEnvInt("SLURM_NTASKS", "SLURM");
    info.rank = requireEnvInt("SLURM_PROCID", "SLURM");
    info.local_rank = envInt("SLURM_LOCALID").value_or(info.rank);
    // "4(x2),3": this node's count is not told apart; the first is.
    info.local_size = info.size;
    if (std::optional<std::string> per_node = env("SLURM_TASKS_PER_NODE")) {
      const size_t end = per_node->find_first_not_of("0123456789");
      if (end != 0) {
        info.local_size = std::stoll(per_node->substr(0, end));
      }
    }
    if (std::optional<std::string> job = env("SLURM_JOB_ID")) {
      info.job_id = *job + "." + env("SLURM_STEP_ID").value_or("0");
    }
  }
  MDF_USER_CHECK(
      info.size >= 1 && info.rank >= 0 && info.rank < info.size,
      "the launcher says rank ",
      info.rank,
      " of a world of ",
      info.size,
      "; expected 0 <= rank < world size");
  MDF_USER_CHECK(
      info.local_size >= 1 && info.local_rank >= 0 &&
          info.local_rank < info.local_size,
      "the launcher says local rank ",
      info.local_rank,
      " of ",
      info.local_size,
      " local processes; expected 0 <= local rank < local size");
  return info;
}

std::string LaunchInfo::jobString() const {
  return detail::concat(
      launcher.empty() ? "unlaunched" : launcher,
      job_id.empty() ? "" : " job " + job_id,
      " of ",
      size,
      size == 1 ? " rank" : " ranks");
}

std::string firstHostOf(const std::string& nodelist) {
  // The first entry ends at the first comma outside brackets.
  std::string host;
  bool in_brackets = false;
  for (size_t i = 0; i < nodelist.size(); ++i) {
    const char c = nodelist[i];
    if (c == '[') {
      in_brackets = true;
      // The first index of the range list, zero padding kept.
      const size_t end = nodelist.find_first_of(",-]", i + 1);
      MDF_USER_CHECK(
          end != std::string::npos,
          "malformed SLURM node list '",
          nodelist,
          "'");
      host += nodelist.substr(i + 1, end - i - 1);
      continue;
    }
    if (c == ']') {
      in_brackets = false;
      continue;
    }
    if (in_brackets) {
      continue;
    }
    if (c == ',') {
      break;
    }
    host += c;
  }
  MDF_USER_CHECK(
      !host.empty() && !in_brackets,
      "malformed SLURM node list '",
      nodelist,
      "'");
  return host;
}

CommunicatorOptions CommunicatorOptions::fromEnvironment() {
  CommunicatorOptions options;
  options.master_addr = env("MASTER_ADDR").value_or(options.master_addr);
  if (!env("MASTER_ADDR").has_value() &&
      LaunchInfo::fromEnvironment().launcher == "srun") {
    // The first host of the step serves the store, as rank 0 runs there.
    if (std::optional<std::string> nodes = env("SLURM_STEP_NODELIST")
                                               ? env("SLURM_STEP_NODELIST")
                                               : env("SLURM_JOB_NODELIST")) {
      options.master_addr = firstHostOf(*nodes);
    }
  }
  auto read_port = [](const char* name) -> std::optional<int> {
    std::optional<int64_t> port = envInt(name);
    if (!port.has_value()) {
      return std::nullopt;
    }
    MDF_USER_CHECK(
        *port > 0 && *port < 65536,
        "rendezvous port ",
        name,
        "=",
        *port,
        " is not in 1..65535");
    return static_cast<int>(*port);
  };
  options.launcher_port =
      read_port("MASTER_PORT").value_or(options.launcher_port);
  options.port = read_port("MDFUSER_PORT").value_or(options.launcher_port);
  if (std::optional<int64_t> high = envInt("MDFUSER_NCCL_HIGH_PRIORITY")) {
    MDF_USER_CHECK(
        *high == 0 || *high == 1,
        "MDFUSER_NCCL_HIGH_PRIORITY must be 0 or 1, got ",
        *high);
    options.nccl_high_priority = *high == 1;
  }
  if (std::optional<int64_t> share = envInt("MDFUSER_SHARE_DEVICES")) {
    MDF_USER_CHECK(
        *share == 0 || *share == 1,
        "MDFUSER_SHARE_DEVICES must be 0 or 1, got ",
        *share);
    options.share_devices = *share == 1;
  }
  if (std::optional<int64_t> timeout = envInt("MDFUSER_TIMEOUT_S")) {
    MDF_USER_CHECK(
        *timeout > 0, "MDFUSER_TIMEOUT_S must be positive, got ", *timeout);
    options.timeout = std::chrono::seconds(*timeout);
  }
  options.rendezvous_timeout = options.timeout;
  if (std::optional<int64_t> timeout = envInt("MDFUSER_RENDEZVOUS_TIMEOUT_S")) {
    MDF_USER_CHECK(
        *timeout > 0,
        "MDFUSER_RENDEZVOUS_TIMEOUT_S must be positive, got ",
        *timeout);
    options.rendezvous_timeout = std::chrono::seconds(*timeout);
  }
  return options;
}

} // namespace mdfuser
