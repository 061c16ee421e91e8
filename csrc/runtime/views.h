// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace mdfuser {

// The elements [start, start + length) of `t` along `axis`, the view
// Tensor::narrow returns, made without ATen's dispatcher: a tensor sharing
// `t`'s storage, with no autograd view record. The evaluator's stream
// chunks and ring parts (ShardByStream, RingChunk) are views of this kind,
// made at every chunk and ring step, read and written by the evaluator
// alone with gradients off; through the dispatcher (slice, as_strided and
// the autograd view record) they took about a tenth of the host time of a
// ring program's call on a GPU.
at::Tensor narrowView(
    const at::Tensor& t, int64_t axis, int64_t start, int64_t length);

} // namespace mdfuser
