# SPDX-License-Identifier: MIT
"""Attention with dropout, heads across the devices: each device draws the
mask of its own heads from the philox state every rank shares, so its
outputs are its part of plain torch's attention on the global inputs with
the global mask (mdfuser.attention's dropout_mask), and the backward draws
the same mask again from the state the forward returned. CPU only: on CUDA
the mask is flash attention's, which this cannot reproduce."""

from __future__ import annotations

import math

import pytest
import torch

from mdfuser import DataType, FusionDefinition, ParallelType
from mdfuser.attention import dropout_mask
from mdfuser.multidevice import DeviceMesh

B, S, E = 2, 8, 8
P = 0.25


def heads(d: int) -> int:
    return 2 * d


def masked_attention(q, k, v, keep, p: float):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    allowed = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), -1)
    return (weights * keep / (1 - p)) @ v


def shard_heads(tv, mesh, d: int) -> None:
    tv.set_device_mesh(mesh)
    tv.outer_split(1, d)
    tv.axis(1).parallelize(ParallelType.mesh_x)


def gathered_seeds(test, seed: torch.Tensor) -> torch.Tensor:
    """Every rank's philox_seed, [d, 2], gathered by a fusion of its own."""
    d = test.size
    mesh = DeviceMesh(torch.arange(d))
    with FusionDefinition() as fd:
        x = fd.define_tensor([d, 2], dtype=DataType.Int)
        y = fd.ops.set(x)
        fd.add_output(y)
        x.set_device_mesh(mesh)
        x.outer_split(0, d)
        x.axis(0).parallelize(ParallelType.mesh_x)
        y.set_device_mesh(mesh)
    mine = seed.view(torch.int64).view(1, 2).to(test.device)
    (all_seeds,) = fd.execute([mine])
    return all_seeds.cpu()


@pytest.fixture
def cpu_only(multidevice_test):
    if multidevice_test.device.type != "cpu":
        pytest.skip("the dropout mask of CUDA attention is flash attention's")
    return multidevice_test


def test_forward_and_backward_with_heads_across_devices(cpu_only):
    test = cpu_only
    d, rank = test.size, test.rank
    h = heads(d)
    mesh = DeviceMesh(torch.arange(d))
    g = torch.Generator().manual_seed(11)
    q, k, v, grad = (torch.randn(B, h, S, E, generator=g) for _ in range(4))

    with FusionDefinition() as fd:
        tq, tk, tv, tg = (fd.define_tensor([B, h, S, E]) for _ in range(4))
        dropout_p = fd.define_scalar(P, dtype=DataType.Double)
        is_causal = fd.define_scalar(True, dtype=DataType.Bool)
        out, lse, seed, offset = fd.ops.sdpfa_fwd(tq, tk, tv, dropout_p, is_causal, scale=None)
        grads = fd.ops.sdpfa_bwd(
            tg, tq, tk, tv, out, lse, dropout_p, is_causal, seed, offset, scale=None
        )
        for t in (out, seed, *grads):
            fd.add_output(t)
        for t in fd.fusion.inputs():
            shard_heads(t, mesh, d)

    def local(t):
        return t.chunk(d, 1)[rank]

    out, seed, gq, gk, gv = fd.execute([local(t) for t in (q, k, v, grad)])
    # Every rank drew from one state.
    assert torch.equal(gathered_seeds(test, seed), seed.view(torch.int64).expand(d, 2))
    keep = dropout_mask(seed, (B, h, S, S), P)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    want = masked_attention(*leaves, keep, P)
    want.backward(grad)
    assert out.shape == (B, h // d, S, E)
    torch.testing.assert_close(out, local(want.detach()))
    for name, actual, leaf in zip(("query", "key", "value"), (gq, gk, gv), leaves):
        torch.testing.assert_close(actual, local(leaf.grad), msg=lambda m, n=name: f"grad_{n}: {m}")
    assert "Communication" not in fd.last_host_ir()


def test_a_backward_fusion_with_the_forwards_state_as_inputs(cpu_only):
    """As a transformer's backward is written: sdpa_out and lse sharded on
    heads, the philox tensors replicated inputs of the backward."""
    test = cpu_only
    d, rank = test.size, test.rank
    h = heads(d)
    mesh = DeviceMesh(torch.arange(d))
    g = torch.Generator().manual_seed(12)
    q, k, v, grad = (torch.randn(B, h, S, E, generator=g) for _ in range(4))

    with FusionDefinition() as fwd:
        tq, tk, tv = (fwd.define_tensor([B, h, S, E]) for _ in range(3))
        for t in fwd.ops.sdpfa_fwd(tq, tk, tv, P, True, None):
            fwd.add_output(t)
        for t in fwd.fusion.inputs():
            shard_heads(t, mesh, d)
    with FusionDefinition() as bwd:
        tq, tk, tv, tg, to = (bwd.define_tensor([B, h, S, E]) for _ in range(5))
        tl = bwd.define_tensor([B, h, S], dtype=DataType.Float)
        seed = bwd.define_tensor([2], dtype=DataType.UInt64)
        offset = bwd.define_tensor([], dtype=DataType.UInt64)
        for t in bwd.ops.sdpfa_bwd(tg, tq, tk, tv, to, tl, P, True, seed, offset, None):
            bwd.add_output(t)
        for t in bwd.fusion.inputs():
            t.set_device_mesh(mesh)
        for t in (tq, tk, tv, tg, to, tl):
            shard_heads(t, mesh, d)

    def local(t):
        return t.chunk(d, 1)[rank]

    out, lse, seed_value, offset_value = fwd.execute([local(t) for t in (q, k, v)])
    gq, gk, gv = bwd.execute(
        [*(local(t) for t in (q, k, v, grad)), out, lse, seed_value, offset_value]
    )
    keep = dropout_mask(seed_value, (B, h, S, S), P)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    want = masked_attention(*leaves, keep, P)
    want.backward(grad)
    torch.testing.assert_close(out, local(want.detach()))
    for actual, leaf in zip((gq, gk, gv), leaves):
        torch.testing.assert_close(actual, local(leaf.grad))


def test_dropout_per_stream_chunk_is_refused_before_anything_runs(multidevice_test):
    d = multidevice_test.size
    h = heads(d)
    mesh = DeviceMesh(torch.arange(d))
    with FusionDefinition() as fd:
        # bf16 on GPUs, where attention takes no float32.
        tq = fd.define_tensor([B, h, S, E], dtype=multidevice_test.mdfuser_dtype)
        fd.add_output(fd.ops.sdpfa_fwd(tq, tq, tq, P, True, None)[0])
        shard_heads(tq, mesh, d)
        tq.outer_split(0, 2)
        tq.axis(0).parallelize(ParallelType.stream)
    q = torch.zeros(B, h // d, S, E, device=multidevice_test.device, dtype=multidevice_test.dtype)
    with pytest.raises(
        ValueError, match=r"sdpfa_fwd with dropout_p=0.25 cannot run per stream chunk"
    ):
        fd.execute([q])
