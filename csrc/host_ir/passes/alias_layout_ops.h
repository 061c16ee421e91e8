// SPDX-License-Identifier: MIT
#pragma once

#include "host_ir/host_ir_container.h"

namespace mdfuser::hir {

// Turns layout operations (permute, slice, squeeze, broadcast, reshape)
// into Views of their input's buffer, so that they copy nothing:
//
//   T8 = permute(T7, dims=[1, 0])   =>   T8 = View(permute, T7)
//
// A layout operation stays a copy when its result is a program output
// (outputs are returned as buffers of their own) or when it writes through
// a chunk view of a tensor that outlives its loop. Views are read only:
// nothing writes a tensor after the operation that computes it, so a view
// never sees its source change. Runs before AllocateAndDeallocate, which
// then allocates no buffer for a view and keeps its source alive until the
// view's last use.
void aliasLayoutOps(HostIrContainer& hic);

} // namespace mdfuser::hir
