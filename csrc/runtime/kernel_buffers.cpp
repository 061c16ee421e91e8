// SPDX-License-Identifier: MIT
#include "runtime/kernel_buffers.h"

#include <algorithm>
#include <numeric>

#include <ATen/ops/empty.h>

namespace mdfuser {

at::Tensor viewAs(const at::Tensor& buffer, at::IntArrayRef shape) {
  if (buffer.sizes() == shape) {
    return buffer;
  }
  return buffer.view(shape);
}

at::Tensor reshapedAs(const at::Tensor& t, at::IntArrayRef shape) {
  if (t.sizes() == shape) {
    return t;
  }
  return t.reshape(shape);
}

at::Tensor permuted(const at::Tensor& t, at::IntArrayRef order) {
  for (size_t a = 0; a < order.size(); ++a) {
    if (order[a] != static_cast<int64_t>(a)) {
      return t.permute(order);
    }
  }
  return t;
}

at::Tensor writable(const at::Tensor& buffer, at::IntArrayRef shape) {
  return buffer.is_contiguous() ? viewAs(buffer, shape)
                                : at::empty(shape, buffer.options());
}

void finish(const at::Tensor& written, at::Tensor& buffer) {
  if (!written.is_alias_of(buffer)) {
    buffer.copy_(viewAs(written, buffer.sizes()));
  }
}

std::vector<int64_t> rowOrder(const at::Tensor& t) {
  std::vector<int64_t> order(t.dim());
  std::iota(order.begin(), order.end(), 0);
  if (t.dim() > 2) {
    std::stable_sort(order.begin(), order.end() - 1, [&](int64_t a, int64_t b) {
      return t.stride(a) > t.stride(b);
    });
  }
  return order;
}

} // namespace mdfuser
