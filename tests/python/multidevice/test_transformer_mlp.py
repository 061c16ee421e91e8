# SPDX-License-Identifier: MIT
"""The MLP block, tensor-parallel and sequence-parallel, forward and
backward, against plain torch on the same global inputs.

Run under ``mpirun -np N``: every process builds the same global inputs,
passes its shards and compares its output shards. The hidden size h is 16
where 4h (the features the devices split) splits over N, else the nearest
below that does (15 on 3 processes).
"""

from __future__ import annotations

import pytest
import torch
from helpers import row_parallel_hidden_near
from transformer_blocks import mlp_backward, mlp_forward, mlp_reference

from mdfuser.multidevice import shard_tensor


def inputs(t: int, h: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return dict(
        x=torch.randn(t, h, generator=g),
        w1=torch.randn(4 * h, h, generator=g) / 4,
        b1=torch.randn(4 * h, generator=g),
        w2=torch.randn(h, 4 * h, generator=g) / 8,
        b2=torch.randn(h, generator=g),
        grad_y=torch.randn(t, h, generator=g),
    )


def run(test, block, full: dict[str, torch.Tensor], **options) -> list[torch.Tensor]:
    args = [test.shard(full[name].to(test.dtype), tv) for name, tv in block.inputs.items()]
    return block.fd.execute(args, **options)


def expect(test, block, name: str, got: torch.Tensor, want, torch_result) -> None:
    # The output as mdfuser sharded it (the definition may leave it to
    # propagation).
    index = list(block.outputs).index(name)
    shard = shard_tensor(want.detach().cpu(), block.fd.output_tensors()[index])
    assert got.shape == shard.shape, name
    assert got.dtype == test.dtype, name
    test.assert_close(got, shard, test.tolerance(want, torch_result), msg=name)


def forward(x, w1, b1, w2, b2, grad_y):
    return mlp_reference(x, w1, b1, w2, b2)[0]


def backward(x, w1, b1, w2, b2, grad_y):
    """The gradients by torch's autograd and the saved pre-activation."""
    leaves = {
        k: v.clone().requires_grad_() for k, v in dict(x=x, w1=w1, b1=b1, w2=w2, b2=b2).items()
    }
    y, pre = mlp_reference(**leaves)
    y.backward(grad_y)
    return {f"grad_{k}": v.grad for k, v in leaves.items()}, pre.detach()


@pytest.mark.parametrize("streams", [1, 2])
@pytest.mark.parametrize("mode", ["tp", "sp"])
def test_forward(multidevice_test, mode, streams):
    test = multidevice_test
    d = test.size
    t, h = 4 * d * streams, row_parallel_hidden_near(16, d)
    full = inputs(t, h, seed=7)
    block = mlp_forward(h, d, mode, streams, test.mdfuser_dtype)
    (y,) = run(test, block, full)
    want, torch_result = test.references(forward, full)
    expect(test, block, "y", y, want, torch_result)


@pytest.mark.parametrize("streams", [1, 2])
@pytest.mark.parametrize("mode", ["tp", "sp"])
def test_backward(multidevice_test, mode, streams):
    test = multidevice_test
    d = test.size
    t, h = 4 * d * streams, row_parallel_hidden_near(16, d)
    full = inputs(t, h, seed=11)
    (want, _), (torch_result, pre) = test.references(backward, full)
    full["pre"] = pre.cpu()

    block = mlp_backward(h, d, mode, streams, test.mdfuser_dtype)
    got = dict(zip(block.outputs, run(test, block, full)))
    for name in want:
        expect(test, block, name, got[name], want[name], torch_result[name])
