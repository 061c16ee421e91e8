// SPDX-License-Identifier: MIT
#include "runtime/views.h"

#include <c10/core/TensorImpl.h>
#include <c10/util/SmallVector.h>

#include "ir/errors.h"

namespace mdfuser {

namespace {

// A tensor over `t`'s storage with these sizes, strides and offset.
at::Tensor aliasOf(
    const at::Tensor& t,
    at::IntArrayRef sizes,
    at::IntArrayRef strides,
    int64_t storage_offset) {
  at::Tensor view = at::detail::make_tensor<c10::TensorImpl>(
      c10::TensorImpl::VIEW, c10::Storage(t.storage()), t.key_set(), t.dtype());
  view.unsafeGetTensorImpl()->set_sizes_and_strides(
      sizes, strides, storage_offset);
  return view;
}

} // namespace

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
  return aliasOf(
      t, sizes, t.strides(), t.storage_offset() + start * t.stride(axis));
}

at::Tensor transposedView(const at::Tensor& matrix) {
  MDF_CHECK(
      matrix.dim() == 2,
      "a transpose of a matrix, not of a tensor of sizes ",
      matrix.sizes());
  const int64_t sizes[] = {matrix.size(1), matrix.size(0)};
  const int64_t strides[] = {matrix.stride(1), matrix.stride(0)};
  return aliasOf(matrix, sizes, strides, matrix.storage_offset());
}

} // namespace mdfuser
