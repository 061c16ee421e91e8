// SPDX-License-Identifier: MIT
#pragma once

// What the CUDA backend's files share (runtime/cuda_backend.cpp: teams and
// permutes; runtime/row_pushes.cpp: the moves of the fused matmul kernels):
// the driver's stream memory operations, the copies to a peer, and a
// team's flags. Only in builds with CUDA.

#ifdef MDFUSER_HAS_CUDA

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "runtime/cuda_backend.h"
#include "runtime/cuda_util.h"

namespace mdfuser {
namespace cuda_backend_detail {

// cuStreamBatchMemOp, from the driver the runtime loaded.
using BatchMemOp =
    CUresult (*)(CUstream, unsigned int, CUstreamBatchMemOpParams*, unsigned);
BatchMemOp batchMemOp();

// Raises an internal error naming `what` unless `result` is a success.
void check(CUresult result, const char* what);

CUdeviceptr address(void* p);

// Enqueues on `stream`, in one driver call: raise `signal` (a peer's flag,
// to 1), wait until `wait` (this member's) is raised, and clear it. A write
// with default flags is fenced: it is ordered after the work before it on
// the stream, copies and the previous clear included.
void raiseWaitAndClear(
    cudaStream_t stream, CUdeviceptr signal, CUdeviceptr wait);

// Copies `in` to `to`, the address in a peer's memory of `landing` (a
// view of the same sizes), on `stream`: one copy-engine copy when both are
// laid out alike and contiguously, one 2-D copy per part of rows otherwise
// (a ring's chunk cut from a middle axis is one).
void copyToPeer(
    const at::Tensor& in,
    const at::Tensor& landing,
    void* to,
    cudaStream_t stream);

} // namespace cuda_backend_detail

// The flags of one team: for each kind, channel and member that raises it,
// one uint32 on every member. A permute's: ready, done; a fused
// matmul's: the place of the raiser's rows is free, they arrived.
struct CudaBackend::Team {
  enum Kind { kReady = 0, kDone = 1, kRowsFree = 2, kRowsArrived = 3 };
  static constexpr int64_t kKinds = 4;

  std::vector<int64_t> members;
  int64_t me = 0;
  at::Tensor flags;
  // For the events of its permutes.
  EventPool events;
  // Every member's flags, in this process's address space.
  std::vector<char*> bases;

  int64_t size() const {
    return static_cast<int64_t>(members.size());
  }
  // The other members' ranks.
  std::vector<int64_t> peers() const {
    std::vector<int64_t> ranks;
    for (int64_t m = 0; m < size(); ++m) {
      if (m != me) {
        ranks.push_back(members[m]);
      }
    }
    return ranks;
  }
  // This member's arrival flags of `channel`, one per peer.
  std::vector<CUdeviceptr> arrivals(int64_t channel) const {
    std::vector<CUdeviceptr> flags;
    for (int64_t m = 0; m < size(); ++m) {
      if (m != me) {
        flags.push_back(slot(me, kRowsArrived, channel, m));
      }
    }
    return flags;
  }
  // The flag `kind` of `channel` that `writer` raises, on `holder`.
  CUdeviceptr slot(
      int64_t holder, Kind kind, int64_t channel, int64_t writer) const {
    const int64_t index = (kind * kChannels + channel) * size() + writer;
    return cuda_backend_detail::address(
        bases[holder] + index * sizeof(uint32_t));
  }
};

} // namespace mdfuser

#endif
