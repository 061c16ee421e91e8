# SPDX-License-Identifier: MIT
"""The fusions and inputs of the ring decompositions' tests: the matmul
collective pairs that lower into rings, and global inputs whose sums are
exact in bf16."""

from __future__ import annotations

import torch

from mdfuser import DataType, FusionDefinition, ParallelType
from mdfuser.multidevice import DeviceMesh


def split_across(tv, axis: int, d: int) -> None:
    tv.outer_split(axis, d)
    tv.axis(axis).parallelize(ParallelType.mesh_x)


def split_tokens(tv, d: int, s: int, axis_after_stream: int = 1) -> None:
    """Splits the tokens (axis 0) into s stream chunks, each across the
    devices."""
    axis = 0
    if s > 1:
        tv.outer_split(0, s)
        tv.axis(0).parallelize(ParallelType.stream)
        axis = 1
    split_across(tv, axis, d)


def allgather_linear(d: int, s: int, k: int, n: int, bias: bool) -> FusionDefinition:
    """Sequence-parallel x [t, k] (tokens across the devices) feeding a
    column-parallel linear: w [n, k] and b [n] split on out_features."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, k], dtype=DataType.BFloat16)
        w = fd.define_tensor([n, k], dtype=DataType.BFloat16)
        inputs = [x, w]
        if bias:
            inputs.append(fd.define_tensor([n], dtype=DataType.BFloat16))
        fd.add_output(fd.ops.linear(*inputs))
        mesh = DeviceMesh(range(d))
        for tv in inputs:
            tv.set_device_mesh(mesh)
        split_tokens(x, d, s)
        for tv in inputs[1:]:
            split_across(tv, 0, d)
    return fd


def linear_reduce_scatter(d: int, s: int, k: int, n: int) -> FusionDefinition:
    """A row-parallel linear (x [t, k] and w [n, k] split on in_features)
    whose output is sequence parallel: its partial sums are
    reduce-scattered along the tokens."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, k], dtype=DataType.BFloat16)
        w = fd.define_tensor([n, k], dtype=DataType.BFloat16)
        out = fd.ops.linear(x, w)
        fd.add_output(out)
        mesh = DeviceMesh(range(d))
        for tv in (x, w, out):
            tv.set_device_mesh(mesh)
        axis = 1
        if s > 1:
            x.outer_split(0, s)
            x.axis(0).parallelize(ParallelType.stream)
            axis = 2
        split_across(x, axis, d)
        split_across(w, 1, d)
        split_tokens(out, d, s)
    return fd


def integers(shape, generator) -> torch.Tensor:
    return torch.randint(-1, 2, shape, generator=generator).to(torch.bfloat16)


def global_inputs(t: int, k: int, n: int, seed: int) -> dict[str, torch.Tensor]:
    assert k <= 256, "sums of k products in {-1, 0, 1} stay exact in bf16"
    g = torch.Generator().manual_seed(seed)
    return dict(x=integers((t, k), g), w=integers((n, k), g), b=integers((n,), g))


def torch_linear(full: dict[str, torch.Tensor], bias: bool) -> torch.Tensor:
    b = full["b"].double() if bias else None
    return torch.nn.functional.linear(full["x"].double(), full["w"].double(), b).to(torch.bfloat16)
