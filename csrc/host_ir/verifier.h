// SPDX-License-Identifier: MIT
#pragma once

#include "host_ir/host_ir_container.h"

namespace mdfuser::hir {

struct VerifyOptions {
  // Also require that every buffer is allocated before use and not used
  // after it is deallocated; holds once AllocateAndDeallocate has run.
  bool buffers_allocated = false;
};

// Checks the invariants of a host program and raises an internal error
// naming the statement that breaks one:
//  - a stream is current or waited on only where it exists: captured by an
//    earlier GetCurrentStream in scope, or indexed by an enclosing loop;
//  - scalars used by statements depend only on input extents and enclosing
//    loop indices;
//  - a Wait follows its Communication, once;
//  - with buffers_allocated: tensors are inputs, views created earlier or
//    buffers allocated earlier; nothing is used after Deallocate; outputs are
//    never deallocated; no buffer of a pending Communication is deallocated
//    before its Wait.
void verify(const HostIrContainer& hic, const VerifyOptions& options = {});

} // namespace mdfuser::hir
