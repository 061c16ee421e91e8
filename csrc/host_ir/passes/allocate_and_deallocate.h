// SPDX-License-Identifier: MIT
#pragma once

#include "host_ir/host_ir_container.h"

namespace mdfuser::hir {

// Binds a buffer to every tensor the program writes and frees it after its
// last use.
//
// A tensor's uses are the statements that name it or a ShardByStream view of
// it; a Wait uses the buffers of its Communication. The Allocate goes right
// before the first use, the Deallocate right after the last one, both in the
// innermost scope that holds every use. A tensor stays in a loop body only
// when each iteration begins by overwriting it whole (or by cutting it into
// RingChunks: a ring decomposition writes each part before reading it);
// otherwise (it is read
// or written through a view first, or it is a program output) it is
// allocated at the top level. Inside a Stream loop, a tensor split on the
// stream axis gets the shape of one chunk.
//
// Never allocates or deallocates program inputs or views, never deallocates
// outputs. Because a Wait counts as a use, a buffer is never freed while a
// collective may still touch it.
void allocateAndDeallocate(HostIrContainer& hic);

} // namespace mdfuser::hir
