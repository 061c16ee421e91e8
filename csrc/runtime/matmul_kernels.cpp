// SPDX-License-Identifier: MIT
#include "runtime/matmul_kernels.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <optional>
#include <vector>

#include <ATen/ops/addmm.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/mm.h>

#include "ir/ops.h"
#include "runtime/kernel_buffers.h"
#include "runtime/views.h"

namespace mdfuser {

namespace {

// out [batch..., N] = in [batch..., K] x weight [N, K]^T (+ bias [N], or a
// bias of the output's shape).
void linearInto(
    at::Tensor full_out,
    const at::Tensor& in_full,
    const at::Tensor& weight,
    const std::optional<at::Tensor>& bias) {
  // Rows in the output's memory order; the input follows (reshape copies
  // it only where it is not laid out alike).
  const std::vector<int64_t> order = rowOrder(full_out);
  at::Tensor out = permuted(full_out, order);
  const at::Tensor in = permuted(in_full, order);
  at::Tensor written = writable(out, out.sizes());
  // One 2-D GEMM over all leading axes. at::linear_out would run a
  // batched matmul and then add the bias in a separate pass over the
  // output; addmm with a 1-D bias takes cuBLASLt's bias epilogue.
  const int64_t n = weight.size(0);
  // The rows, from the input's leading axes (either extent may be 0).
  const int64_t m = std::accumulate(
      full_out.sizes().begin(),
      full_out.sizes().end() - 1,
      int64_t{1},
      std::multiplies<>());
  at::Tensor result = viewAs(written, {m, n});
  const at::Tensor a = reshapedAs(in, {m, in.size(-1)});
  if (!bias.has_value()) {
    at::mm_out(result, a, transposedView(weight));
  } else {
    // A bias of the output's shape is the C operand (beta = 1): ring
    // decompositions add a received partial sum this way, in place when it
    // is the output itself.
    at::addmm_out(
        result,
        bias->dim() > 1 ? reshapedAs(permuted(*bias, order), {m, n}) : *bias,
        a,
        transposedView(weight));
  }
  finish(written, out);
}

} // namespace

void linearKernel(KernelCall& call) {
  const auto& op = static_cast<const LinearOp&>(call.op);
  const at::Tensor& in = call.tensors[0];
  const at::Tensor& weight = call.tensors[1];
  std::optional<at::Tensor> bias;
  if (op.bias() != nullptr) {
    bias = call.tensors[2];
  }
  std::vector<int64_t> shape(in.sizes().begin(), in.sizes().end() - 1);
  if (op.outFeatureAxes() == 1) {
    shape.push_back(weight.size(0));
    linearInto(viewAs(call.outputs.at(0), shape), in, weight, bias);
    return;
  }
  // A weight [A, B, K]: the output [A, batch..., B], a GEMM per A (one
  // where A is split across the devices). No ring passes an output-shaped
  // bias to such a linear: the bias is [A, B].
  shape.insert(shape.begin(), weight.size(0));
  shape.push_back(weight.size(1));
  const at::Tensor out = viewAs(call.outputs.at(0), shape);
  for (int64_t a = 0; a < weight.size(0); ++a) {
    linearInto(
        out.select(0, a),
        in,
        weight.select(0, a),
        bias.has_value() ? std::optional<at::Tensor>(bias->select(0, a))
                         : std::nullopt);
  }
}

void matmulKernel(KernelCall& call) {
  const at::Tensor a = call.tensors[0].contiguous();
  const at::Tensor b = call.tensors[1].contiguous();
  // The batch shape broadcasts as in torch.
  std::vector<int64_t> batch_a(a.sizes().begin(), a.sizes().end() - 2);
  std::vector<int64_t> batch_b(b.sizes().begin(), b.sizes().end() - 2);
  const size_t rank = std::max(batch_a.size(), batch_b.size());
  std::vector<int64_t> shape(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t x =
        i + batch_a.size() >= rank ? batch_a[i + batch_a.size() - rank] : 1;
    const int64_t y =
        i + batch_b.size() >= rank ? batch_b[i + batch_b.size() - rank] : 1;
    shape[i] = x == 1 ? y : x;
  }
  shape.push_back(a.size(-2));
  shape.push_back(b.size(-1));
  at::Tensor out = viewAs(call.outputs.at(0), shape);
  at::Tensor written = writable(out, out.sizes());
  at::matmul_out(written, a, b);
  finish(written, out);
}

} // namespace mdfuser
