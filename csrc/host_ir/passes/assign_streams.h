// SPDX-License-Identifier: MIT
#pragma once

#include "host_ir/host_ir_container.h"

namespace mdfuser::hir {

// Runs the iterations of every Stream loop on worker streams:
//
//   Stream m = GetCurrentStream()
//   FOR i from a to b:              // the Stream loop
//     SetCurrentStream(Stream i)    //   work of iteration i goes to worker i
//     Synchronize(Stream m)         //   after what the caller queued before
//     ...body...
//   SetCurrentStream(Stream m)
//   FOR j from a to b:              // a join loop with its own index
//     Synchronize(Stream j)         //   the caller's stream waits for all
//
// Only loops whose parallel type is Stream are rewritten; serial loops are
// left as they are, though Stream loops nested in them are rewritten. A
// nested Stream loop treats the worker stream it runs on as its main stream.
// Each scope is rebuilt in order, never patched through iterators.
//
// With StreamSchedule::kCommunicationPerStream, the statements before an
// iteration's first collective stay on the main stream, in order, and the
// switch to the worker stream comes right before that collective; the
// iteration switches back to the main stream at its end:
//
//   FOR i from a to b:
//     ...compute chunk i...          //   on the main stream, one after another
//     SetCurrentStream(Stream i)
//     Synchronize(Stream m)          //   after chunk i is computed
//     Communication / Wait           //   overlaps chunk i + 1's compute
//     SetCurrentStream(Stream m)
//
// An iteration whose moves to peers (CollectivePermutes: a ring or direct
// decomposition) come before its first collective switches right after its
// last contraction (linear, matmul, attention) before that collective
// instead: the decomposition's GEMMs, with the moves issued between them
// and the waits for what they need, run on the main stream in iteration
// order, and what follows the last GEMM (the sum of the arrivals, the
// moves of the reduced parts and their waits) on the worker, beside the
// next iteration's GEMMs. An iteration that does not communicate runs on
// its worker whole.
enum class StreamSchedule {
  // Each iteration runs on its own worker stream.
  kIterationPerStream,
  // Computation stays on the main stream; each iteration's communications
  // and what follows them run on its worker stream.
  kCommunicationPerStream,
};

void assignStreams(
    HostIrContainer& hic,
    StreamSchedule schedule = StreamSchedule::kIterationPerStream);

} // namespace mdfuser::hir
