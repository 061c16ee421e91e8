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

// The CUDA graph handles (cudaGraph_t, cudaGraphExec_t), without CUDA's
// headers.
struct CUgraph_st;
struct CUgraphExec_st;

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

  // CUDA graphs of a program (runtime/cuda_graphs.h). Between
  // beginCapture() and endCapture() the permutes posted are captured, not
  // run: they set up nothing and are not watched (the replay is), and the
  // counts they post are given back at the end. A graph replays the counts
  // of its capture unless told otherwise, whereas each replay's moves must
  // count on from the permutes posted before it, on every member alike:
  // prepareReplay() sets the values its memory operations write and wait
  // for, from this member's counts, and counts its permutes as posted.
  struct Capture;
  void beginCapture();
  // What replays of `graph`, captured since beginCapture(), need; null
  // when it holds no permute.
  std::shared_ptr<const Capture> endCapture(CUgraph_st* graph);
  // Ends a capture that failed.
  void abortCapture();
  void prepareReplay(const Capture& capture, CUgraphExec_st* exec);

 private:
  struct Team;
  struct Capturing;
  Team& team(const std::vector<int64_t>& members);

  Communicator& communicator_;
  c10::Device device_;
  SymmetricBuffers buffers_;
  std::map<std::vector<int64_t>, std::unique_ptr<Team>> teams_;
  // Set between beginCapture() and endCapture().
  std::unique_ptr<Capturing> capturing_;
};

// Whether this build of mdfuser can run the CUDA backend.
bool cudaBackendAvailable();

} // namespace mdfuser
