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
void assignStreams(HostIrContainer& hic);

} // namespace mdfuser::hir
