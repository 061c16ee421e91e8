# SPDX-License-Identifier: MIT
"""Attention with heads across the devices, written as nvfuser_direct's
multidevice tests write it: query, key and value [d, b, h/d, s, e] with the
device axis a logical axis of its own, or [b, h, s, e] with the heads axis
split across the devices (a loop split); each in the BHSE layout or the
BSHE one (heads inside sequence in memory). Forward and backward against
torch's attention on the same global inputs; the outputs are laid out like
the query (contiguous in BHSE, sequence-major in BSHE)."""

from __future__ import annotations

from enum import Enum, auto

import pytest
import torch

import mdfuser
from mdfuser import DataType, FusionDefinition

B, S, H, E = 2, 16, 12, 96


class QkvFormat(Enum):
    BHSE = auto()
    BSHE = auto()


def expected_attention(test, dtype):
    """Global inputs and torch's forward and gradients, causal, no dropout."""
    g = torch.Generator().manual_seed(21)
    q, k, v, out_grad = (torch.randn(B, H, S, E // H, generator=g).to(dtype) for _ in range(4))
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = torch.nn.functional.scaled_dot_product_attention(*leaves, dropout_p=0.0, is_causal=True)
    out.backward(out_grad)
    return (q, k, v, out_grad), [out.detach(), *(t.grad for t in leaves)]


def tolerance(dtype):
    return dict(rtol=1.6e-2, atol=1e-2) if dtype == torch.bfloat16 else dict(rtol=1e-5, atol=1e-5)


def define_attention(fd, shape, stride_order, dtype):
    q, k, v, out_grad = (
        fd.define_tensor(shape=shape, contiguity=True, dtype=dtype, stride_order=stride_order)
        for _ in range(4)
    )
    dropout_p = fd.define_scalar(0.0, dtype=DataType.Double)
    is_causal = fd.define_scalar(True, dtype=DataType.Bool)
    attn, log_sumexp, seed, offset = fd.ops.sdpfa_fwd(q, k, v, dropout_p, is_causal, scale=None)
    q_grad, k_grad, v_grad = fd.ops.sdpfa_bwd(
        out_grad, q, k, v, attn, log_sumexp, dropout_p, is_causal, seed, offset, scale=None
    )
    fd.add_output(attn)
    for grad in (q_grad, k_grad, v_grad):
        fd.add_output(grad)


@pytest.mark.parametrize("qkv_format", [QkvFormat.BHSE, QkvFormat.BSHE])
def test_sdpa_with_a_device_axis_of_its_own(multidevice_test, qkv_format):
    d, rank = multidevice_test.size, multidevice_test.rank
    if H % d != 0:
        pytest.skip(f"the {H} heads do not split evenly across {d} devices")
    dtype = multidevice_test.dtype
    stride_order = {QkvFormat.BHSE: [4, 3, 2, 1, 0], QkvFormat.BSHE: [4, 3, 1, 2, 0]}[qkv_format]
    mesh = mdfuser.multidevice.DeviceMesh(torch.arange(d))
    with FusionDefinition() as fd:
        define_attention(
            fd, [d, B, H // d, S, E // H], stride_order, multidevice_test.mdfuser_dtype
        )
        for t in fd.fusion.inputs():
            t.set_device_mesh(mesh)
            t.axis(0).parallelize(mdfuser.ParallelType.mesh_x)

    def head_parallelize(t):
        t = t.detach().view([B, d, H // d, S, E // H]).narrow(1, rank, 1)
        if qkv_format == QkvFormat.BHSE:
            return t.transpose(0, 1).contiguous()
        return t.permute(1, 0, 3, 2, 4).contiguous().transpose(2, 3)

    inputs, expected = expected_attention(multidevice_test, dtype)
    outputs = fd.execute([head_parallelize(t).to(multidevice_test.device) for t in inputs])
    for name, actual, want in zip(("out", "q_grad", "k_grad", "v_grad"), outputs, expected):
        if qkv_format == QkvFormat.BHSE:
            assert actual.is_contiguous(), name
        else:
            assert actual.transpose(2, 3).is_contiguous(), (name, actual.stride())
        torch.testing.assert_close(
            actual.cpu(),
            head_parallelize(want),
            **tolerance(dtype),
            msg=lambda m, n=name: f"{n}: {m}",
        )


@pytest.mark.parametrize("qkv_format", [QkvFormat.BHSE, QkvFormat.BSHE])
def test_sdpa_loop_split(multidevice_test, qkv_format):
    d, rank = multidevice_test.size, multidevice_test.rank
    if H % d != 0:
        pytest.skip(f"the {H} heads do not split evenly across {d} devices")
    dtype = multidevice_test.dtype
    stride_order = {QkvFormat.BHSE: [3, 2, 1, 0], QkvFormat.BSHE: [3, 1, 2, 0]}[qkv_format]
    mesh = mdfuser.multidevice.DeviceMesh(torch.arange(d))
    with FusionDefinition() as fd:
        q, k, v, out_grad = (
            fd.define_tensor(
                shape=[-1, H, -1, E // H],
                dtype=multidevice_test.mdfuser_dtype,
                stride_order=stride_order,
            )
            for _ in range(4)
        )
        dropout_p = fd.define_scalar(0.0, dtype=DataType.Double)
        is_causal = fd.define_scalar(True, dtype=DataType.Bool)
        attn, log_sumexp, seed, offset = fd.ops.sdpfa_fwd(q, k, v, dropout_p, is_causal, scale=None)
        grads = fd.ops.sdpfa_bwd(
            out_grad, q, k, v, attn, log_sumexp, dropout_p, is_causal, seed, offset, scale=None
        )
        fd.add_output(attn)
        for grad in grads:
            fd.add_output(grad)
        for t in fd.fusion.inputs():
            t.set_device_mesh(mesh)
            t.outer_split(1, d)
            t.axis(1).parallelize(mdfuser.ParallelType.mesh_x)

    def shard(t):
        return t.detach().chunk(d, 1)[rank]

    def reformat(t):
        if qkv_format == QkvFormat.BHSE:
            return t
        return t.transpose(1, 2).contiguous().transpose(1, 2)

    inputs, expected = expected_attention(multidevice_test, dtype)
    outputs = fd.execute([reformat(shard(t)).to(multidevice_test.device) for t in inputs])
    for name, actual, want in zip(("attn", "q_grad", "k_grad", "v_grad"), outputs, expected):
        if qkv_format == QkvFormat.BHSE:
            assert actual.is_contiguous(), name
        else:
            assert actual.transpose(1, 2).is_contiguous(), (name, actual.stride())
        torch.testing.assert_close(
            actual.cpu(), shard(want), **tolerance(dtype), msg=lambda m, n=name: f"{n}: {m}"
        )
