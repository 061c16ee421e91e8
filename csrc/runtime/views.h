// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace mdfuser {

// Views the evaluator makes at every stream chunk and ring step, made
// without ATen's dispatcher: tensors sharing the viewed tensor's storage,
// with no autograd view record, read and written by the evaluator alone
// with gradients off. Through the dispatcher (slice or transpose,
// as_strided, the autograd view record) they took about a seventh of the
// host time of a ring program's call on a GPU.

// The elements [start, start + length) of `t` along `axis`, as
// Tensor::narrow gives them: stream chunks and ring parts (ShardByStream,
// RingChunk).
at::Tensor narrowView(
    const at::Tensor& t, int64_t axis, int64_t start, int64_t length);

// The transpose of a matrix, as Tensor::t gives it: a linear's weight as
// its GEMM's right operand.
at::Tensor transposedView(const at::Tensor& matrix);

} // namespace mdfuser
