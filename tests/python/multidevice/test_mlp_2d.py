# SPDX-License-Identifier: MIT
"""The MLP block on a 2-D mesh through the raw API: data parallel (tokens
split across mesh_y, the outer mesh dimension) x tensor parallel (weights
split across mesh_x, the inner one), forward and backward, against plain
torch on the same global inputs.

The weight gradients sum over the tokens, which are split across mesh_y:
mdfuser allreduces them across the data-parallel dimension, among the
devices of one mesh_x coordinate. A (dp, tp) mesh runs when the world has
exactly dp * tp processes: 2 x 2 under ``mpirun -np 4``, 2 x 1 and 1 x 2
under ``-np 2``.
"""

from __future__ import annotations

import pytest
import torch
from communication_helpers import communications
from dtensor_mlp import define_mlp_backward, define_mlp_forward
from test_transformer_mlp import backward, expect, forward, inputs, run
from transformer_blocks import Mlp

from mdfuser import FusionDefinition, ParallelType
from mdfuser.multidevice import DeviceMesh

H = 16
MESHES = [(1, 1), (2, 1), (1, 2), (2, 2)]


def shard(tv, axis: int, n: int, parallel_type) -> None:
    tv.outer_split(axis, n)
    tv.axis(axis).parallelize(parallel_type)


def scheduled(define, names, outputs, dp: int, tp: int, dtype, tensor_parallel) -> Mlp:
    """`define`'s fusion on a (dp, tp) mesh: tokens (axis 0 of the inputs
    that have them) on mesh_y, and `tensor_parallel` (input -> axis) on
    mesh_x."""
    with FusionDefinition() as fd:
        define(fd, H, dtype)
    tvs = dict(zip(names, fd.fusion.inputs()))
    mesh = DeviceMesh(torch.arange(dp * tp).reshape(dp, tp))
    for name, tv in tvs.items():
        tv.set_device_mesh(mesh)
        if name in tensor_parallel:
            shard(tv, tensor_parallel[name], tp, ParallelType.mesh_x)
        if name in ("x", "pre", "grad_y"):
            shard(tv, 0, dp, ParallelType.mesh_y)
    return Mlp(fd, tvs, dict(zip(outputs, fd.fusion.outputs())))


def mesh_or_skip(test, dp: int, tp: int) -> None:
    if test.size != dp * tp:
        pytest.skip(f"a {dp} x {tp} mesh runs on exactly {dp * tp} processes")


@pytest.mark.parametrize("dp,tp", MESHES, ids=[f"{dp}x{tp}" for dp, tp in MESHES])
def test_forward(multidevice_test, dp, tp):
    test = multidevice_test
    mesh_or_skip(test, dp, tp)
    full = inputs(4 * dp, H, seed=21)
    block = scheduled(
        define_mlp_forward,
        ["x", "w1", "b1", "w2", "b2"],
        ["y"],
        dp,
        tp,
        test.mdfuser_dtype,
        dict(w1=0, b1=0, w2=1),
    )
    (y,) = run(test, block, full, backend=test.collective_backend)
    want, torch_result = test.references(forward, full)
    expect(test, block, "y", y, want, torch_result)
    if tp > 1:
        # The row-parallel linear's partial sums, across each row of the mesh.
        row = [r for r in range(dp * tp) if r // tp == test.rank // tp]
        assert any(
            "type=Allreduce" in c and "team=(" + " ".join(map(str, row)) + ")" in c
            for c in communications(block.fd)
        ), communications(block.fd)


@pytest.mark.parametrize("dp,tp", MESHES, ids=[f"{dp}x{tp}" for dp, tp in MESHES])
def test_backward(multidevice_test, dp, tp):
    test = multidevice_test
    mesh_or_skip(test, dp, tp)
    full = inputs(4 * dp, H, seed=23)
    (want, _), (torch_result, pre) = test.references(backward, full)
    full["pre"] = pre.cpu()
    block = scheduled(
        define_mlp_backward,
        ["x", "w1", "w2", "pre", "grad_y"],
        ["grad_x", "grad_w1", "grad_b1", "grad_w2", "grad_b2"],
        dp,
        tp,
        test.mdfuser_dtype,
        dict(w1=0, w2=1, pre=1),
    )
    got = dict(zip(block.outputs, run(test, block, full, backend=test.collective_backend)))
    for name in want:
        expect(test, block, name, got[name], want[name], torch_result[name])
    if dp > 1:
        # Weight gradients: allreduced across the data-parallel dimension,
        # among the devices of this rank's mesh column.
        column = [r for r in range(dp * tp) if r % tp == test.rank % tp]
        team = "team=(" + " ".join(map(str, column)) + ")"
        reduced = [c for c in communications(block.fd) if "type=Allreduce" in c and team in c]
        assert len(reduced) >= 4, communications(block.fd)
