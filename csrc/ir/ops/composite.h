// SPDX-License-Identifier: MIT
#pragma once

#include <utility>
#include <vector>

#include "ir/tensor_view.h"

namespace mdfuser {

// Reductions written with the primitives, so that they shard like any
// other composition: a mean over an axis sharded across devices is a local
// sum, an allreduce and a division by the global count. Half and BFloat16
// inputs are computed in Float and give Float results, as a division of
// sums does in nvFuser (a script casts them back).

// torch.mean over `dims` (empty: every axis). Floating inputs only.
TensorView* mean(
    TensorView* in, const std::vector<int64_t>& dims, bool keepdim = false);

// torch.var_mean: (variance, mean) over `dims`, the variance divided by
// count - correction. Floating inputs only.
std::pair<TensorView*, TensorView*> varMean(
    TensorView* in,
    const std::vector<int64_t>& dims,
    int64_t correction = 1,
    bool keepdim = false);

} // namespace mdfuser
