// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace mdfuser {

// How the kernels see the buffers they read and write: an operation's
// natural shape over its buffer's, and contiguous temporaries where a
// library needs contiguous operands.

// `buffer` seen with `shape`: an operation's natural output shape, which
// differs from its buffer's by size-1 axes (device parts of partial results,
// broadcast axes).
at::Tensor viewAs(const at::Tensor& buffer, at::IntArrayRef shape);

// `t` reshaped to `shape`, `t` itself when it has that shape: a call of
// ATen's reshape costs host time even when it changes nothing.
at::Tensor reshapedAs(const at::Tensor& t, at::IntArrayRef shape);

// `t` with its axes in `order`, `t` itself when the order is the identity.
at::Tensor permuted(const at::Tensor& t, at::IntArrayRef order);

// GEMMs run on contiguous operands and outputs: a stream chunk of a batch
// axis is a strided view, on which cuBLAS falls back to slow batched paths
// (or ATen's out= variants refuse the layout). `buffer` seen with `shape`
// when it is contiguous, else a contiguous temporary of `shape` (a stream
// chunk, or a buffer laid out otherwise by ChooseAllocationLayouts) that
// finish() copies back.
at::Tensor writable(const at::Tensor& buffer, at::IntArrayRef shape);

// Copies what a kernel wrote into the temporary `written` (of writable)
// into `buffer`; nothing when it wrote into the buffer itself.
void finish(const at::Tensor& written, at::Tensor& buffer);

// The leading axes of `t` (all but the last) from the outermost in memory
// to the innermost, the last axis last: a GEMM whose rows follow this
// order writes a permuted-contiguous `t` (a stream chunk of a buffer laid
// out chunk axis outermost) in place.
std::vector<int64_t> rowOrder(const at::Tensor& t);

} // namespace mdfuser
