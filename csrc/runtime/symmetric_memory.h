// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace mdfuser {

class Communicator;

// Buffers in torch's symmetric memory (its CUDA allocator, no multicast)
// that every member of a team maps, so that copy engines can write into a
// peer's copy. Getting a buffer the first time is collective: each member
// of the team allocates it at the same point of the same program and the
// members exchange their handles through the rendezvous store. The pool
// keeps every buffer under the key its caller gives (an Allocate and its
// loop iteration), so that later runs of a program find the same buffers,
// at the same addresses on every member, and allocate nothing. A pool
// belongs to the communication epoch it was made in.
class SymmetricBuffers {
 public:
  SymmetricBuffers(Communicator& communicator, c10::Device device);
  SymmetricBuffers(const SymmetricBuffers&) = delete;
  SymmetricBuffers& operator=(const SymmetricBuffers&) = delete;
  ~SymmetricBuffers();

  // The buffer of `key`, shared with `team` (ranks in team order, this one
  // among them): row-major of `sizes`, uninitialized the first time, or
  // with `zeroed`, zero before any peer can write into it.
  at::Tensor get(
      const std::string& key,
      const std::vector<int64_t>& team,
      at::IntArrayRef sizes,
      at::ScalarType dtype,
      bool zeroed = false);

  // The communication epoch the pool belongs to.
  int64_t epoch() const {
    return epoch_;
  }

  // Where, in this process's address space, team member `peer` holds what
  // `local` (a view into one of this pool's buffers) holds here.
  void* peerAddress(const at::Tensor& local, int64_t peer) const;

 private:
  struct Entry;
  Communicator& communicator_;
  c10::Device device_;
  // The communication epoch the buffers belong to: the communicator's when
  // the pool was made.
  int64_t epoch_;
  std::unordered_map<std::string, std::unique_ptr<Entry>> entries_;
  // Each entry under the address of this member's copy, to find the buffer
  // a view lies in.
  std::map<const char*, const Entry*> by_address_;
};

// The name under which torch's symmetric memory knows `team`, registered
// with a store of its own under mdfuser's rendezvous store on first use.
std::string symmetricGroup(
    Communicator& communicator, const std::vector<int64_t>& team);

} // namespace mdfuser
