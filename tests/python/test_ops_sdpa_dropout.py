# SPDX-License-Identifier: MIT
"""sdpfa_fwd and sdpfa_bwd with dropout, on CPU in float32: the forward
returns the philox state its mask was drawn from, the backward draws the
same mask from it. Checked against torch's autograd through attention
written as its matrix products with that mask (mdfuser.attention's
dropout_mask)."""

from __future__ import annotations

import math

import pytest
import torch

from mdfuser import DataType, FusionDefinition
from mdfuser.attention import dropout_mask

B, H, S, T, E = 2, 3, 6, 6, 8
P = 0.3


def tensors(seed: int, *shapes):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=generator) for shape in shapes]


def masked_attention(q, k, v, keep, p: float, is_causal: bool, scale: float | None):
    """Plain torch attention with the given dropout mask; differentiable."""
    scale = scale if scale is not None else 1 / math.sqrt(q.shape[-1])
    scores = q @ k.transpose(-2, -1) * scale
    if is_causal:
        allowed = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, -1)
    return (weights * keep / (1 - p)) @ v, torch.logsumexp(scores, -1)


def define_fwd_bwd(fd, shapes, p, is_causal, scale):
    q, k, v, g = (fd.define_tensor(list(s)) for s in shapes)
    out, lse, seed, offset = fd.ops.sdpfa_fwd(q, k, v, p, is_causal, scale)
    grads = fd.ops.sdpfa_bwd(g, q, k, v, out, lse, p, is_causal, seed, offset, scale)
    for t in (out, lse, seed, offset, *grads):
        fd.add_output(t)


def expected(q, k, v, grad, keep, p, is_causal, scale):
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out, lse = masked_attention(*leaves, keep, p, is_causal, scale)
    out.backward(grad)
    return out.detach(), lse.detach(), [t.grad for t in leaves]


@pytest.mark.parametrize("is_causal, scale", [(False, None), (True, 0.5)], ids=str)
def test_forward_and_backward_match_torch_with_the_same_mask(is_causal, scale):
    shapes = [(B, H, S, E), (B, H, T, E), (B, H, T, E), (B, H, S, E)]
    q, k, v, grad = tensors(1, *shapes)
    with FusionDefinition() as fd:
        define_fwd_bwd(fd, shapes, P, is_causal, scale)
    out, lse, seed, offset, gq, gk, gv = fd.execute([q, k, v, grad])
    assert seed.dtype == torch.uint64 and seed.shape == (2,)
    assert offset.dtype == torch.uint64 and offset.shape == ()
    keep = dropout_mask(seed, (B, H, S, T), P)
    # A mask that drops some weights and keeps most.
    assert 0 < (~keep).sum() < keep.sum()
    want_out, want_lse, want_grads = expected(q, k, v, grad, keep, P, is_causal, scale)
    torch.testing.assert_close(out, want_out)
    torch.testing.assert_close(lse, want_lse)
    for name, actual, want in zip(("query", "key", "value"), (gq, gk, gv), want_grads):
        torch.testing.assert_close(actual, want, msg=lambda m, n=name: f"grad_{n}: {m}")
    # Not the attention without dropout.
    no_dropout, _ = masked_attention(q, k, v, torch.ones_like(keep), 0.0, is_causal, scale)
    assert not torch.allclose(out, no_dropout)


def test_a_backward_fusion_takes_the_forward_fusions_philox_state():
    """As a transformer's backward is written: the philox tensors are inputs
    of their own, UInt64 [2] and []."""
    shapes = [(B, H, S, E), (B, H, T, E), (B, H, T, E), (B, H, S, E)]
    q, k, v, grad = tensors(2, *shapes)
    with FusionDefinition() as fwd:
        tq, tk, tv = (fwd.define_tensor(list(s)) for s in shapes[:3])
        dropout_p = fwd.define_scalar(P, dtype=DataType.Double)
        is_causal = fwd.define_scalar(True, dtype=DataType.Bool)
        for t in fwd.ops.sdpfa_fwd(tq, tk, tv, dropout_p, is_causal, scale=None):
            fwd.add_output(t)
    with FusionDefinition() as bwd:
        tq, tk, tv, tg, to = (bwd.define_tensor(list(s)) for s in (*shapes, shapes[0]))
        lse = bwd.define_tensor([B, H, S], dtype=DataType.Float)
        seed = bwd.define_tensor(shape=[2], dtype=DataType.UInt64)
        offset = bwd.define_tensor(shape=[], dtype=DataType.UInt64)
        dropout_p = bwd.define_scalar(P, dtype=DataType.Double)
        is_causal = bwd.define_scalar(True, dtype=DataType.Bool)
        grads = bwd.ops.sdpfa_bwd(
            tg, tq, tk, tv, to, lse, dropout_p, is_causal, seed, offset, scale=None
        )
        for t in grads:
            bwd.add_output(t)
    out, lse, seed, offset = fwd.execute([q, k, v])
    gq, gk, gv = bwd.execute([q, k, v, grad, out, lse, seed, offset])
    keep = dropout_mask(seed, (B, H, S, T), P)
    want_out, _, want_grads = expected(q, k, v, grad, keep, P, True, None)
    torch.testing.assert_close(out, want_out)
    for actual, want in zip((gq, gk, gv), want_grads):
        torch.testing.assert_close(actual, want)
    # Another state, another mask: the backward follows the state it is given.
    other = (seed.view(torch.int64) + torch.tensor([1, 0])).view(torch.uint64)
    gq_other, _, _ = bwd.execute([q, k, v, grad, out, lse, other, offset])
    assert not torch.allclose(gq_other, gq)


def test_each_execute_draws_a_new_mask_and_a_state_gives_one_mask():
    shapes = [(B, H, S, E)] * 4
    q, k, v, grad = tensors(3, *shapes)
    with FusionDefinition() as fd:
        define_fwd_bwd(fd, shapes, P, False, None)
    first = fd.execute([q, k, v, grad])
    second = fd.execute([q, k, v, grad])
    assert not torch.equal(first[2], second[2])
    assert not torch.allclose(first[0], second[0])
    assert torch.equal(
        dropout_mask(first[2], (B, H, S, S), P), dropout_mask(first[2], (B, H, S, S), P)
    )


def test_the_mask_keeps_one_minus_p_of_the_weights():
    seed = torch.tensor([12345, 0], dtype=torch.uint64)
    for p in (0.1, 0.5):
        keep = dropout_mask(seed, (4, 4, 64, 64), p)
        assert abs(keep.double().mean().item() - (1 - p)) < 0.01, p
    # Each (batch, head) pair draws its own mask.
    keep = dropout_mask(seed, (2, 2, 16, 16), 0.5)
    assert not torch.equal(keep[0, 0], keep[0, 1]) and not torch.equal(keep[0, 0], keep[1, 0])


def test_five_dimensional_operands_with_a_device_axis_of_their_own():
    """[d, b, h/d, s, e] on one process: the device axis is another batch
    axis, and head h = i * h/d + j of the global attention gets the mask of
    head h."""
    d = 2
    q4, k4, v4, g4 = tensors(4, *[(B, 2 * d, S, E)] * 4)

    def split(t):  # [b, h, s, e] -> [d, b, h/d, s, e]
        return t.view(B, d, 2, S, E).transpose(0, 1).contiguous()

    def merge(t):
        return t.transpose(0, 1).reshape(B, 2 * d, *t.shape[3:])

    shapes = [(d, B, 2, S, E)] * 4
    for p in (0.0, P):
        with FusionDefinition() as fd:
            define_fwd_bwd(fd, shapes, p, True, None)
        out, lse, seed, _, gq, gk, gv = fd.execute([split(t) for t in (q4, k4, v4, g4)])
        assert out.shape == (d, B, 2, S, E) and lse.shape == (d, B, 2, S)
        keep = dropout_mask(seed, (B, 2 * d, S, S), p)
        want_out, want_lse, want_grads = expected(q4, k4, v4, g4, keep, p, True, None)
        torch.testing.assert_close(merge(out), want_out)
        torch.testing.assert_close(lse.transpose(0, 1).reshape(B, 2 * d, S), want_lse)
        for actual, want in zip((gq, gk, gv), want_grads):
            torch.testing.assert_close(merge(actual), want)


# ------------------------------------------------------------------ errors


def fwd_with(dropout_p):
    with FusionDefinition() as fd:
        q = fd.define_tensor([B, H, S, E])
        fd.add_output(fd.ops.sdpfa_fwd(q, q, q, dropout_p=dropout_p)[0])


@pytest.mark.parametrize("p", [1.0, -0.1, 2.5, float("nan")])
def test_dropout_p_outside_zero_to_one_is_a_value_error(p):
    with pytest.raises(
        ValueError,
        match=rf"sdpfa_fwd: dropout_p={p:g} is out of range; expected a probability in \[0, 1\)",
    ):
        fwd_with(p)


def test_dropout_p_of_the_wrong_type_is_a_type_error():
    with pytest.raises(TypeError, match="sdpfa_fwd: dropout_p must be a number or None, got"):
        fwd_with("0.1")


def test_dropout_p_as_a_scalar_input_is_a_type_error():
    with pytest.raises(
        TypeError, match="sdpfa_fwd: dropout_p must be known when the fusion is defined"
    ):
        with FusionDefinition() as fd:
            q = fd.define_tensor([B, H, S, E])
            p = fd.define_scalar(None, dtype=DataType.Double)
            fd.add_output(fd.ops.sdpfa_fwd(q, q, q, p)[0])


def bwd_with(seed_shape, seed_dtype, offset_shape=(), offset_dtype=DataType.UInt64, p=P):
    with FusionDefinition() as fd:
        q = fd.define_tensor([B, H, S, E])
        out, lse, _, _ = fd.ops.sdpfa_fwd(q, q, q, p)
        seed = fd.define_tensor(list(seed_shape), dtype=seed_dtype)
        offset = fd.define_tensor(list(offset_shape), dtype=offset_dtype)
        fd.add_output(fd.ops.sdpfa_bwd(q, q, q, q, out, lse, p, False, seed, offset, None)[0])


def test_philox_state_of_the_wrong_dtype_is_a_type_error():
    with pytest.raises(
        TypeError,
        match=r"sdpfa_bwd: philox_seed must be a UInt64 tensor of shape \[2\] "
        r"\(as sdpfa_fwd returns it\), got Int",
    ):
        bwd_with([2], DataType.Int)
    with pytest.raises(
        TypeError, match=r"sdpfa_bwd: philox_offset must be a UInt64 tensor of shape \[\]"
    ):
        bwd_with([2], DataType.UInt64, offset_dtype=DataType.Float)


def test_philox_state_of_the_wrong_shape_is_a_value_error():
    with pytest.raises(ValueError, match=r"sdpfa_bwd: philox_seed must have shape \[2\]"):
        bwd_with([3], DataType.UInt64)
    with pytest.raises(ValueError, match=r"sdpfa_bwd: philox_offset must have shape \[\]"):
        bwd_with([2], DataType.UInt64, offset_shape=[2])


def test_philox_state_that_is_not_a_tensor_is_a_type_error():
    with pytest.raises(TypeError, match="sdpfa_bwd: operand 8 must be a tensor, got"):
        with FusionDefinition() as fd:
            q = fd.define_tensor([B, H, S, E])
            out, lse, _, offset = fd.ops.sdpfa_fwd(q, q, q, P)
            fd.ops.sdpfa_bwd(q, q, q, q, out, lse, P, False, 7, offset, None)


def test_dropout_without_the_philox_state_is_a_value_error():
    with pytest.raises(
        ValueError,
        match="sdpfa_bwd: dropout_p=0.3 needs the philox_seed and philox_offset "
        "that sdpfa_fwd returned, got None",
    ):
        with FusionDefinition() as fd:
            q = fd.define_tensor([B, H, S, E])
            out, lse, _, _ = fd.ops.sdpfa_fwd(q, q, q, P)
            fd.ops.sdpfa_bwd(q, q, q, q, out, lse, P, False, None, None, None)


def test_a_philox_state_of_another_shape_at_run_time_is_a_value_error():
    """A seed defined with a symbolic extent is checked when it arrives."""
    with FusionDefinition() as fd:
        q = fd.define_tensor([B, H, S, E])
        out, lse, _, _ = fd.ops.sdpfa_fwd(q, q, q, P)
        seed = fd.define_tensor([-1], dtype=DataType.UInt64)
        offset = fd.define_tensor([], dtype=DataType.UInt64)
        fd.add_output(fd.ops.sdpfa_bwd(q, q, q, q, out, lse, P, False, seed, offset, None)[0])
    q_value = torch.randn(B, H, S, E)
    with pytest.raises(ValueError, match="philox_seed and 2 must match, got 3 and 2"):
        fd.execute(
            [q_value, torch.zeros(3, dtype=torch.uint64), torch.zeros((), dtype=torch.uint64)]
        )


def test_the_mask_of_a_seed_that_is_not_philox_state_is_a_type_error():
    with pytest.raises(TypeError, match="philox_seed must be the UInt64 tensor of 2 elements"):
        dropout_mask(torch.tensor([1, 2]), (1, 1, 2, 2), 0.5)
