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
void assignCommunicationStreams(HostIrContainer& hic);

} // namespace mdfuser::hir
