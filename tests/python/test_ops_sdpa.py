# SPDX-License-Identifier: MIT
"""sdpfa_fwd and sdpfa_bwd against torch's scaled_dot_product_attention
and its autograd, on CPU in float32."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from op_testing import assert_same, run, run1

B, H, S, T, E = 2, 3, 5, 7, 8


def qkv(seed: int = 0, s: int = S, t: int = T):
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, s, E, generator=generator)
    k = torch.randn(B, H, t, E, generator=generator)
    v = torch.randn(B, H, t, E, generator=generator)
    return q, k, v


def reference_log_sumexp(q, k, is_causal: bool, scale: float | None):
    scores = q @ k.transpose(-2, -1) * (scale if scale is not None else 1 / math.sqrt(E))
    if is_causal:
        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.logsumexp(scores, -1)


CASES = [(False, None), (True, None), (False, 0.25), (True, 0.5)]


@pytest.mark.parametrize("is_causal, scale", CASES, ids=str)
def test_sdpfa_fwd_matches_torch(is_causal, scale):
    # Causal attention on CPU wants as many queries as keys.
    q, k, v = qkv(seed=1, s=T if is_causal else S)

    def body(fd, tq, tk, tv):
        out, lse, seed, offset = fd.ops.sdpfa_fwd(tq, tk, tv, is_causal=is_causal, scale=scale)
        return out, lse, seed, offset

    out, lse, seed, offset = run(body, q, k, v)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)
    assert_same(out, expected)
    assert_same(lse, reference_log_sumexp(q, k, is_causal, scale))
    # No dropout: no philox state.
    assert_same(seed, torch.zeros(2, dtype=torch.uint64))
    assert_same(offset, torch.tensor(0, dtype=torch.uint64))


@pytest.mark.parametrize("is_causal, scale", CASES, ids=str)
def test_sdpfa_bwd_matches_autograd(is_causal, scale):
    q, k, v = qkv(seed=2, s=T if is_causal else S)
    grad = torch.randn(B, H, q.shape[2], E, generator=torch.Generator().manual_seed(3))

    def body(fd, tq, tk, tv, tg):
        out, lse, seed, offset = fd.ops.sdpfa_fwd(tq, tk, tv, 0.0, is_causal, scale)
        grads = fd.ops.sdpfa_bwd(tg, tq, tk, tv, out, lse, 0.0, is_causal, seed, offset, scale)
        return (out, *grads)

    out, gq, gk, gv = run(body, q, k, v, grad)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    expected = F.scaled_dot_product_attention(*leaves, is_causal=is_causal, scale=scale)
    expected.backward(grad)
    assert_same(out, expected.detach())
    for actual, leaf in zip((gq, gk, gv), leaves):
        assert_same(actual, leaf.grad)


def test_sdpfa_fwd_then_pointwise():
    q, k, v = qkv(seed=4)

    def body(fd, tq, tk, tv):
        return fd.ops.mul(fd.ops.sdpfa_fwd(tq, tk, tv)[0], 2.0)

    assert_same(run1(body, q, k, v), F.scaled_dot_product_attention(q, k, v) * 2.0)


# ------------------------------------------------------------------ CUDA

# On CUDA, attention runs flash attention on small problems and cuDNN's on
# large ones (batch * heads * seq_q * seq_k * head_size >= 2**34).
CUDA_CASES = {"flash": (2, 4, 64, 64), "cudnn": (2, 16, 2048, 128)}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("kernel", CUDA_CASES)
def test_sdpfa_fwd_and_bwd_on_cuda(kernel):
    batch, heads, seq, head_size = CUDA_CASES[kernel]
    generator = torch.Generator().manual_seed(5)
    # Heads interleaved in one buffer, as attention's heads come out of a
    # fused qkv projection: strided query, key and value.
    qkv = torch.randn(batch, seq, 3, heads, head_size, generator=generator)
    grad = torch.randn(batch, heads, seq, head_size, generator=generator)
    qkv, grad = qkv.cuda().bfloat16(), grad.cuda().bfloat16()
    q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))

    def body(fd, tq, tk, tv, tg):
        out, lse, seed, offset = fd.ops.sdpfa_fwd(tq, tk, tv, 0.0, True, None)
        grads = fd.ops.sdpfa_bwd(tg, tq, tk, tv, out, lse, 0.0, True, seed, offset, None)
        return (out, lse, *grads)

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        actual = run(body, q, k, v, grad)
        torch.cuda.synchronize()
    names = " ".join(e.name.lower() for e in prof.events())
    assert kernel in names, f"expected a {kernel} kernel among {names[:500]}"

    # Reference: float64 math on the same bf16 inputs; tolerance: four times
    # the deviation of torch's own bf16 attention from it.
    leaves64 = [t.double().requires_grad_() for t in (q, k, v)]
    out64 = F.scaled_dot_product_attention(*leaves64, is_causal=True)
    out64.backward(grad.double())
    scale = 1 / math.sqrt(head_size)
    lse64 = reference_log_sumexp(leaves64[0].detach(), leaves64[1].detach(), True, scale)
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out16 = F.scaled_dot_product_attention(*leaves, is_causal=True)
    out16.backward(grad)
    expected = [out64, lse64, *(t.grad for t in leaves64)]
    torch_own = [out16, None, *(t.grad for t in leaves)]
    names = ["output", "log_sumexp", "grad_query", "grad_key", "grad_value"]
    for name, a, e, t in zip(names, actual, expected, torch_own):
        e = e.detach()
        assert a.dtype == (torch.float32 if name == "log_sumexp" else torch.bfloat16), name
        error = (a.double() - e).abs().max().item()
        allowed = 1e-4 if t is None else 4 * (t.double() - e).abs().max().item() + 1e-3
        assert error <= allowed, f"{kernel} {name}: error {error:.3g}, allowed {allowed:.3g}"


# ------------------------------------------------------------------ errors


def test_mismatched_heads_are_a_value_error():
    q, k, v = qkv()
    with pytest.raises(
        ValueError, match="sdpfa_fwd: the numbers of heads of query and key must match, got 3 and 2"
    ):
        run1(lambda fd, a, b, c: fd.ops.sdpfa_fwd(a, b, c)[0], q, k[:, :2], v, static_sizes=True)


def test_mismatched_head_sizes_are_a_value_error():
    q, k, v = qkv()
    with pytest.raises(
        ValueError, match="sdpfa_fwd: the head sizes of query and key must match, got 8 and 6"
    ):
        run1(lambda fd, a, b, c: fd.ops.sdpfa_fwd(a, b, c)[0], q, k[..., :6], v, static_sizes=True)


def test_a_value_head_size_other_than_the_querys_is_a_value_error():
    # ATen's flash attention kernels take one head size for query, key and value.
    q, k, v = qkv()
    with pytest.raises(
        ValueError, match="sdpfa_fwd: the head sizes of query and value must match, got 8 and 4"
    ):
        run1(lambda fd, a, b, c: fd.ops.sdpfa_fwd(a, b, c)[0], q, k, v[..., :4], static_sizes=True)


def test_three_dimensional_query_is_a_value_error():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="sdpfa_fwd: query must be 4-dimensional"):
        run1(lambda fd, a, b, c: fd.ops.sdpfa_fwd(a, b, c)[0], q[0], k, v)


def test_integer_attention_is_a_type_error():
    q, k, v = (t.to(torch.int64) for t in qkv())
    with pytest.raises(
        TypeError, match="sdpfa_fwd: query must be a floating-point tensor, got Int"
    ):
        run1(lambda fd, a, b, c: fd.ops.sdpfa_fwd(a, b, c)[0], q, k, v)


def test_bwd_log_sumexp_of_the_wrong_shape_is_a_value_error():
    q, k, v = qkv()
    grad = torch.ones(B, H, S, E)

    def body(fd, tq, tk, tv, tg):
        out, lse, seed, offset = fd.ops.sdpfa_fwd(tq, tk, tv)
        return fd.ops.sdpfa_bwd(tg, tq, tk, tv, out, out, 0.0, False, seed, offset, None)[0]

    with pytest.raises(ValueError, match="sdpfa_bwd: log_sumexp must be 3-dimensional"):
        run1(body, q, k, v, grad)
