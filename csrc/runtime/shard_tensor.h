// SPDX-License-Identifier: MIT
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>

#include "ir/scalar_eval.h"
#include "ir/tensor_view.h"

namespace mdfuser {

// The part of the global `tensor` that `device` holds when it is laid out
// like `tv`: along each axis sharded across devices, the elements the
// device's coordinates select (with a stream split above a device split,
// one run per stream chunk). A device outside tv's mesh gets the part of
// the mesh's first device, a placeholder of the right shape. ValueError
// when the tensor's rank or an extent does not fit tv's splits.
at::Tensor shardTensor(
    const at::Tensor& tensor, const TensorView* tv, int64_t device);

// The positions along tv's non-reduction logical axis `axis` (of `extent`
// elements globally) whose elements `device` holds, in order: all of them
// where the axis is not sharded. `extents` evaluates the extents of the
// splits. A kernel whose result depends on which part of an operand it
// holds (grouped_mm's expert-sharded weights) asks this.
std::vector<int64_t> heldIndices(
    const TensorView* tv,
    size_t axis,
    int64_t extent,
    int64_t device,
    const ScalarEvaluator& extents);

} // namespace mdfuser
