// SPDX-License-Identifier: MIT
#pragma once

#include "host_ir/host_ir_container.h"

namespace mdfuser::hir {

// Lets an operation write its result straight into the buffer an allreduce
// produces, and the allreduce reduce that buffer in place.
//
// c10d reduces in place, so `Communication(Allreduce, in=X, out=V)` first
// copies X into V. When X is a temporary that one operation P writes and
// only the allreduce reads, P can write V instead:
//
//   T3 = linear(T4, T1)                 T5 = ShardByStream(T2, i)
//   T5 = ShardByStream(T2, i)     =>    T5 = linear(T4, T1)
//   Communication(in=T3, out=T5)        Communication(in=T5, out=T5)
//   Wait                                Wait
//
// which saves the copy and the temporary. Applies within one scope, when V
// is a chunk view created in that scope or a buffer nothing touches between
// P and the allreduce, and P does not read V's buffer. Runs before
// AllocateAndDeallocate, which then has no temporary to allocate.
void inplaceAllreduce(HostIrContainer& hic);

} // namespace mdfuser::hir
