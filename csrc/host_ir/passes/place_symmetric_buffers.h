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
// internal error: lowering gives such rings a buffer of their own.
//
// With `symmetric_memory` (the program runs on the CUDA backend, which has
// it), the buffers the user placed there (set_memory_type: tensors of
// MemoryType::Symmetric that an Allocate binds) go there too, shared with
// their mesh (a tensor without one has no peers and stays as it is).
// Program inputs and outputs keep the memory they have (the caller's, and
// a fresh buffer each run returns). Without it, those placements change
// nothing.
//
// Runs after AllocateAndDeallocate; leaves programs without CUDA
// communications or symmetric placements unchanged.
void placeSymmetricBuffers(HostIrContainer& hic, bool symmetric_memory);

} // namespace mdfuser::hir
