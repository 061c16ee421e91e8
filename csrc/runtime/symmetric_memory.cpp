// SPDX-License-Identifier: MIT
#include "runtime/symmetric_memory.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>

#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/symm_mem/SymmetricMemory.hpp>

#include "ir/errors.h"
#include "runtime/communicator.h"
#include "runtime/team_store.h"

#ifdef MDFUSER_HAS_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include "runtime/cuda_util.h"
#endif

namespace mdfuser {

namespace sm = c10d::symmetric_memory;

namespace {

int64_t teamIndex(const std::vector<int64_t>& team, int64_t rank) {
  auto it = std::find(team.begin(), team.end(), rank);
  MDF_CHECK(
      it != team.end(),
      "rank ",
      rank,
      " is not in the team ",
      hir::teamString(team));
  return it - team.begin();
}

#ifdef MDFUSER_HAS_CUDA
// The stream torch's symmetric memory is set up on, one per device for the
// process, never destroyed. torch writes every member's address into
// device memory it takes from the caching allocator for the current
// stream, with copies that do not wait for any stream (`cudaMemcpy` on the
// legacy stream, which the program's non-blocking streams do not order
// against). On a stream of the program, those bytes could be ones the
// program freed a moment before and its pending kernels still read: the
// first run of a transformer layer over four ranks had a token's values
// overwritten by addresses that way. Nothing else allocates on this
// stream, so what torch gets for it no pending kernel uses.
c10::cuda::CUDAStream setupStream(c10::DeviceIndex device) {
  static std::mutex mutex;
  static std::map<c10::DeviceIndex, cudaStream_t> streams;
  std::lock_guard<std::mutex> lock(mutex);
  cudaStream_t& stream = streams[device];
  if (stream == nullptr) {
    c10::cuda::CUDAGuard guard(device);
    MDF_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  return c10::cuda::getStreamFromExternal(stream, device);
}
#endif

} // namespace

struct SymmetricBuffers::Entry {
  std::string key;
  std::vector<int64_t> team;
  at::Tensor tensor;
  c10::intrusive_ptr<sm::SymmetricMemory> handle;
  // Every member's copy, in this process's address space, in team order.
  std::vector<void*> bases;
  size_t bytes = 0;
  int64_t me = 0;
};

std::string symmetricGroup(
    Communicator& communicator, const std::vector<int64_t>& team) {
  static std::mutex mutex;
  // The registry holds groups weakly: these keep them.
  static std::map<std::string, c10::intrusive_ptr<c10d::ProcessGroup>> groups;
  // One group per team, whatever the communication epoch: a pool of a new
  // epoch makes buffers of its own in it, which never meet the old ones,
  // and its store numbers the exchanges of each epoch from zero.
  const std::string name = "mdfuser" + hir::teamString(team);
  std::lock_guard<std::mutex> lock(mutex);
  if (groups.count(name) == 0) {
    const int rank = static_cast<int>(teamIndex(team, communicator.rank()));
    const int size = static_cast<int>(team.size());
    Communicator* const comm = &communicator;
    auto store = c10::make_intrusive<TeamStore>(
        c10::make_intrusive<c10d::PrefixStore>(
            "symmetric" + hir::teamString(team), communicator.store()),
        [comm] { return comm->epoch(); },
        [comm, team] {
          comm->throwIfPeerFailed(team, "setting up symmetric buffers");
        });
    sm::set_group_info(name, rank, size, store);
    // torch's rendezvous also looks the group up among the process groups;
    // one without backends is enough: nothing runs collectives on it.
    auto group = c10::make_intrusive<c10d::ProcessGroup>(store, rank, size);
    group->setGroupName(name);
    c10d::register_process_group(name, group);
    groups.emplace(name, group);
  }
  return name;
}

SymmetricBuffers::SymmetricBuffers(
    Communicator& communicator, c10::Device device)
    : communicator_(communicator),
      device_(device),
      epoch_(communicator.epoch()) {
  MDF_CHECK(device.is_cuda(), "symmetric buffers live on CUDA devices");
  // mdfuser's copies need no multicast objects, and the machines it runs on
  // may not allow them: unless the user decided otherwise, torch creates
  // none.
  setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1", /*overwrite=*/0);
  if (communicator.options().share_devices) {
    // Several ranks of a team on one GPU.
    setenv("TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES", "1", /*overwrite=*/0);
  }
}

SymmetricBuffers::~SymmetricBuffers() = default;

at::Tensor SymmetricBuffers::get(
    const std::string& key,
    const std::vector<int64_t>& team,
    at::IntArrayRef sizes,
    at::ScalarType dtype,
    bool zeroed) {
  if (auto it = entries_.find(key); it != entries_.end()) {
    const Entry& entry = *it->second;
    MDF_CHECK(
        entry.team == team && entry.tensor.sizes() == sizes &&
            entry.tensor.scalar_type() == dtype,
        "the symmetric buffer ",
        key,
        " was ",
        entry.tensor.sizes(),
        " ",
        entry.tensor.scalar_type(),
        " shared with ",
        hir::teamString(entry.team),
        ", now asked for as ",
        sizes,
        " ",
        dtype,
        " shared with ",
        hir::teamString(team));
    return entry.tensor;
  }
  auto entry = std::make_unique<Entry>();
  entry->key = key;
  entry->team = team;
  entry->me = teamIndex(team, communicator_.rank());
  // torch allocates no bytes for an empty tensor; one element keeps every
  // buffer addressable, and the copies into an empty one move nothing.
  std::vector<int64_t> stored(sizes.begin(), sizes.end());
  const bool empty = std::any_of(
      stored.begin(), stored.end(), [](int64_t s) { return s == 0; });
  const std::vector<int64_t> allocated =
      empty ? std::vector<int64_t>{1} : stored;
  std::vector<int64_t> strides(allocated.size(), 1);
  for (int64_t i = static_cast<int64_t>(allocated.size()) - 2; i >= 0; --i) {
    strides[i] = strides[i + 1] * allocated[i + 1];
  }
  try {
    const std::string group = symmetricGroup(communicator_, team);
#ifdef MDFUSER_HAS_CUDA
    const c10::cuda::CUDAStream setup = setupStream(device_.index());
    const c10::cuda::CUDAStreamGuard on_setup_stream(setup);
#endif
    at::Tensor storage = sm::empty_strided_p2p(
        allocated, strides, dtype, device_, group, std::nullopt);
    if (zeroed) {
      // Peers may write into it as soon as the rendezvous below ends here.
      storage.zero_();
#ifdef MDFUSER_HAS_CUDA
      setup.synchronize();
#endif
    }
    entry->handle = sm::rendezvous(storage, group);
#ifdef MDFUSER_HAS_CUDA
    // Whatever torch enqueued there is done before the program uses the
    // buffer.
    setup.synchronize();
#endif
    entry->tensor = empty ? storage.narrow(0, 0, 0).view(stored) : storage;
  } catch (const std::exception& e) {
    communicator_.notePeerFailure();
    throw CommunicationError(
        detail::concat(
            "rank ",
            communicator_.rank(),
            " could not set up the symmetric buffer ",
            key,
            " with team ",
            hir::teamString(team),
            ": ",
            e.what()),
        /*timed_out=*/false);
  }
  entry->bases = entry->handle->get_buffer_ptrs();
  entry->bytes = entry->handle->get_buffer_size();
  MDF_CHECK_EQ(entry->bases.size(), team.size());
  const bool distinct =
      by_address_
          .emplace(
              static_cast<const char*>(entry->bases[entry->me]), entry.get())
          .second;
  MDF_CHECK(distinct, "two symmetric buffers start at one address");
  return entries_.emplace(key, std::move(entry)).first->second->tensor;
}

void* SymmetricBuffers::peerAddress(
    const at::Tensor& local, int64_t peer) const {
  const auto* begin = static_cast<const char*>(local.data_ptr());
  const size_t span = local.numel() == 0 ? 0 : local.nbytes();
  // The buffer starting at or before `begin` nearest to it.
  auto it = by_address_.upper_bound(begin);
  if (it != by_address_.begin()) {
    const Entry& entry = *std::prev(it)->second;
    const auto* base = static_cast<const char*>(entry.bases[entry.me]);
    if (begin + span <= base + entry.bytes) {
      MDF_CHECK(
          peer >= 0 && peer < static_cast<int64_t>(entry.bases.size()),
          "team member ",
          peer,
          " of ",
          entry.bases.size());
      return static_cast<char*>(entry.bases[peer]) + (begin - base);
    }
  }
  MDF_UNREACHABLE(
      "a tensor of shape ",
      local.sizes(),
      " at ",
      local.data_ptr(),
      " lies in no symmetric buffer");
}

} // namespace mdfuser
