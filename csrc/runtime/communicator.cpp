// SPDX-License-Identifier: MIT
#include "runtime/communicator.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <thread>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "ir/errors.h"
#include "runtime/watchdog.h"

namespace mdfuser {

namespace {

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    return std::nullopt;
  }
  return std::string(value);
}

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

double seconds(std::chrono::milliseconds ms) {
  return static_cast<double>(ms.count()) / 1000.0;
}

// An error's message without the C++ backtrace torch appends.
std::string messageOf(const std::exception& e) {
  if (const auto* error = dynamic_cast<const c10::Error*>(&e)) {
    return error->what_without_backtrace();
  }
  return e.what();
}

// "rank 1" or "ranks 1, 3".
std::string ranksString(const std::vector<int64_t>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    s += (i > 0 ? ", " : "") + std::to_string(ranks[i]);
  }
  return s;
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

struct Communicator::State {
  struct Entry {
    std::string key;
    c10::intrusive_ptr<c10d::Backend> backend;
  };

  c10::intrusive_ptr<c10d::Store> store;
  // This process serves the store: it must outlive every client's last
  // request.
  bool hosts_store = false;
  // host:port of the store, and who serves it, for messages.
  std::string store_address;
  std::string store_host;
  std::vector<Entry> backends;
  int64_t barriers = 0;
  // Exchanges made so far, per team.
  std::map<std::string, int64_t> exchanges;
  bool shut_down = false;
};

Communicator::Communicator(LaunchInfo launch, CommunicatorOptions options)
    : launch_(std::move(launch)),
      options_(std::move(options)),
      state_(std::make_unique<State>()) {}

Communicator::~Communicator() {
  try {
    shutdown();
  } catch (...) {
    // Destructors must not throw; shutdown already bounds every wait.
  }
}

namespace {

// Pauses between polls of the store (each poll is one round trip to it).
// A peer is usually a fraction of a millisecond behind: the first 2 ms are
// polled every 20 us, so that a wait overshoots its arrival by little;
// from then on the pauses double from 50 us up to `cap`, as the wait may
// be long.
class Backoff {
 public:
  explicit Backoff(std::chrono::microseconds cap) : cap_(cap) {}
  void pause() {
    if (!slow()) {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      return;
    }
    std::this_thread::sleep_for(next_);
    next_ = std::min(next_ * 2, cap_);
  }
  // Past the quick polls: a wait worth a second look at why.
  bool slow() const {
    return std::chrono::steady_clock::now() - start_ >= kQuickPolls;
  }

 private:
  static constexpr std::chrono::milliseconds kQuickPolls{2};
  const std::chrono::steady_clock::time_point start_ =
      std::chrono::steady_clock::now();
  std::chrono::microseconds next_{50};
  std::chrono::microseconds cap_;
};

// A TCPStore, server or client, within `timeout`. Its constructor can block
// longer: in its connect retries, or without end in a read when something
// that is no store holds the port. So it runs
// on a thread of its own; past the timeout this rank gives up, and the
// thread, if still blocked, ends with the process.
c10::intrusive_ptr<c10d::Store> connectStore(
    const std::string& host,
    const c10d::TCPStoreOptions& options,
    std::chrono::milliseconds timeout) {
  using Result = c10::intrusive_ptr<c10d::Store>;
  auto result = std::make_shared<std::promise<Result>>();
  std::future<Result> future = result->get_future();
  std::thread([result, host, options] {
    try {
      result->set_value(c10::make_intrusive<c10d::TCPStore>(host, options));
    } catch (...) {
      result->set_exception(std::current_exception());
    }
  }).detach();
  if (future.wait_for(timeout) != std::future_status::ready) {
    throw std::runtime_error(
        "no store answered there (a program that is no rendezvous store may "
        "hold the port)");
  }
  return future.get();
}

// Adds this rank to `key` and waits until `count` ranks did. Returns false
// on timeout. `check`, if given, runs at each slow poll and may throw to
// stop waiting.
bool arriveAndWait(
    c10d::Store& store,
    const std::string& key,
    int64_t count,
    std::chrono::milliseconds timeout,
    int64_t& arrived,
    const std::function<void()>& check = nullptr) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  arrived = store.add(key, 1);
  Backoff backoff(std::chrono::milliseconds(50));
  while (arrived < count) {
    if (std::chrono::steady_clock::now() >= deadline) {
      return false;
    }
    backoff.pause();
    if (check && backoff.slow()) {
      check();
    }
    arrived = store.add(key, 0);
  }
  return true;
}

// Of `ranks` (`me` aside), the first that exited on an error
// (Communicator::noteExitOnError) as "rank 1 exited on an error: ...", or
// an empty string; one read of a counter while none did. Throws what the
// store throws.
std::string exitedAmong(
    c10d::Store& store, const std::vector<int64_t>& ranks, int64_t me) {
  if (store.add("exited", 0) == 0) {
    return {};
  }
  for (int64_t r : ranks) {
    const std::string key = "exited/" + std::to_string(r);
    if (r == me || !store.check({key})) {
      continue;
    }
    const std::vector<uint8_t> error = store.get(key);
    return detail::concat(
        "rank ",
        r,
        " exited on an error: ",
        std::string(error.begin(), error.end()));
  }
  return {};
}

} // namespace

Communicator::State& Communicator::state() {
  MDF_USER_CHECK(
      !state_->shut_down,
      "the communicator of rank ",
      rank(),
      " has been shut down");
  if (state_->store) {
    return *state_;
  }
  // Under torchrun every rank joins the agent's store; otherwise rank 0
  // hosts one.
  const bool server = rank() == 0 && !launch_.agent_store;
  const int port = launch_.agent_store ? options_.launcher_port : options_.port;
  const std::string where = options_.master_addr + ":" + std::to_string(port);
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(port);
  store_options.isServer = server;
  store_options.waitWorkers = false;
  store_options.timeout = options_.timeout;
  c10::intrusive_ptr<c10d::Store> tcp;
  try {
    tcp = connectStore(
        options_.master_addr, store_options, options_.rendezvous_timeout);
  } catch (const std::exception& e) {
    throw CommunicationError(
        detail::concat(
            "rank ",
            rank(),
            " of a world of ",
            size(),
            " could not ",
            server ? "start" : "reach",
            " the rendezvous store at ",
            where,
            " within ",
            seconds(options_.rendezvous_timeout),
            " s",
            server ? " (is the port in use? set MDFUSER_PORT or MASTER_PORT)"
                   : " (is rank 0 running? set MASTER_ADDR and MASTER_PORT "
                     "to its address)",
            ": ",
            messageOf(e)),
        /*timed_out=*/!server);
  }
  if (!launch_.agent_store) {
    checkSameJob(*tcp, server, where);
  }
  const std::string run = env("TORCHELASTIC_RESTART_COUNT").value_or("0");
  auto store = c10::make_intrusive<c10d::PrefixStore>("mdfuser/" + run, tcp);
  int64_t joined = 0;
  if (!arriveAndWait(
          *store, "joined", size(), options_.rendezvous_timeout, joined)) {
    throw CommunicationError(
        detail::concat(
            "only ",
            joined,
            " of ",
            size(),
            " ranks joined the rendezvous at ",
            where,
            " within ",
            seconds(options_.rendezvous_timeout),
            " s (this is rank ",
            rank(),
            "); start all ",
            size(),
            " ranks, e.g. mpirun -np ",
            size(),
            " or torchrun --nproc-per-node ",
            size()),
        /*timed_out=*/true);
  }
  state_->store = store;
  // Work a GPU stream waits for ends the process when a peer it waits for
  // exits on an error, not at the deadline (the watchdog's thread reads the
  // store; TCPStore serializes its clients' requests).
  Watchdog::instance().setPeerCheck(
      [store, me = rank()](const std::vector<int64_t>& ranks) {
        try {
          return exitedAmong(*store, ranks, me);
        } catch (const std::exception&) {
          return std::string();
        }
      });
  state_->hosts_store = server;
  state_->store_address = where;
  state_->store_host = launch_.agent_store ? "torchrun's agent" : "rank 0";
  return *state_;
}

void Communicator::checkSameJob(
    c10d::Store& store, bool server, const std::string& where) {
  // The store's host names its job; a rank of another job that reached
  // this port learns it at once instead of joining.
  const std::string key = "mdfuser/job";
  const std::string job = launch_.jobString();
  try {
    if (server) {
      store.set(key, std::vector<uint8_t>(job.begin(), job.end()));
      return;
    }
    const auto deadline =
        std::chrono::steady_clock::now() + options_.rendezvous_timeout;
    Backoff backoff(std::chrono::milliseconds(50));
    while (!store.check({key})) {
      if (std::chrono::steady_clock::now() >= deadline) {
        // Not an mdfuser store: the rendezvous wait reports it.
        return;
      }
      backoff.pause();
    }
    const std::vector<uint8_t> theirs = store.get(key);
    const std::string served(theirs.begin(), theirs.end());
    if (served != job) {
      throw CommunicationError(
          detail::concat(
              "rank ",
              rank(),
              " (",
              job,
              ") reached the rendezvous store at ",
              where,
              ", but it serves another job (",
              served,
              "): another job is running on this port. Give this job a "
              "free port with MDFUSER_PORT (or MASTER_PORT)"),
          /*timed_out=*/false);
    }
  } catch (const CommunicationError&) {
    throw;
  } catch (const std::exception& e) {
    throw CommunicationError(
        detail::concat(
            "rank ",
            rank(),
            " lost the rendezvous store at ",
            where,
            " while joining: ",
            messageOf(e)),
        /*timed_out=*/false);
  }
}

CommunicationError Communicator::lostStore(
    const std::string& operation, const std::exception& e) {
  peer_failed_ = true;
  return CommunicationError(
      detail::concat(
          "rank ",
          rank(),
          " lost the rendezvous store at ",
          state_->store_address,
          " (served by ",
          state_->store_host,
          ") in ",
          operation,
          "; ",
          state_->store_host,
          " has probably exited, see its error: ",
          messageOf(e)),
      /*timed_out=*/false);
}

bool Communicator::postForPeers(
    const std::string& kind, const std::string& error) {
  if (size() == 1 || !state_->store || state_->shut_down) {
    return false;
  }
  try {
    state_->store->set(
        kind + "/" + std::to_string(rank()),
        std::vector<uint8_t>(error.begin(), error.end()));
    return true;
  } catch (const std::exception&) {
    // The store is gone: the peers learn of this rank by its absence.
    return false;
  }
}

void Communicator::reportFailedRun(const std::string& error) {
  if (postForPeers("failed_run", error)) {
    failure_reported_ = true;
  }
}

void Communicator::noteExitOnError(const std::string& error) {
  reportFailedRun(error);
  peer_failed_ = true;
  if (!postForPeers("exited", error)) {
    return;
  }
  try {
    state_->store->add("exited", 1);
  } catch (const std::exception&) {
    // The store went away after the post: the peers' waits end with it.
  }
}

void Communicator::throwIfExited(
    const std::vector<int64_t>& ranks, const std::string& operation) {
  const std::string gone = exitedAmong(*state_->store, ranks, rank());
  if (gone.empty()) {
    return;
  }
  peer_failed_ = true;
  throw CommunicationError(
      detail::concat(
          "rank ", rank(), " stopped waiting in ", operation, ": ", gone),
      /*timed_out=*/false);
}

void Communicator::clearFailedRun() {
  if (!failure_reported_ || !state_->store || state_->shut_down) {
    return;
  }
  failure_reported_ = false;
  try {
    state_->store->deleteKey("failed_run/" + std::to_string(rank()));
  } catch (const std::exception&) {
  }
}

std::string Communicator::failedRunsOf(const std::vector<int64_t>& ranks) {
  std::string reports;
  if (!state_->store || state_->shut_down) {
    return reports;
  }
  try {
    for (int64_t r : ranks) {
      const std::string key = "failed_run/" + std::to_string(r);
      if (r == rank() || !state_->store->check({key})) {
        continue;
      }
      const std::vector<uint8_t> bytes = state_->store->get(key);
      reports += detail::concat(
          "; rank ",
          r,
          " reported a failed run: ",
          std::string(bytes.begin(), bytes.end()));
    }
  } catch (const std::exception&) {
    // The store is gone: nothing more to say.
  }
  return reports;
}

CommunicationError Communicator::peersAbsent(
    const std::string& operation, const std::string& absent) {
  peer_failed_ = true;
  return CommunicationError(
      detail::concat(
          "rank ",
          rank(),
          " waited ",
          seconds(options_.timeout),
          " s in ",
          operation,
          ", but ",
          absent),
      /*timed_out=*/true);
}

c10d::Backend& Communicator::backend(
    const std::vector<int64_t>& team, hir::CommunicatorBackend kind) {
  auto me = std::find(team.begin(), team.end(), rank());
  MDF_CHECK(
      me != team.end(),
      "rank ",
      rank(),
      " is not in the team ",
      hir::teamString(team));
  const std::string key =
      std::string(hir::backendName(kind)) + hir::teamString(team);
  State& s = state();
  for (const State::Entry& entry : s.backends) {
    if (entry.key == key) {
      return *entry.backend;
    }
  }

  auto store = c10::make_intrusive<c10d::PrefixStore>(key, s.store);
  const int team_rank = static_cast<int>(me - team.begin());
  const int team_size = static_cast<int>(team.size());
  c10::intrusive_ptr<c10d::Backend> backend;
  try {
    switch (kind) {
      case hir::CommunicatorBackend::kGloo: {
#ifdef USE_C10D_GLOO
        auto gloo_options =
            c10d::ProcessGroupGloo::Options::create(options_.timeout);
        const std::string& addr = options_.master_addr;
        if (std::optional<std::string> ifname = env("GLOO_SOCKET_IFNAME")) {
          gloo_options->devices.push_back(
              c10d::ProcessGroupGloo::createDeviceForInterface(*ifname));
        } else if (addr == "localhost" || addr == "127.0.0.1") {
          gloo_options->devices.push_back(
              c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
        } else {
          gloo_options->devices.push_back(
              c10d::ProcessGroupGloo::createDefaultDevice());
        }
        backend = c10::make_intrusive<c10d::ProcessGroupGloo>(
            store, team_rank, team_size, gloo_options);
#else
        MDF_USER_ERROR("this PyTorch build has no Gloo backend");
#endif
        break;
      }
      case hir::CommunicatorBackend::kNccl: {
#ifdef USE_C10D_NCCL
        auto nccl_options = c10d::ProcessGroupNCCL::Options::create(
            options_.nccl_high_priority);
        // mdfuser's watchdog reports a collective that does not finish
        // within the timeout, naming the rank, the operation and the team
        // (runtime/watchdog.h); c10d's, whose message names neither, waits
        // longer.
        nccl_options->timeout = options_.timeout + std::chrono::seconds(10);
        nccl_options->group_name = key;
        nccl_options->group_desc =
            detail::concat("mdfuser team ", hir::teamString(team));
        backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(
            store, team_rank, team_size, nccl_options);
#else
        MDF_USER_ERROR("this PyTorch build has no NCCL backend");
#endif
        break;
      }
      case hir::CommunicatorBackend::kCuda:
        MDF_UNREACHABLE(
            "the CUDA backend is no c10d backend: the evaluator posts its "
            "moves through runtime/cuda_backend.h");
    }
  } catch (const UserError&) {
    throw;
  } catch (const std::exception& e) {
    peer_failed_ = true;
    throw CommunicationError(
        detail::concat(
            "rank ",
            rank(),
            " could not create the ",
            hir::backendName(kind),
            " backend for team ",
            hir::teamString(team),
            " within ",
            seconds(options_.timeout),
            " s: ",
            messageOf(e)),
        /*timed_out=*/false);
  }
  s.backends.push_back({key, backend});
  return *backend;
}

void Communicator::join() {
  if (size() > 1) {
    state();
  }
}

void Communicator::barrier() {
  if (size() == 1) {
    return;
  }
  State& s = state();
  const int64_t n = s.barriers++;
  const std::string operation = detail::concat("barrier ", n);
  int64_t arrived = 0;
  bool everyone = false;
  try {
    everyone = arriveAndWait(
        *s.store,
        "barrier/" + std::to_string(n),
        size(),
        options_.timeout,
        arrived,
        [&] { throwIfExited(world(), operation); });
  } catch (const CommunicationError&) {
    throw;
  } catch (const std::exception& e) {
    throw lostStore(operation, e);
  }
  if (!everyone) {
    throw peersAbsent(
        operation,
        detail::concat("only ", arrived, " of ", size(), " ranks arrived"));
  }
}

std::vector<int64_t> Communicator::world() const {
  std::vector<int64_t> ranks(size());
  std::iota(ranks.begin(), ranks.end(), 0);
  return ranks;
}

c10::intrusive_ptr<c10d::Store> Communicator::store() {
  return state().store;
}

std::vector<std::string> Communicator::exchange(
    const std::vector<int64_t>& team,
    const std::string& value,
    const std::string& operation,
    bool post_only) {
  MDF_CHECK(
      std::find(team.begin(), team.end(), rank()) != team.end(),
      "rank ",
      rank(),
      " is not in the team ",
      hir::teamString(team));
  State& s = state();
  const std::string team_name = hir::teamString(team);
  const int64_t number = s.exchanges[team_name]++;
  auto prefixOf = [&](int64_t n) {
    return detail::concat("exchange", team_name, "/", n, "/");
  };
  const std::string prefix = prefixOf(number);
  std::vector<std::string> keys;
  for (int64_t r : team) {
    keys.push_back(prefix + std::to_string(r));
  }
  // The exchange as errors name it.
  const std::string what = detail::concat(operation, " with team ", team_name);
  auto lost_store = [&](const std::exception& e) { return lostStore(what, e); };
  try {
    s.store->set(
        prefix + std::to_string(rank()),
        std::vector<uint8_t>(value.begin(), value.end()));
  } catch (const std::exception& e) {
    throw lost_store(e);
  }
  if (post_only) {
    return {};
  }
  // Polled rather than waited for in the store, which logs its own
  // timeouts.
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  Backoff backoff(std::chrono::milliseconds(20));
  bool complete = false;
  try {
    while (!(complete = s.store->check(keys)) &&
           std::chrono::steady_clock::now() < deadline) {
      backoff.pause();
      if (backoff.slow()) {
        throwIfExited(team, what);
      }
    }
  } catch (const CommunicationError&) {
    throw;
  } catch (const std::exception& e) {
    throw lost_store(e);
  }
  if (!complete) {
    std::vector<int64_t> missing;
    try {
      for (size_t i = 0; i < team.size(); ++i) {
        if (!s.store->check({keys[i]})) {
          missing.push_back(team[i]);
        }
      }
    } catch (const std::exception& e) {
      throw lost_store(e);
    }
    throw peersAbsent(
        what,
        ranksString(missing) + " did not take part" + failedRunsOf(missing));
  }
  std::vector<std::string> values;
  try {
    for (const std::vector<uint8_t>& bytes : s.store->multiGet(keys)) {
      values.emplace_back(bytes.begin(), bytes.end());
    }
    // Every member posted this exchange, so every member has read the
    // previous one: this rank's value there is no longer needed. Without
    // this, a workload that alternates signatures would grow the store by a
    // key per rank at every run.
    if (number > 0) {
      s.store->deleteKey(prefixOf(number - 1) + std::to_string(rank()));
    }
  } catch (const std::exception& e) {
    throw lost_store(e);
  }
  return values;
}

void Communicator::shutdown() {
  if (state_->shut_down) {
    return;
  }
  state_->shut_down = true;
  Watchdog::instance().setPeerCheck(nullptr);
  bool everyone_arrived = true;
  if (state_->store && peer_failed_) {
    // A peer may be gone: waiting for it would only add a timeout. The
    // others are told this rank is done, and the backends are aborted.
    everyone_arrived = false;
    try {
      state_->store->add("shutdown", 1);
    } catch (const std::exception&) {
      // The store is gone too.
    }
  } else if (state_->store) {
    try {
      int64_t arrived = 0;
      everyone_arrived = arriveAndWait(
          *state_->store, "shutdown", size(), options_.timeout, arrived);
    } catch (const std::exception&) {
      everyone_arrived = false;
    }
  }
  // Every rank created its backends in the same order; tear them down in
  // that order. A rank that never arrived may hold a collective open, so
  // backends are aborted rather than shut down gracefully then.
  for (State::Entry& entry : state_->backends) {
    try {
      if (everyone_arrived) {
        entry.backend->shutdown();
      } else {
        entry.backend->abort();
      }
    } catch (const std::exception&) {
      // Best effort: the process is going away.
    }
  }
  state_->backends.clear();
  if (state_->store && everyone_arrived) {
    // Clients say they are done with the store; its host waits for them,
    // so that no client's last request meets a closed socket.
    try {
      if (state_->hosts_store) {
        int64_t released = 0;
        arriveAndWait(
            *state_->store, "released", size(), options_.timeout, released);
      } else {
        state_->store->add("released", 1);
      }
    } catch (const std::exception&) {
      // A peer is gone; nothing is left to protect.
    }
  }
  state_->store.reset();
}

} // namespace mdfuser
