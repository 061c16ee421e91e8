// SPDX-License-Identifier: MIT
#pragma once

#include "host_ir/host_ir_container.h"

namespace mdfuser::hir {

// Puts in symmetric memory the buffers that peers write into: the buffer
// each CollectivePermute on the CUDA backend lands in (its `landing`,
// through the views it is cut from), shared with the permute's
// team. Its Allocate becomes
//
//   T8 = ALLOCATE(mem_type=symmetric, team=(0 1), zero_init=false)
//
// A landing buffer that no Allocate binds (a program input or output) is an
// internal error: lowering gives such rings a buffer of their own. Runs
// after AllocateAndDeallocate; leaves programs without CUDA communications
// unchanged.
void placeSymmetricBuffers(HostIrContainer& hic);

} // namespace mdfuser::hir
