# SPDX-License-Identifier: MIT
"""Collectives and sharded GEMMs over tensors with an extent of 0 (a
sharded axis of extent 0, or an empty axis beside it): each rank's output
is its part of torch's result on the same global inputs. The rings over
empty parts and stream loops whose chunks come out empty are in
test_ring_decomposition.py (shapes with m = 0, t = 0)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from communication_helpers import mesh_of

from mdfuser import FusionDefinition, ParallelType
from mdfuser.multidevice import shard_tensor


def spread(tv, axis: int, d: int) -> None:
    tv.set_device_mesh(mesh_of(range(d)))
    tv.outer_split(axis, d)
    tv.axis(axis).parallelize(ParallelType.mesh_x)


def replicate(tv, d: int) -> None:
    tv.set_device_mesh(mesh_of(range(d)))


def check(test, build, fulls, reference) -> None:
    with FusionDefinition() as fd:
        ins = [fd.define_tensor([-1] * t.dim(), dtype=test.mdfuser_dtype) for t in fulls]
        fd.add_output(build(fd, *ins))
    (out,) = fd.execute([test.shard(t.to(test.dtype), tv) for t, tv in zip(fulls, ins)])
    want = shard_tensor(reference(*[t.to(test.dtype) for t in fulls]), fd.output_tensors()[0])
    assert out.shape == want.shape, (out.shape, want.shape)
    torch.testing.assert_close(out.cpu(), want.cpu())


def rand(*shape: int) -> torch.Tensor:
    return torch.randint(-3, 4, shape, generator=torch.Generator().manual_seed(7)).float()


@pytest.mark.parametrize("rows, cols", [(0, 4), (2, 0), (0, 0)], ids=str)
@pytest.mark.parametrize("collective", ["allgather", "allreduce", "reduce_scatter", "slice"])
def test_collectives(multidevice_test, collective, rows, cols):
    """rows and cols are per device along the sharded axis."""
    test = multidevice_test
    d = test.size

    def allgather(fd, x):
        spread(x, 0, d)
        y = fd.ops.set(x)
        replicate(y, d)
        return y

    def allreduce(fd, x):
        spread(x, 0, d)
        y = fd.ops.sum(x, [0])
        replicate(y, d)
        return y

    def reduce_scatter(fd, x):
        spread(x, 0, d)
        y = fd.ops.sum(x, [0])
        spread(y, 1, d)  # y's loop domain keeps the reduced axis 0
        return y

    def local_slice(fd, x):
        replicate(x, d)
        y = fd.ops.set(x)
        spread(y, 0, d)
        return y

    build, full, reference = {
        "allgather": (allgather, rand(d * rows, cols), lambda x: x),
        "allreduce": (allreduce, rand(d * rows, cols), lambda x: x.sum(0)),
        "reduce_scatter": (reduce_scatter, rand(d * rows, d * cols), lambda x: x.sum(0)),
        "slice": (local_slice, rand(d * rows, cols), lambda x: x),
    }[collective]
    check(test, build, [full], reference)


@pytest.mark.parametrize("t, k, n", [(0, 4, 3), (4, 4, 0), (4, 0, 3)], ids=str)
@pytest.mark.parametrize("parallel", ["row", "column"])
def test_sharded_linears(multidevice_test, parallel, t, k, n):
    """k and n are per device along the sharded axis."""
    test = multidevice_test
    d = test.size

    def row(fd, x, w):
        spread(x, 1, d)
        spread(w, 1, d)
        return fd.ops.linear(x, w)

    def column(fd, x, w):
        replicate(x, d)
        spread(w, 0, d)
        return fd.ops.linear(x, w)

    if parallel == "row":
        check(test, row, [rand(t, d * k), rand(n, d * k)], F.linear)
    else:
        check(test, column, [rand(t, k), rand(d * n, k)], F.linear)
