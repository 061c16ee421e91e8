// SPDX-License-Identifier: MIT
#include "runtime/views.h"

#include <c10/core/TensorImpl.h>
#include <c10/util/SmallVector.h>

#include "ir/errors.h"

namespace mdfuser {

at::Tensor narrowView(
    const at::Tensor& t, int64_t axis, int64_t start, int64_t length) {
  MDF_CHECK(
      axis >= 0 && axis < t.dim() && start >= 0 && length >= 0 &&
          start + length <= t.size(axis),
      "a view of elements [",
      start,
      ", ",
      start + length,
      ") of axis ",
      axis,
      " of a tensor of sizes ",
      t.sizes());
  c10::SmallVector<int64_t, 6> sizes(t.sizes().begin(), t.sizes().end());
  sizes[axis] = length;
  at::Tensor view = at::detail::make_tensor<c10::TensorImpl>(
      c10::TensorImpl::VIEW, c10::Storage(t.storage()), t.key_set(), t.dtype());
  view.unsafeGetTensorImpl()->set_sizes_and_strides(
      sizes, t.strides(), t.storage_offset() + start * t.stride(axis));
  return view;
}

} // namespace mdfuser
