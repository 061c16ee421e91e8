// SPDX-License-Identifier: MIT
#include "runtime/sdpa_kernels.h"

#include <cmath>
#include <limits>
#include <vector>

#include <ATen/Context.h>
#include <ATen/ops/_scaled_dot_product_cudnn_attention.h>
#include <ATen/ops/_scaled_dot_product_cudnn_attention_backward.h>
#include <ATen/ops/_scaled_dot_product_flash_attention.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_backward.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/ones.h>

#include "ir/errors.h"
#include "ir/ops.h"
#include "runtime/rng_mix.h"
#include "runtime/sdpa_dropout.h"
#include "runtime/shard_tensor.h"

namespace mdfuser {

namespace {

// On CUDA, attention runs cuDNN's kernels where they take the operands and
// the problem is large (as torch's scaled_dot_product_attention prefers them:
// on an H200, bf16, causal, batch 4, 64 heads, seq 2048, head size 128,
// cuDNN's forward takes 0.52 ms and its backward 1.62 ms where flash
// attention takes 0.93 and 2.95), flash attention otherwise. cuDNN's host
// cost per call is higher (about 250 us against flash's 110 us at seq 8,
// head size 16), which only a kernel of a few hundredths of a millisecond
// or more hides: hence the size threshold, batch * heads * seq_q * seq_k *
// head_size of at least 2^32. A stream chunk of the benchmark's attention
// at d = 4 (one batch element of 16 heads, 2^33) took 0.17 ms in flash
// attention where cuDNN's took 0.14 ms for all four (4x H200). Both kernels
// return the same log-sum-exp, cuDNN's with a trailing axis of one, so a
// forward run by one can be differentiated by the other. With dropout, flash
// attention only: its rng_state is what its backward takes.
bool useCudnnAttention(
    const at::Tensor& q,
    const at::Tensor& k,
    const at::Tensor& v,
    double dropout_p) {
  constexpr int64_t kMinCudnnWork = int64_t{1} << 32;
  if (!q.is_cuda() || dropout_p != 0.0 ||
      !at::globalContext().userEnabledCuDNN()) {
    return false;
  }
  const int64_t head_size = q.size(3);
  const int64_t work =
      q.size(0) * q.size(1) * q.size(2) * k.size(2) * head_size;
  return work >= kMinCudnnWork && head_size % 8 == 0 && head_size <= 128 &&
         q.stride(3) == 1 && k.stride(3) == 1 && v.stride(3) == 1;
}

// `t` with its leading axes (all but the last `kept`) merged into one: the
// batch of the 4-dimensional kernels. A view where the layout allows.
at::Tensor mergeLeading(const at::Tensor& t, int64_t kept) {
  if (t.dim() == kept + 1) {
    return t;
  }
  return t.flatten(0, t.dim() - kept - 1);
}

// Writes `result` into `out`, whose shape differs only by how the leading
// axes are grouped.
void writeInto(at::Tensor& out, const at::Tensor& result) {
  out.copy_(result.reshape(out.sizes()));
}

// Per (batch, head) pair of this device's query, its number in the global
// attention: batch * heads + head, the heads of [D, B, H/D] numbered
// d * H/D + h. A stream chunk would be a part this does not know of;
// validateReshardings refuses dropout per stream chunk.
at::Tensor globalSliceIds(const KernelCall& call, const TensorView* query) {
  const std::vector<IterDomain*> axes = query->logicalNoReductions();
  std::vector<int64_t> global;
  for (size_t a = 0; a + 2 < axes.size(); ++a) {
    global.push_back(call.extents.evaluate(axes[a]->extent()));
  }
  const auto options = at::TensorOptions().dtype(at::kLong);
  at::Tensor ids;
  if (global.size() == 2) {
    ids = at::arange(global[0] * global[1], options).view(global);
  } else {
    const int64_t d = global[0];
    const int64_t b = global[1];
    const int64_t h = global[2];
    ids = at::arange(b * d * h, options).view({b, d, h}).permute({1, 0, 2});
  }
  // The sequence and head-size axes, never sharded here (attention gathers
  // them first), as axes of one element.
  ids = ids.unsqueeze(-1).unsqueeze(-1).contiguous();
  return shardTensor(ids, query, call.device).squeeze(-1).squeeze(-1);
}

// The two words of a philox_seed tensor, [seed, offset].
std::pair<uint64_t, uint64_t> philoxWords(const at::Tensor& seed) {
  const at::Tensor words = seed.cpu().contiguous().view(at::kLong);
  MDF_CHECK_EQ(words.numel(), int64_t{2});
  const int64_t* w = words.const_data_ptr<int64_t>();
  return {static_cast<uint64_t>(w[0]), static_cast<uint64_t>(w[1])};
}

// Attention on the CPU with dropout, as its matrix products in Float (or
// Double for Double operands).
struct MathAttention {
  at::Tensor q, k, v;
  at::Tensor keep;
  double scale;
  double keep_scale;
  bool is_causal;

  MathAttention(
      const at::Tensor& query,
      const at::Tensor& key,
      const at::Tensor& value,
      at::Tensor keep_mask,
      const SdpaOptions& options)
      : keep(std::move(keep_mask)),
        scale(options.scale.value_or(
            1.0 / std::sqrt(static_cast<double>(query.size(-1))))),
        keep_scale(1.0 / (1.0 - options.dropout_p)),
        is_causal(options.is_causal) {
    const at::ScalarType acc =
        query.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    q = query.to(acc);
    k = key.to(acc);
    v = value.to(acc);
  }

  at::Tensor scores() const {
    at::Tensor s = q.matmul(k.transpose(-2, -1)).mul_(scale);
    if (is_causal) {
      // torch's causal mask: query i sees keys 0..i.
      const at::Tensor allowed =
          at::ones(
              {q.size(-2), k.size(-2)}, at::TensorOptions().dtype(at::kBool))
              .tril();
      s.masked_fill_(
          allowed.logical_not(), -std::numeric_limits<double>::infinity());
    }
    return s;
  }

  // The weights after dropout: kept ones scaled by 1 / (1 - p).
  at::Tensor dropped(const at::Tensor& weights) const {
    return weights.masked_fill(keep.logical_not(), 0.0).mul_(keep_scale);
  }
};

at::Tensor cpuKeepMask(
    const KernelCall& call,
    const TensorView* query,
    uint64_t seed,
    uint64_t offset,
    const at::Tensor& q,
    const at::Tensor& k,
    double dropout_p) {
  const at::Tensor ids = globalSliceIds(call, query);
  MDF_CHECK(
      ids.sizes() == q.sizes().slice(0, q.dim() - 2),
      "attention's dropout mask: the local slices ",
      ids.sizes(),
      " do not match the query's leading axes ",
      q.sizes());
  return sdpaDropoutKeep(seed, offset, ids, q.size(-2), k.size(-2), dropout_p);
}

} // namespace

void sdpaFwdKernel(KernelCall& call) {
  const auto& op = static_cast<const SdpaOp&>(call.op);
  const SdpaOptions& options = op.options();
  const double dropout_p = options.dropout_p;
  if (dropout_p != 0.0 && !call.tensors[0].is_cuda()) {
    const uint64_t seed = mixSeed(
        call.rng_base ^ mixSeed(static_cast<uint64_t>(op.out()->name())));
    const uint64_t offset = 0;
    MathAttention m(
        call.tensors[0],
        call.tensors[1],
        call.tensors[2],
        cpuKeepMask(
            call,
            op.tensorInputs()[0],
            seed,
            offset,
            call.tensors[0],
            call.tensors[1],
            dropout_p),
        options);
    const at::Tensor s = m.scores();
    const at::Tensor lse = s.logsumexp(-1);
    const at::Tensor weights = s.sub(lse.unsqueeze(-1)).exp_();
    call.outputs[0].copy_(m.dropped(weights).matmul(m.v));
    call.outputs[1].copy_(lse);
    at::Tensor words = call.outputs[2].view(at::kLong);
    words.select(0, 0).fill_(static_cast<int64_t>(seed));
    words.select(0, 1).fill_(static_cast<int64_t>(offset));
    call.outputs[3].zero_();
    return;
  }
  const at::Tensor q = mergeLeading(call.tensors[0], 3);
  const at::Tensor k = mergeLeading(call.tensors[1], 3);
  const at::Tensor v = mergeLeading(call.tensors[2], 3);
  const bool causal = options.is_causal;
  const std::optional<double> scale = options.scale;
  at::Tensor out;
  at::Tensor lse;
  if (useCudnnAttention(q, k, v, dropout_p)) {
    auto result = at::_scaled_dot_product_cudnn_attention(
        q, k, v, std::nullopt, true, 0.0, causal, false, scale);
    out = std::get<0>(result);
    lse = std::get<1>(result).squeeze(-1);
  } else if (q.is_cuda()) {
    auto result = at::_scaled_dot_product_flash_attention(
        q, k, v, dropout_p, causal, false, scale);
    out = std::get<0>(result);
    lse = std::get<1>(result);
    if (dropout_p != 0.0) {
      // rng_state: the philox seed and offset the mask was drawn with.
      call.outputs[2].copy_(std::get<6>(result).reshape({2}));
    }
  } else {
    std::tie(out, lse) = at::_scaled_dot_product_flash_attention_for_cpu(
        q, k, v, 0.0, causal, {}, scale);
  }
  writeInto(call.outputs[0], out);
  writeInto(call.outputs[1], lse);
  if (dropout_p == 0.0) {
    call.outputs[2].zero_();
  }
  call.outputs[3].zero_();
}

void sdpaBwdKernel(KernelCall& call) {
  const auto& op = static_cast<const SdpaOp&>(call.op);
  const SdpaOptions& options = op.options();
  const double dropout_p = options.dropout_p;
  if (dropout_p != 0.0 && !call.tensors[1].is_cuda()) {
    MDF_CHECK_EQ(call.tensors.size(), size_t{8});
    const auto [seed, offset] = philoxWords(call.tensors[6]);
    MathAttention m(
        call.tensors[1],
        call.tensors[2],
        call.tensors[3],
        cpuKeepMask(
            call,
            op.tensorInputs()[1],
            seed,
            offset,
            call.tensors[1],
            call.tensors[2],
            dropout_p),
        options);
    const at::Tensor grad = call.tensors[0].to(m.q.scalar_type());
    const at::Tensor lse = call.tensors[5].to(m.q.scalar_type());
    const at::Tensor weights = m.scores().sub_(lse.unsqueeze(-1)).exp_();
    // dL/dweights through dropout, and the softmax's backward.
    const at::Tensor grad_weights =
        m.dropped(grad.matmul(m.v.transpose(-2, -1)));
    const at::Tensor row = weights.mul(grad_weights).sum(-1, true);
    const at::Tensor grad_scores = grad_weights.sub(row).mul_(weights);
    call.outputs[0].copy_(grad_scores.matmul(m.k).mul_(m.scale));
    call.outputs[1].copy_(
        grad_scores.transpose(-2, -1).matmul(m.q).mul_(m.scale));
    call.outputs[2].copy_(m.dropped(weights).transpose(-2, -1).matmul(grad));
    return;
  }
  const at::Tensor grad = mergeLeading(call.tensors[0], 3);
  const at::Tensor q = mergeLeading(call.tensors[1], 3);
  const at::Tensor k = mergeLeading(call.tensors[2], 3);
  const at::Tensor v = mergeLeading(call.tensors[3], 3);
  const at::Tensor out = mergeLeading(call.tensors[4], 3);
  const at::Tensor lse = mergeLeading(call.tensors[5], 2);
  at::Tensor gq;
  at::Tensor gk;
  at::Tensor gv;
  const bool causal = options.is_causal;
  // Without dropout the philox state is not read.
  const bool has_philox = call.tensors.size() == 8 && dropout_p != 0.0;
  const at::Tensor no_philox =
      q.is_cuda()
          ? at::empty(
                {}, at::TensorOptions().dtype(at::kLong).device(q.device()))
          : at::Tensor();
  const at::Tensor philox_seed = has_philox ? call.tensors[6] : no_philox;
  const at::Tensor philox_offset = has_philox ? call.tensors[7] : no_philox;
  if (useCudnnAttention(q, k, v, dropout_p)) {
    std::tie(gq, gk, gv) = at::_scaled_dot_product_cudnn_attention_backward(
        grad,
        q,
        k,
        v,
        out,
        lse.unsqueeze(-1),
        philox_seed,
        philox_offset,
        at::Tensor(),
        at::Tensor(),
        at::Tensor(),
        q.size(2),
        k.size(2),
        0.0,
        causal,
        options.scale);
  } else if (q.is_cuda()) {
    std::tie(gq, gk, gv) = at::_scaled_dot_product_flash_attention_backward(
        grad,
        q,
        k,
        v,
        out,
        lse,
        at::Tensor(),
        at::Tensor(),
        q.size(2),
        k.size(2),
        dropout_p,
        causal,
        philox_seed,
        philox_offset,
        options.scale);
  } else {
    std::tie(gq, gk, gv) =
        at::_scaled_dot_product_flash_attention_for_cpu_backward(
            grad, q, k, v, out, lse, 0.0, causal, {}, options.scale);
  }
  writeInto(call.outputs[0], gq);
  writeInto(call.outputs[1], gk);
  writeInto(call.outputs[2], gv);
}

} // namespace mdfuser
