// SPDX-License-Identifier: MIT
#pragma once

#include "host_ir/host_ir_container.h"

namespace mdfuser::hir {

// Issues every CollectivePermute (the step of a ring decomposition) on a
// communication stream, so that a backend moving data with copy engines
// queues its copies beside the computation rather than behind it:
//
//   SetCurrentStream(CommunicationStream i)   // i: the index of the
//   Communication 3 (CollectivePermute, ...)  // enclosing Stream loop, or 0
//   SetCurrentStream(Stream i)                // back to the compute stream
//   ...GEMM on the chunk held...              // runs beside the move
//   Wait(Communication 3)                     // the compute stream waits
//
// The compute stream is the one the enclosing scopes made current last; at
// the top level, where none did, the caller's stream, which the program
// then captures first. Collectives stay where they are: NCCL and Gloo order
// themselves after the stream they are posted on. The communication stream
// is not yet ordered after the compute stream: OrderCommunicationStreams
// does that. Runs after AssignStreams, so that a Stream loop's iterations
// already run on their workers.
//
// With `lanes` above 1, moves outstanding at once in a scope (issued, not
// yet waited for: a direct decomposition's moves to its d - 1 peers) go on
// communication streams of their own, the lowest lane free at each, so
// that their handshakes and copies run side by side instead of each
// waiting for the one before; a ring's steps, each waited for before the
// next, stay on lane 0. Moves sending the same buffer (the direct
// allreduce's reduced part, sent to every peer) share the lane of the
// first: on four H200s the copies of one buffer to three peers issued on
// three streams ran one after another all the same, and slower than on
// one. Beyond `lanes` outstanding moves, lanes are shared (lane = count
// mod lanes).
void assignCommunicationStreams(HostIrContainer& hic, int64_t lanes = 1);

} // namespace mdfuser::hir
