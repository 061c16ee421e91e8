# SPDX-License-Identifier: MIT
"""A whole pre-norm transformer layer (layer_norm, attention, residual,
layer_norm, MLP, residual) forward, tensor-parallel and sequence-parallel,
against plain torch on the same global inputs."""

from __future__ import annotations

import pytest
import torch
from helpers import stream_loop_statements, tensor_name
from transformer_blocks import Attention, layer_forward, layer_reference

from mdfuser import DataType
from mdfuser.multidevice import shard_tensor


def layer_inputs(a: Attention, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    e = a.e

    def randn(*shape, scale=1.0):
        return torch.randn(*shape, generator=g) * scale

    return dict(
        x=randn(a.seq, a.batch, e),
        ln0_w=1 + randn(e, scale=0.1),
        ln0_b=randn(e, scale=0.1),
        w_qkv=randn(3 * e, e, scale=0.25),
        b_qkv=randn(3 * e, scale=0.1),
        w_o=randn(e, e, scale=0.25),
        b_o=randn(e, scale=0.1),
        ln1_w=1 + randn(e, scale=0.1),
        ln1_b=randn(e, scale=0.1),
        w1=randn(4 * e, e, scale=0.25),
        b1=randn(4 * e, scale=0.1),
        w2=randn(e, 4 * e, scale=0.125),
        b2=randn(e, scale=0.1),
    )


@pytest.mark.parametrize("streams", [1, 2])
@pytest.mark.parametrize("mode", ["tp", "sp"])
def test_forward(multidevice_test, mode, streams):
    d = multidevice_test.size
    a = Attention(seq=4 * d, batch=2, e=16 * d, heads=2 * d)
    test = multidevice_test
    full = layer_inputs(a, seed=13)
    block = layer_forward(a, d, mode, streams, dtype=test.mdfuser_dtype)
    (y,) = block.fd.execute(
        [test.shard(full[k].to(test.dtype), tv) for k, tv in block.inputs.items()],
        backend=test.collective_backend,
    )
    want, torch_result = test.references(lambda **t: layer_reference(t, a), full)
    assert y.dtype == torch_result.dtype
    shard = shard_tensor(want.cpu(), block.fd.output_tensors()[0])
    test.assert_close(y, shard, test.tolerance(want, torch_result))
    host_ir = block.fd.last_host_ir()
    if d > 1 and mode == "sp":
        # Gathered in front of each column-parallel linear, reduce-scattered
        # behind each row-parallel one.
        assert host_ir.count("type=Allgather") == 2
        assert host_ir.count("type=ReduceScatter") == 2
        assert "type=Allreduce" not in host_ir
    if d > 1 and mode == "tp":
        assert host_ir.count("type=Allreduce") == 2
        assert "type=Allgather" not in host_ir


@pytest.mark.parametrize("mode", ["tp", "sp"])
def test_stream_chunks_hold_the_whole_layer(multidevice_test, mode):
    """In bfloat16 each layer_norm upcasts its weight and bias, which no
    stream chunk splits: the upcasts run once in front of the Stream loop,
    so one loop holds the whole layer and each chunk runs both layer_norms
    fused, weight and bias included, as without stream chunks. Both
    schedules are checked against torch: they sum the partial products of
    the row-parallel linears in different orders (at d = 4 the unchunked
    layer may take NCCL's collectives, the chunked one rings), so in
    bfloat16 they differ from each other by a few roundings."""
    test = multidevice_test
    d = test.size
    a = Attention(seq=4 * d, batch=2, e=16 * d, heads=2 * d)
    full = layer_inputs(a, seed=13)
    want, torch_result = test.references(lambda **t: layer_reference(t, a), full, torch.bfloat16)
    tolerance = test.tolerance(want, torch_result)
    for streams in (1, 2):
        block = layer_forward(a, d, mode, streams, dtype=DataType.BFloat16)
        (y,) = block.fd.execute(
            [test.shard(full[k].to(torch.bfloat16), tv) for k, tv in block.inputs.items()]
        )
        shard = shard_tensor(want.cpu(), block.fd.output_tensors()[0])
        test.assert_close(y, shard, tolerance, f"{streams} stream(s)")
    program = block.fd.last_host_ir()
    loops = stream_loop_statements(program)
    assert len(loops) == 2, program  # the Stream loop and its join loop
    fused = [s for s in loops[0] if "= layer_norm(" in s]
    assert len(fused) == 2, program
    for statement, ln in zip(fused, ("ln0", "ln1")):
        for param in ("w", "b"):
            assert tensor_name(block.inputs[f"{ln}_{param}"]) in statement, statement
    assert "= cast(" not in program
