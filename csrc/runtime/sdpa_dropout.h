// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace mdfuser {

// The dropout mask of attention where ATen has no kernel that draws one
// (the CPU): which attention weights are kept, a Bool tensor of shape
// [slice_ids.sizes()..., seq_q, seq_k]. The weights of one (batch, head)
// pair, numbered `id` = batch * heads + head in the global attention, are
// kept where a uniform Float draw in [0, 1) is at least `dropout_p`; the
// seq_q x seq_k draws come row-major from a CPU generator (Mersenne
// Twister) seeded with mixSeed(mixSeed(mixSeed(seed) ^ offset) ^ id). The
// mask of a pair depends on (seed, offset, id, seq_q, seq_k) alone, so a
// device holding some heads draws the same mask for them as one device
// holding all.
at::Tensor sdpaDropoutKeep(
    uint64_t seed,
    uint64_t offset,
    const at::Tensor& slice_ids,
    int64_t seq_q,
    int64_t seq_k,
    double dropout_p);

} // namespace mdfuser
