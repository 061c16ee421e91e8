// SPDX-License-Identifier: MIT
#pragma once

#include <ATen/core/Tensor.h>

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

} // namespace mdfuser
