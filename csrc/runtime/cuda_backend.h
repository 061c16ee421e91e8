// SPDX-License-Identifier: MIT
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "runtime/collectives.h"
#include "runtime/symmetric_memory.h"

struct CUevent_st;
struct CUstream_st;

namespace mdfuser {

class Communicator;

// The CUDA communication backend (CommunicatorBackend::kCuda): moves data
// between the members of a team with copy engines, from a local buffer
// into a peer's symmetric buffer, and orders the moves between ranks with
// stream memory operations (32-bit writes and waits, batched by the
// driver's cuStreamBatchMemOp) on flags in symmetric memory. It takes no
// SMs from the computation beside it, and the host never waits for a peer.
//
// A CollectivePermute on a stream ("channel") goes:
//
//   ready[previous] = 1, wait ready[next] >= 1, ready[next] = 0
//                           this member's receive buffer may be written;
//                           then the next member's may
//   copy in -> next's buffer
//   done[next] = 1, wait done[previous] >= 1, done[previous] = 0
//                           after the copy (the writes are fenced); then
//                           the previous member's data has arrived
//
// Each line is one cuStreamBatchMemOp call. A member clears each flag it
// waited for before it raises the next flag of that channel, and a peer
// raises that flag again only after it saw that next flag: so a flag is
// never raised twice before it is cleared. The flags thus come back to 0
// after every permute, and the memory operations are the same at every
// run: a CUDA graph that captured them replays them as they are.
//
// Every member posts the same permutes on the same channels in the same
// order (the program is the same). A wait that does not end within the
// communicator's timeout is reported by a watchdog thread, naming the rank,
// the peer and the operation, and ends the process (the stream cannot be
// unblocked), as NCCL's watchdog does.
class FusedStatements;

class CudaBackend {
 public:
  CudaBackend(Communicator& communicator, c10::Device device);
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;
  ~CudaBackend();

  SymmetricBuffers& buffers() {
    return buffers_;
  }
  // This process's rank, and how long a wait on a peer may last.
  int64_t rank() const;
  std::chrono::milliseconds timeout() const;

  // Posts, on the current stream, numbered `channel` on every member, a
  // CollectivePermute over `team`: `in` goes into the symmetric buffer of
  // the member `shift` places on (the next for 1), at the place `landing` (a
  // view of this member's symmetric buffer) has here, and the member's
  // `shift` places back arrives in `out`. `what` names the operation in errors
  // (built once by the caller: permutes are posted at every ring step). wait()
  // on the result makes the then current stream wait. `before_copy`, where
  // given, is called between the handshake and the copy to enqueue on the
  // current stream what the copy waits for besides the peer (the data's
  // producer): the receive is posted without waiting for it.
  PendingCollective permute(
      const std::vector<int64_t>& team,
      int64_t shift,
      const at::Tensor& in,
      const at::Tensor& out,
      const at::Tensor& landing,
      int64_t channel,
      std::shared_ptr<const std::string> what,
      uint64_t run,
      const std::function<void()>& before_copy = {});

  // Channels a team offers: at most this many streams post permutes (256
  // for each lane of communication streams, Interpreter::channelOf).
  static constexpr int64_t kChannels = 1024;

  // The moves of a fused allgather + linear (runtime/fused_matmul.h),
  // posted on `stream` over `team` on `channel`: for j = 1 .. d - 1, once
  // the member j places on has freed the place (its previous kernel read
  // it), `rows` go into that member's copy of `place` (a view of a
  // symmetric buffer of `rows`' sizes), then this member's arrival flag
  // rises there. Returns this member's arrival flags of `channel`, one
  // uint32 per member in team order, and an event after the moves. A
  // kernel waits on the flags, and clearArrivals clears them.
  struct RowPushes {
    const uint32_t* arrived = nullptr;
    std::shared_ptr<CUevent_st> done;
  };
  RowPushes pushRows(
      const std::vector<int64_t>& team,
      const at::Tensor& rows,
      const at::Tensor& place,
      int64_t channel,
      CUstream_st* stream,
      std::shared_ptr<const std::string> what,
      uint64_t run);
  // Clears this member's arrival flags of `channel` on `stream`, after the
  // kernel that waited on them (the next pushRows, ordered after it, tells
  // the peers that their places are free).
  void clearArrivals(
      const std::vector<int64_t>& team, int64_t channel, CUstream_st* stream);

  // Has the watchdog bound the work just posted on `stream`, a kernel that
  // waits in the kernel for the peers of `members` (a fused statement's):
  // past the communicator's timeout, or once a peer has exited, it ends
  // the process with a report naming this rank, `what` and `waited` ("waited
  // for ...").
  void watchKernel(
      const std::vector<int64_t>& members,
      CUstream_st* stream,
      std::shared_ptr<const std::string> what,
      std::string waited,
      uint64_t run);

  // Lets the moves of this backend's teams run to their end without their
  // peers, when a rank's failure ended their epoch
  // (Watchdog::Entry::release): raises every flag of its teams on this rank
  // and on each peer that knows the epoch ended (Communicator::knowsEndOf:
  // its next run raises the failure), on a stream of its own, so that each
  // wait passes (the copies after it then write into the buffers of that
  // epoch, which no later run uses). A rank whose own CUDA calls are held
  // up (its host thread in a copy to pageable memory, which waits on the
  // released stream, holds up the memset on another thread too) is
  // released by its peers: every member runs this once the epoch is
  // abandoned there, the failed rank at once (Watchdog::onAbandon). Safe
  // to call after the backend is gone (it does nothing then).
  std::function<bool()> releaser() const;

  // What the fused matmul statements run through this backend keep
  // between runs (runtime/fused_statements.h): created by their first run,
  // destroyed with the backend, before its symmetric buffers.
  std::shared_ptr<FusedStatements>& fusedStatements() {
    return fused_statements_;
  }

 private:
  struct Team;
  struct Release;
  Team& team(const std::vector<int64_t>& members);
  // Has the watchdog watch moves posted on a stream until `done`, which
  // wait for `peers` (`describe` says what they waited for).
  void watch(
      std::shared_ptr<CUevent_st> done,
      std::function<std::string()> describe,
      std::vector<int64_t> peers,
      uint64_t run);
  static void checkChannel(int64_t channel, const std::string& what);

  Communicator& communicator_;
  c10::Device device_;
  SymmetricBuffers buffers_;
  std::map<std::vector<int64_t>, std::unique_ptr<Team>> teams_;
  std::shared_ptr<Release> release_;
  std::shared_ptr<FusedStatements> fused_statements_;
};

// Whether this build of mdfuser can run the CUDA backend.
bool cudaBackendAvailable();

// Whether the CUDA backend can carry the communications of this job on
// `device` (this rank's GPU): a build with it, every rank of the job on this
// host, and this GPU able to map the memory of every GPU the other ranks
// use (peer access over NVLink or PCIe; a GPU that ranks share maps its own
// memory). The answer is the same on every rank of a host whose GPUs all
// reach each other, which makes it a default the ranks agree on.
bool cudaBackendReachesPeers(
    const Communicator& communicator, c10::Device device);

// Whether another process of this host uses `device` too
// (MDFUSER_SHARE_DEVICES=1 with more processes than GPUs). NCCL refuses
// two ranks on one GPU; the CUDA backend and Gloo do not mind. The same
// answer on every rank of the host.
bool processesShareGpus(const Communicator& communicator, c10::Device device);

} // namespace mdfuser
