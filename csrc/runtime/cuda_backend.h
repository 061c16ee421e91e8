// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "runtime/collectives.h"
#include "runtime/symmetric_memory.h"

namespace mdfuser {

class Communicator;

// The CUDA communication backend (CommunicatorBackend::kCuda): moves data
// between the members of a team with copy engines, from a local buffer
// into a peer's symmetric buffer, and orders the moves between ranks with
// stream memory operations (a 32-bit write and a wait, batched by the
// driver's cuStreamBatchMemOp) on counters in symmetric memory. It takes no SMs
// from the computation beside it, and the host never waits for a peer.
//
// A CollectivePermute on a stream goes, for the n-th permute of that
// stream ("channel") in the team:
//
//   ready[previous] = n, wait ready[next] >= n
//                           this member's receive buffer may be written;
//                           then the next member's may
//   copy in -> next's buffer
//   done[next] = n, wait done[previous] >= n
//                           after the copy (the write is fenced); then the
//                           previous member's data has arrived
//
// Each line with two memory operations is one cuStreamBatchMemOp call.
//
// Every member posts the same permutes on the same channels in the same
// order (the program is the same), so the counts agree. A wait that does
// not end within the communicator's timeout is reported by a watchdog
// thread, naming the rank, the peer and the operation, and ends the
// process (the stream cannot be unblocked), as NCCL's watchdog does.
class CudaBackend {
 public:
  CudaBackend(Communicator& communicator, c10::Device device);
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;
  ~CudaBackend();

  SymmetricBuffers& buffers() {
    return buffers_;
  }

  // Posts, on the current stream, numbered `channel` on every member, a
  // CollectivePermute over `team`: `in` goes into the next member's
  // symmetric buffer at the place `landing` (a view of this member's
  // symmetric buffer) has here, and the previous member's arrives in
  // `out`. `what` names the operation in errors. wait() on the result
  // makes the then current stream wait.
  PendingCollective permute(
      const std::vector<int64_t>& team,
      const at::Tensor& in,
      const at::Tensor& out,
      const at::Tensor& landing,
      int64_t channel,
      const std::string& what);

  // Channels a team offers: at most this many streams post permutes.
  static constexpr int64_t kChannels = 256;

 private:
  struct Team;
  Team& team(const std::vector<int64_t>& members);

  Communicator& communicator_;
  c10::Device device_;
  SymmetricBuffers buffers_;
  std::map<std::vector<int64_t>, std::unique_ptr<Team>> teams_;
};

// Whether this build of mdfuser can run the CUDA backend.
bool cudaBackendAvailable();

} // namespace mdfuser
