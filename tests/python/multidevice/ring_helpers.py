# SPDX-License-Identifier: MIT
"""The fusions and inputs of the ring decompositions' tests: the matmul
collective pairs that lower into rings (examples/ring_decomposition.py),
and global inputs whose sums are exact in bf16."""

from __future__ import annotations

import torch
from helpers import row_parallel_linear
from ring_decomposition import (  # noqa: F401 (re-exported to the tests)
    allgather_linear,
    linear_reduce_scatter,
    split_across,
)

from mdfuser import DataType, FusionDefinition, ParallelType
from mdfuser.multidevice import DeviceMesh

# The allreduce of partial sums as its reduce-scatter and allgather, which
# the CUDA backend would otherwise exchange at two devices where the model
# says its stream loop waits for the link (the few rows of these tests):
# for the tests that assert the rings' shape.
UNEXCHANGED = ("exchange_allreduce",)


def integers(shape, generator) -> torch.Tensor:
    return torch.randint(-1, 2, shape, generator=generator).to(torch.bfloat16)


def row_parallel_hidden(d: int) -> int:
    """h of the row-parallel linears here (in_features 4h across the d
    devices): 4 where 4h = 16 splits over d, else d (an odd ring)."""
    return 4 if 16 % d == 0 else d


def global_inputs(t: int, k: int, n: int, seed: int) -> dict[str, torch.Tensor]:
    assert k <= 256, "sums of k products in {-1, 0, 1} stay exact in bf16"
    g = torch.Generator().manual_seed(seed)
    return dict(x=integers((t, k), g), w=integers((n, k), g), b=integers((n,), g))


def torch_linear(full: dict[str, torch.Tensor], bias: bool) -> torch.Tensor:
    b = full["b"].double() if bias else None
    return torch.nn.functional.linear(full["x"].double(), full["w"].double(), b).to(torch.bfloat16)


def batched_allgather_linear(d: int, b: int, streams: int = 1) -> FusionDefinition:
    """x [b, t, 8] with the tokens (axis 1) across the devices, in `streams`
    stream chunks, feeding a column-parallel linear: its ring cuts axis 1,
    whose parts are not contiguous."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([b, -1, 8], dtype=DataType.BFloat16)
        w = fd.define_tensor([4 * d, 8], dtype=DataType.BFloat16)
        fd.add_output(fd.ops.linear(x, w))
        mesh = DeviceMesh(range(d))
        for tv in (x, w):
            tv.set_device_mesh(mesh)
        if streams > 1:
            x.outer_split(1, streams)
            x.axis(1).parallelize(ParallelType.stream)
        split_across(x, 1 if streams == 1 else 2, d)
        split_across(w, 0, d)
    return fd


def ring_pair(test, pair: str):
    """A fusion of `pair` over all ranks in 2 stream chunks, this rank's
    shards of integer inputs, and the global output."""
    d = test.size
    if pair == "allgather_linear":
        fd = allgather_linear(d, 2, 8, 4 * d, False)
        full = global_inputs(d * 2 * 3, 8, 4 * d, seed=400)
    elif pair == "linear_reduce_scatter":
        fd = linear_reduce_scatter(d, 2, 8 * d, 4)
        full = global_inputs(d * 2 * 2, 8 * d, 4, seed=401)
    else:
        h = row_parallel_hidden(d)
        fd = row_parallel_linear(d, 2, h)
        full = global_inputs(11, 4 * h, h, seed=402)
    args = [test.shard(full[name], tv) for name, tv in zip("xw", fd.fusion.inputs())]
    return fd, args, torch_linear(full, False)
