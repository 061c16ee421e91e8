// SPDX-License-Identifier: MIT
#pragma once

#include "host_ir/host_ir_container.h"

namespace mdfuser::hir {

// Orders each communication that AssignCommunicationStreams issued on a
// communication stream after the work of the compute stream it depends on,
// by making the communication stream wait for the compute stream first:
//
//   SetCurrentStream(CommunicationStream i)
//   Synchronize(Stream i)                     // inserted
//   Communication 3 (CollectivePermute, input=T5, output=T6, ...)
//   SetCurrentStream(Stream i)
//
// It does so when, since the communication stream last waited for it, the
// compute stream
//  - wrote or allocated the buffer the communication sends, which must be
//    complete before it moves, or
//  - read or wrote the buffer it receives into: whatever consumes the
//    buffer's previous contents (the GEMM of the previous ring step) must
//    be done before the receive overwrites them;
// and before the first communication of a run on the CUDA backend, whose
// symmetric buffers live from run to run: the previous run's compute may
// still read the one it lands in. Each lane of communication streams
// (AssignCommunicationStreams) counts on its own: a lane's wait does not
// order another's moves.
// On the CUDA backend a permute whose receive buffer was not used since its
// lane last waited, where only the previous runs' uses remain, posts its
// receive early: the communication stream waits for the previous run
// (SynchronizePreviousRun) before the compute stream waits for this
// iteration's work (after the scope's first SetCurrentStream of it, or at
// the scope's start), and the permute's copy alone waits for the data
// (Communication::sendsAfter), after the handshake that tells the peer the
// buffer is free:
//
//   SetCurrentStream(Stream i)
//   SetCurrentStream(CommunicationStream i)   // inserted
//   Synchronize(previous run)                 // inserted
//   SetCurrentStream(Stream i)                // inserted
//   Synchronize(Stream 0)
//   SetCurrentStream(CommunicationStream i)
//   Communication 3 (..., sends_after=Stream i)
//
// A buffer a move lands in that is allocated in a loop body is one buffer
// per iteration (the runtime keys symmetric buffers by loop iteration): its
// Allocate starts it afresh.
// A view counts as the buffer it views (conservatively, any part of it),
// and a loop body is scanned as if it ran twice, so that the previous
// iteration's uses count. Waits are not uses: they order the compute stream
// after the communication, not the other way. The compute stream is the one
// the statement after the communication makes current again, as
// AssignCommunicationStreams leaves it.
void orderCommunicationStreams(HostIrContainer& hic);

} // namespace mdfuser::hir
