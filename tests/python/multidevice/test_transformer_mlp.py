# SPDX-License-Identifier: MIT
"""The MLP block, tensor-parallel and sequence-parallel, forward and
backward, against plain torch on the same global inputs.

Run under ``mpirun -np N`` (N = 1, 2, 4): every process builds the same
global inputs, passes its shards and compares its output shards.
"""

from __future__ import annotations

import pytest
import torch
from transformer_blocks import mlp_backward, mlp_forward, mlp_reference

from mdfuser import DataType
from mdfuser.multidevice import shard_tensor

H = 16


def tolerances(dtype: torch.dtype) -> dict:
    # torch's own test tolerances for the dtype, loosened for sums of 4h
    # products taken in another order.
    return {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}[
        dtype
    ]


def inputs(t: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return dict(
        x=torch.randn(t, H, generator=g),
        w1=torch.randn(4 * H, H, generator=g) / 4,
        b1=torch.randn(4 * H, generator=g),
        w2=torch.randn(H, 4 * H, generator=g) / 8,
        b2=torch.randn(H, generator=g),
        grad_y=torch.randn(t, H, generator=g),
    )


def run(test, block, full: dict[str, torch.Tensor], dtype: torch.dtype) -> list[torch.Tensor]:
    args = [test.shard(full[name].to(dtype), tv) for name, tv in block.inputs.items()]
    return block.fd.execute(args)


def expect(test, block, name: str, got: torch.Tensor, want: torch.Tensor, dtype) -> None:
    # The output as mdfuser sharded it (the definition may leave it to
    # propagation).
    index = list(block.outputs).index(name)
    shard = shard_tensor(want.to(dtype), block.fd.output_tensors()[index])
    assert got.shape == shard.shape, name
    assert got.dtype == dtype, name
    torch.testing.assert_close(got.cpu(), shard, **tolerances(dtype), msg=name)


@pytest.mark.parametrize("streams", [1, 2])
@pytest.mark.parametrize("mode", ["tp", "sp"])
def test_forward(multidevice_test, mode, streams):
    d = multidevice_test.size
    t = 4 * d * streams
    full = inputs(t, seed=7)
    block = mlp_forward(H, d, mode, streams, DataType.Float)
    (y,) = run(multidevice_test, block, full, torch.float32)
    want, _ = mlp_reference(full["x"], full["w1"], full["b1"], full["w2"], full["b2"])
    expect(multidevice_test, block, "y", y, want, torch.float32)


@pytest.mark.parametrize("streams", [1, 2])
@pytest.mark.parametrize("mode", ["tp", "sp"])
def test_backward(multidevice_test, mode, streams):
    d = multidevice_test.size
    t = 4 * d * streams
    full = inputs(t, seed=11)
    leaves = {k: full[k].double().requires_grad_() for k in ("x", "w1", "b1", "w2", "b2")}
    y, pre = mlp_reference(**leaves)
    y.backward(full["grad_y"].double())
    full["pre"] = pre.detach()

    block = mlp_backward(H, d, mode, streams, DataType.Float)
    got = dict(zip(block.outputs, run(multidevice_test, block, full, torch.float32)))
    for name, leaf in (("x", "x"), ("w1", "w1"), ("b1", "b1"), ("w2", "w2"), ("b2", "b2")):
        expect(
            multidevice_test,
            block,
            f"grad_{name}",
            got[f"grad_{name}"],
            leaves[leaf].grad,
            torch.float32,
        )
