# SPDX-License-Identifier: MIT
"""Placements round trip through FusionDefinitionWrapper for every op
family, on a 1-D mesh of the world and a 2-D one ((world / 2) x 2).

Each case is a single-GPU definition with tiny static shapes, the inputs'
placements per mesh, and the placements mdfuser returns: shardings pass
through pointwise ops, broadcasts, reshapes, permutes and squeezes (moving
with their axes); a reduction, a cut by slice or cat, and a contraction
over a sharded axis end replicated on that mesh dimension. Values are
compared with torch on the global tensors, and asking for replicated
outputs gives the same values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
from torch.distributed.tensor import Replicate, Shard, distribute_tensor

from mdfuser import FusionDefinitionWrapper
from mdfuser.pytorch_utils import torch_dtype_to_nvfuser_dtype

R = Replicate()
S0, S1, S2 = Shard(0), Shard(1), Shard(2)
F = torch.nn.functional


@dataclass
class Case:
    shapes: list[list[int]]
    ops: Callable  # (fd.ops, *inputs) -> output
    reference: Callable  # (*tensors) -> tensor
    # Inputs' placements and the output's, on the 1-D and the 2-D mesh.
    on_1d: tuple[list, tuple]
    on_2d: tuple[list, tuple]


CASES = {
    "pointwise": Case(
        [[8, 8], [8, 8]],
        lambda o, x, y: o.add(o.mul(o.relu(x), y), 1.0),
        # Arithmetic on bf16 computes and returns Float (doc/ops.md).
        lambda x, y: torch.relu(x).float() * y.float() + 1.0,
        ([[S0], [R]], (S0,)),
        ([[S0, S1], [R, S1]], (S0, S1)),
    ),
    "reduction_of_a_whole_axis": Case(
        [[8, 8]],
        lambda o, x: o.sum(x, [1]),
        lambda x: x.sum(1),
        ([[S0]], (S0,)),
        ([[S0, S1]], (S0, R)),
    ),
    "reduction_of_a_sharded_axis": Case(
        [[8, 8]],
        lambda o, x: o.max(x, [0]),
        lambda x: x.amax(0),
        ([[S0]], (R,)),
        ([[S0, S1]], (R, S0)),
    ),
    "broadcast": Case(
        [[8, 8], [8]],
        lambda o, x, b: o.add(x, o.broadcast_in_dim(b, [8, 8], [1])),
        lambda x, b: x.float() + b.float(),
        ([[S1], [S0]], (S1,)),
        ([[S0, S1], [R, S0]], (S0, S1)),
    ),
    "reshape": Case(
        [[8, 8]],
        lambda o, x: o.reshape(x, [4, 2, 8]),
        lambda x: x.reshape(4, 2, 8),
        ([[S0]], (S0,)),
        ([[S0, S1]], (S0, S2)),
    ),
    "permute": Case(
        [[8, 4, 8]],
        lambda o, x: o.permute(x, [2, 0, 1]),
        lambda x: x.permute(2, 0, 1),
        ([[S0]], (S1,)),
        ([[S0, S2]], (S1, S0)),
    ),
    "squeeze": Case(
        [[8, 1, 8]],
        lambda o, x: o.squeeze(x, [1]),
        lambda x: x.squeeze(1),
        ([[S0]], (S0,)),
        ([[S0, S2]], (S0, S1)),
    ),
    "slice": Case(
        [[8, 8]],
        lambda o, x: o.slice(x, [0, 0], [8, 4]),
        lambda x: x[:, :4],
        ([[S0]], (S0,)),
        ([[S0, S1]], (S0, R)),
    ),
    "cat": Case(
        [[8, 4], [8, 4]],
        lambda o, x, y: o.cat([x, y], 1),
        lambda x, y: torch.cat([x, y], 1),
        ([[S0], [S0]], (S0,)),
        ([[S0, S1], [S0, S1]], (S0, R)),
    ),
    "column_parallel_linear": Case(
        [[8, 8], [8, 8]],
        lambda o, x, w: o.linear(x, w),
        F.linear,
        ([[R], [S0]], (S1,)),
        ([[S0, R], [R, S0]], (S0, S1)),
    ),
    "row_parallel_linear": Case(
        [[8, 8], [8, 8]],
        lambda o, x, w: o.linear(x, w),
        F.linear,
        ([[S1], [S1]], (R,)),
        ([[S0, S1], [R, S1]], (S0, R)),
    ),
    "batched_matmul": Case(
        [[4, 8, 8], [4, 8, 8]],
        lambda o, a, b: o.matmul(a, b),
        torch.matmul,
        ([[S0], [S0]], (S0,)),
        ([[S0, S2], [S0, S1]], (S0, R)),
    ),
    "sdpa": Case(
        [[2, 4, 8, 8]] * 3,
        lambda o, q, k, v: o.sdpfa_fwd(q, k, v, dropout_p=0.0, is_causal=True)[0],
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        ([[S1]] * 3, (S1,)),
        ([[S0, S1]] * 3, (S0, S1)),
    ),
}


def mesh_shape(size: int, ndim: int) -> tuple[int, ...]:
    if ndim == 1:
        return (size,)
    return (size // 2, 2) if size >= 2 else (1, 1)


def splits_evenly(shape, placements, mesh: tuple[int, ...]) -> bool:
    """Whether every axis `placements` shard divides among its devices."""
    parts = [1] * len(shape)
    for devices, placement in zip(mesh, placements):
        if isinstance(placement, Shard):
            parts[placement.dim] *= devices
    return all(extent % n == 0 for extent, n in zip(shape, parts))


def wrapper(case: Case, dtype: torch.dtype) -> FusionDefinitionWrapper:
    def define(fd):
        tvs = [
            fd.define_tensor(shape, dtype=torch_dtype_to_nvfuser_dtype(dtype))
            for shape in case.shapes
        ]
        fd.add_output(case.ops(fd.ops, *tvs))

    return FusionDefinitionWrapper(define)


@pytest.mark.parametrize("ndim", [1, 2], ids=["1d", "2d"])
@pytest.mark.parametrize("name", list(CASES))
def test_placements_round_trip(dtensor_test, name, ndim):
    test = dtensor_test.test
    if ndim == 2 and test.size not in (1, 2, 4):
        pytest.skip("the 2-D mesh is (world / 2) x 2")
    case = CASES[name]
    mesh_dims = mesh_shape(test.size, ndim)
    mesh = dtensor_test.mesh(mesh_dims)
    placements, expected = case.on_1d if ndim == 1 else case.on_2d
    g = torch.Generator().manual_seed(31)
    full = [
        torch.randint(-4, 5, shape, generator=g).to(test.device, test.dtype)
        for shape in case.shapes
    ]
    want = case.reference(*full)
    # The expected placements hold where the cases' tiny shapes split over
    # the mesh (on 8 devices an axis of 4 does not, and stays whole).
    tensors = [*zip(case.shapes, placements), (want.shape, expected)]
    if not all(splits_evenly(s, p, mesh_dims) for s, p in tensors):
        pytest.skip(f"the shapes of {name} do not split over a mesh of {mesh_dims}")
    dtensors = [distribute_tensor(t, mesh, p) for t, p in zip(full, placements)]
    fused = wrapper(case, test.dtype)

    (out,) = fused(dtensors)
    assert out.placements == expected
    assert out.shape == want.shape and out.dtype == want.dtype
    torch.testing.assert_close(out.full_tensor(), want)

    (replicated,) = fused(dtensors, output_placements=[[R] * ndim])
    assert replicated.placements == (R,) * ndim
    torch.testing.assert_close(replicated.to_local(), want)
    assert fused.num_definitions == 2
