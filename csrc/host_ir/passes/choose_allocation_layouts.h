// SPDX-License-Identifier: MIT
#pragma once

#include "host_ir/host_ir_container.h"

namespace mdfuser::hir {

// Gives a buffer the memory layout its kernel produces, where that layout
// follows an operand's: the attention kernels return their output (and the
// backward its gradients) laid out like the query (key, value), so that
// a query cut out of a fused qkv projection, [seq, batch, heads, size] in
// memory, gives an output [batch, heads, seq, size] whose merge of heads
// back into [seq, batch, e] is a view. Row-major buffers would make both
// the copy of the kernel's result into the buffer and that merge strided
// copies.
//
// A row-major buffer that a Stream loop cuts along an inner axis (the
// batch of [seq, batch, e] activations) gets that axis outermost, so that
// each chunk is contiguous: a linear writes and reads it in place instead
// of through a strided copy. An operand-following layout (above) decides
// where both apply.
//
// The layout of each tensor is inferred statically from its Allocate
// (row-major unless given a stride order), program inputs (as their
// define_tensor stride_order declares, row-major without one) and the views
// between them (ShardByStream, RingChunk and layout Views: permute, slice,
// squeeze, broadcast, and a reshape that only splits or merges axes adjacent in
// memory). Where an operand's layout is unknown or row-major, nothing changes.
// Runs after AllocateAndDeallocate; the evaluator allocates a buffer with a
// stride order through a permuted row-major tensor.
void chooseAllocationLayouts(HostIrContainer& hic);

} // namespace mdfuser::hir
