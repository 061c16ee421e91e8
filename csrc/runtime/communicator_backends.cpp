// SPDX-License-Identifier: MIT
//
// The Communicator's c10d backends: one per (team, kind) and epoch, Gloo's
// or NCCL's, created on first use over the rendezvous store.
#include <algorithm>
#include <optional>
#include <string>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#ifdef USE_C10D_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "ir/errors.h"
#include "runtime/communicator.h"
#include "runtime/communicator_state.h"
#include "runtime/rendezvous.h"

namespace mdfuser {

c10d::Backend& Communicator::backend(
    const std::vector<int64_t>& team, hir::CommunicatorBackend kind) {
  auto me = std::find(team.begin(), team.end(), rank());
  MDF_CHECK(
      me != team.end(),
      "rank ",
      rank(),
      " is not in the team ",
      hir::teamString(team));
  // Each epoch has backends of its own (and store keys of its own to make
  // them with): work a failed run left in an earlier epoch's never meets
  // this one's.
  const std::string key = detail::concat(
      hir::backendName(kind),
      hir::teamString(team),
      epoch_ == 0 ? "" : "#" + std::to_string(epoch_));
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
  s.backends.push_back({key, backend, kind, epoch_});
  return *backend;
}

} // namespace mdfuser
