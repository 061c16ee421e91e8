// SPDX-License-Identifier: MIT
#pragma once

#include "host_ir/host_ir_container.h"

namespace mdfuser::hir {

// Issues the work each stream chunk does before its first ring step (the
// GEMM of ring step 0) for every chunk first, each chunk's after the
// previous chunk's, then the rings. A Stream loop whose iterations run a
// ring after some computation,
//
//   FOR i1 from 0 to 4:
//     SetCurrentStream(Stream i1)
//     Synchronize(Stream 0)
//     T4 = ShardByStream(T0, stream_index = i1)
//     T7 = RingChunk(T4, ...)
//     T7 = linear(...)                       // the prologue
//     FOR i2 from 1 to 2: ... CollectivePermute ...
//     ...
//
// becomes two loops over the same index:
//
//   FOR i1 from 0 to 4:
//     SetCurrentStream(Stream i1)
//     Synchronize(Stream 0)
//     Synchronize(Stream max(i1 - 1, 0))      // the previous chunk's prologue
//     T4 = ShardByStream(T0, stream_index = i1)
//     T7 = RingChunk(T4, ...)
//     T7 = linear(...)
//   FOR i1 from 0 to 4:
//     SetCurrentStream(Stream i1)
//     T4 = ShardByStream(T0, stream_index = i1)   // views the rest uses, again
//     FOR i2 from 1 to 2: ... CollectivePermute ...
//     ...
//
// Without it the chunks' prologues are ready together and share the SMs, so
// that the first chunk's first move waits for about all of them; with it
// they run in order, and chunk i's first move goes while chunk i + 1's
// prologue computes. Views the rest uses are made again in the second loop
// (the same statements: they bind the same memory). A loop whose prologue
// allocates a buffer that the rest uses (it would be needed for every chunk
// at once), communicates or changes streams is left as it is. Runs after
// AssignStreams and OrderCommunicationStreams
// (`_enable_options=["ring_prologues_first"]`).
void ringProloguesFirst(HostIrContainer& hic);

} // namespace mdfuser::hir
