// SPDX-License-Identifier: MIT
//
// The CUDA backend's moves for the fused matmul kernels: the allgather's
// rows pushed into the peers' symmetric buffers as their handshakes allow
// and the arrival flags that say they are there (runtime/fused_matmul.cpp),
// and the watch over kernels that wait for their peers themselves (both
// fused statements).
#include <utility>

#include "ir/errors.h"
#include "runtime/cuda_backend.h"

#ifdef MDFUSER_HAS_CUDA
#include "host_ir/nodes.h"
#include "runtime/communicator.h"
#include "runtime/cuda_backend_team.h"
#include "runtime/cuda_util.h"
#endif

namespace mdfuser {

#ifdef MDFUSER_HAS_CUDA

using namespace cuda_backend_detail;

namespace {

// The start of a watchdog report: "rank 0 in LinearReduceScatter 3 with
// team (0 1) on the CUDA backend: ".
std::string waiter(
    int64_t rank, const std::string& what, const std::vector<int64_t>& team) {
  return detail::concat(
      "rank ",
      rank,
      " in ",
      what,
      " with team ",
      hir::teamString(team),
      " on the CUDA backend: ");
}

} // namespace

CudaBackend::RowPushes CudaBackend::pushRows(
    const std::vector<int64_t>& members,
    const at::Tensor& rows,
    const at::Tensor& place,
    int64_t channel,
    cudaStream_t stream,
    std::shared_ptr<const std::string> what,
    uint64_t run) {
  checkChannel(channel, *what);
  MDF_CHECK(
      rows.sizes() == place.sizes() && rows.dtype() == place.dtype(),
      *what,
      " pushes rows of sizes ",
      rows.sizes(),
      " into a place of sizes ",
      place.sizes());
  Team& t = team(members);
  const bool captured = isCapturing(stream);
  // For the watchdog's report (a capture has none): where the moves were
  // held up, the push to which member.
  struct Step {
    int64_t to = 0;
    Event freed;
  };
  std::vector<Step> steps;
  Event started = captured ? nullptr : t.events.record(stream);
  for (int64_t shift = 1; shift < t.size(); ++shift) {
    const int64_t next = (t.me + shift) % t.size();
    const int64_t previous = (t.me + t.size() - shift) % t.size();
    Step step;
    step.to = members[next];
    // This member's place for the previous one's rows is free (the caller
    // ordered this after the kernel that read them); wait until the next
    // one's place for ours is.
    raiseWaitAndClear(
        stream,
        t.slot(previous, Team::kRowsFree, channel, t.me),
        t.slot(t.me, Team::kRowsFree, channel, next));
    if (!captured) {
      step.freed = t.events.record(stream);
    }
    if (rows.numel() > 0) {
      copyToPeer(rows, place, buffers_.peerAddress(place, next), stream);
    }
    CUstreamBatchMemOpParams arrived = {};
    arrived.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    arrived.writeValue.address =
        t.slot(next, Team::kRowsArrived, channel, t.me);
    arrived.writeValue.value = 1;
    check(batchMemOp()(stream, 1, &arrived, 0), "cuStreamBatchMemOp");
    steps.push_back(std::move(step));
  }
  RowPushes pushes;
  pushes.arrived = reinterpret_cast<const uint32_t*>(
      t.slot(t.me, Team::kRowsArrived, channel, 0));
  pushes.done = t.events.record(stream);
  if (!captured) {
    watch(
        pushes.done,
        [started,
         steps = std::move(steps),
         what = std::move(what),
         members,
         rank = communicator_.rank()] {
          auto finished = [](const Event& e) {
            const bool done = cudaEventQuery(e.get()) == cudaSuccess;
            (void)cudaGetLastError();
            return done;
          };
          std::string where = "waited for the work before its row pushes";
          if (finished(started)) {
            where = "its row pushes were held up";
            for (const Step& step : steps) {
              if (!finished(step.freed)) {
                where = detail::concat(
                    "waited for rank ",
                    step.to,
                    " to free its place for this rank's rows");
                break;
              }
            }
          }
          return waiter(rank, *what, members) + where;
        },
        t.peers(),
        run);
  }
  return pushes;
}

void CudaBackend::watchKernel(
    const std::vector<int64_t>& members,
    cudaStream_t stream,
    std::shared_ptr<const std::string> what,
    std::string waited,
    uint64_t run) {
  if (isCapturing(stream)) {
    return;
  }
  Team& t = team(members);
  watch(
      t.events.record(stream),
      [what = std::move(what),
       waited = std::move(waited),
       members,
       rank = communicator_.rank()] {
        return waiter(rank, *what, members) + waited;
      },
      t.peers(),
      run);
}

void CudaBackend::clearArrivals(
    const std::vector<int64_t>& members, int64_t channel, cudaStream_t stream) {
  const std::vector<CUdeviceptr> flags = team(members).arrivals(channel);
  // One driver call for every flag.
  std::vector<CUstreamBatchMemOpParams> ops(flags.size());
  for (size_t i = 0; i < flags.size(); ++i) {
    ops[i].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    ops[i].writeValue.address = flags[i];
    ops[i].writeValue.value = 0;
  }
  if (!ops.empty()) {
    check(
        batchMemOp()(stream, static_cast<unsigned>(ops.size()), ops.data(), 0),
        "cuStreamBatchMemOp");
  }
}

#else // !MDFUSER_HAS_CUDA

CudaBackend::RowPushes CudaBackend::pushRows(
    const std::vector<int64_t>&,
    const at::Tensor&,
    const at::Tensor&,
    int64_t,
    CUstream_st*,
    std::shared_ptr<const std::string>,
    uint64_t) {
  MDF_UNREACHABLE();
}

void CudaBackend::clearArrivals(
    const std::vector<int64_t>&, int64_t, CUstream_st*) {
  MDF_UNREACHABLE();
}

void CudaBackend::watchKernel(
    const std::vector<int64_t>&,
    CUstream_st*,
    std::shared_ptr<const std::string>,
    std::string,
    uint64_t) {
  MDF_UNREACHABLE();
}

#endif

} // namespace mdfuser
