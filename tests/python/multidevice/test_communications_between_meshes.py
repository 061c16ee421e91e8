# SPDX-License-Identifier: MIT
"""Moves between 1-D meshes, from ordinary fusion definitions: SendRecv,
Broadcast, Scatter, Gather and Reduce, checked exactly and by the
Communication in the host program.

A rank outside a tensor's mesh passes a placeholder for an input
(shard_tensor gives it one shaped like the first mesh device's shard), gets
an empty tensor for an output, and posts nothing for a move whose meshes
both leave it out. Run under ``mpirun -np 2`` for every type and ``-np 4``
for the pairwise moves and for roots outside the other mesh; with fewer
processes the tests skip.
"""

from __future__ import annotations

import pytest
import torch
from communication_helpers import (
    communications,
    execute,
    expect_communication,
    expect_no_communication,
    global_tensor,
    mesh_of,
    part,
)

from mdfuser import FusionDefinition, ParallelType


def shard(tv, axis: int, d: int) -> None:
    tv.outer_split(axis, d)
    tv.axis(axis).parallelize(ParallelType.mesh_x)


def moved(src, dst, shape, src_axis=None, dst_axis=None) -> FusionDefinition:
    """y = set(x) with x on mesh `src` and y on mesh `dst`, each sharded on
    the given axis (replicated when None)."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1] * len(shape))
        y = fd.ops.set(x)
        fd.add_output(y)
        x.set_device_mesh(mesh_of(src))
        y.set_device_mesh(mesh_of(dst))
        if src_axis is not None:
            shard(x, src_axis, len(src))
        if dst_axis is not None:
            shard(y, dst_axis, len(dst))
    return fd


def expected_part(full, devices, axis, rank) -> torch.Tensor:
    """What `rank` holds of `full` on mesh `devices` sharded on `axis`: its
    part, the whole when replicated, nothing outside the mesh."""
    devices = list(devices)
    if rank not in devices:
        return torch.empty(0)
    if axis is None:
        return full
    return part(full, axis, len(devices), devices.index(rank))


def check(test, fd, full, expected, dst, dst_axis, type_, ranks, *fields) -> None:
    """Runs `fd` on `full`: this rank's output is its part of the global
    `expected` on mesh `dst`, and the program holds one Communication of
    `type_` among `ranks`, or none where this rank is not among them."""
    (out,) = execute(test, fd, [full])
    assert torch.equal(out, expected_part(expected, dst, dst_axis, test.rank))
    if test.rank in ranks:
        expect_communication(fd, type_, ranks, *fields)
    else:
        expect_no_communication(fd)


@pytest.mark.parametrize("src, dst", [([0], [1]), ([1], [0]), ([3], [2])], ids=str)
def test_send_recv_between_two_devices(multidevice_test, src, dst):
    multidevice_test.require(max(src + dst) + 1)
    fd = moved(src, dst, [3, 4])
    full = global_tensor([3, 4], seed=20)
    check(multidevice_test, fd, full, full, dst, None, "SendRecv", sorted(src + dst))


@pytest.mark.parametrize("axis", [None, 0, 1], ids=["replicated", "sharded0", "sharded1"])
def test_send_recv_pairwise_between_meshes_of_two(multidevice_test, axis):
    """{0, 1} -> {2, 3}: device i of one mesh sends to device i of the other."""
    multidevice_test.require(4)
    r = multidevice_test.rank
    fd = moved([0, 1], [2, 3], [4, 6], axis, axis)
    full = global_tensor([4, 6], seed=21)
    (out,) = execute(multidevice_test, fd, [full])
    assert torch.equal(out, expected_part(full, [2, 3], axis, r))
    if r >= 4:
        expect_no_communication(fd)
        return
    expect_communication(fd, "SendRecv", [r % 2, r % 2 + 2])


def test_send_recv_of_a_replicated_tensor_to_a_device_outside_its_mesh(multidevice_test):
    """{0, 1} replicated -> {2}: the first device of the mesh sends."""
    multidevice_test.require(3)
    fd = moved([0, 1], [2], [3, 4])
    full = global_tensor([3, 4], seed=22)
    check(multidevice_test, fd, full, full, [2], None, "SendRecv", [0, 2])


def test_a_replicated_tensor_moves_locally_to_a_device_of_its_mesh(multidevice_test):
    multidevice_test.require(2)
    fd = moved([0, 1], [1], [3, 4])
    full = global_tensor([3, 4], seed=23)
    (out,) = execute(multidevice_test, fd, [full])
    assert torch.equal(out, expected_part(full, [1], None, multidevice_test.rank))
    expect_no_communication(fd)


@pytest.mark.parametrize(
    "root, dst",
    [(0, "all"), (1, [2, 3])],
    ids=["to_all", "root_outside_receivers"],
)
def test_broadcast(multidevice_test, root, dst):
    multidevice_test.require(2 if dst == "all" else 4)
    dst = list(range(multidevice_test.size)) if dst == "all" else dst
    fd = moved([root], dst, [3, 4])
    full = global_tensor([3, 4], seed=24)
    ranks = sorted(set([root] + dst))
    check(multidevice_test, fd, full, full, dst, None, "Broadcast", ranks, f"root={root}")


@pytest.mark.parametrize(
    "root, dst, axis",
    [(0, "all", 0), (0, "all", 1), (3, [0, 1], 0)],
    ids=["to_all_axis0", "to_all_axis1", "root_outside_receivers"],
)
def test_scatter(multidevice_test, root, dst, axis):
    multidevice_test.require(2 if dst == "all" else 4)
    dst = list(range(multidevice_test.size)) if dst == "all" else dst
    shape = [2 * len(dst), 3 * len(dst)]
    fd = moved([root], dst, shape, None, axis)
    full = global_tensor(shape, seed=25)
    ranks = sorted(set([root] + dst))
    check(
        multidevice_test,
        fd,
        full,
        full,
        dst,
        axis,
        "Scatter",
        ranks,
        f"root={root}",
        f"axis={axis}",
    )


@pytest.mark.parametrize(
    "src, root, axis",
    [("all", "last", 0), ("all", "last", 1), ([0, 1], 3, 0)],
    ids=["from_all_axis0", "from_all_axis1", "root_outside_senders"],
)
def test_gather(multidevice_test, src, root, axis):
    multidevice_test.require(2 if src == "all" else 4)
    size = multidevice_test.size
    src = list(range(size)) if src == "all" else src
    root = size - 1 if root == "last" else root
    shape = [2 * len(src), 3 * len(src)]
    fd = moved(src, [root], shape, axis, None)
    full = global_tensor(shape, seed=26)
    ranks = sorted(set(src + [root]))
    check(
        multidevice_test,
        fd,
        full,
        full,
        [root],
        None,
        "Gather",
        ranks,
        f"root={root}",
        f"axis={axis}",
    )


def reduced_to_one_device(src, root, op, rows_per_device) -> FusionDefinition:
    """y = op(x, [0]) with x's rows across the mesh `src` and y on {root}:
    with one row per device x's axis 0 is the device axis itself, else it
    is split into len(src) parts."""
    d = len(src)
    with FusionDefinition() as fd:
        x = fd.define_tensor([rows_per_device * d, -1])
        y = getattr(fd.ops, op)(x, [0])
        fd.add_output(y)
        x.set_device_mesh(mesh_of(src))
        y.set_device_mesh(mesh_of([root]))
        if rows_per_device == 1:
            x.axis(0).parallelize(ParallelType.mesh_x)
        else:
            shard(x, 0, d)
    return fd


@pytest.mark.parametrize(
    "src, root", [("all", "last"), ([1, 2], 0)], ids=["from_all", "root_outside_senders"]
)
@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_reduce(multidevice_test, src, root, op):
    """A reduction over the device axis whose output lives on one device."""
    multidevice_test.require(2 if src == "all" else 3)
    size = multidevice_test.size
    src = list(range(size)) if src == "all" else src
    root = size - 1 if root == "last" else root
    fd = reduced_to_one_device(src, root, op, rows_per_device=1)
    full = global_tensor([len(src), 5], seed=27)
    expected = {"sum": full.sum(0), "max": full.amax(0), "min": full.amin(0)}[op]
    ranks = sorted(set(src + [root]))
    fields = [f"root={root}"] + ([] if op == "sum" else [f"op={op}"])
    check(multidevice_test, fd, full, expected, [root], None, "Reduce", ranks, *fields)


def test_reduce_of_a_split_axis(multidevice_test):
    """Two rows per device: a local sum, then a Reduce of one row each."""
    multidevice_test.require(2)
    src, root = list(range(multidevice_test.size)), multidevice_test.size - 1
    fd = reduced_to_one_device(src, root, "sum", rows_per_device=2)
    full = global_tensor([2 * len(src), 5], seed=28)
    check(multidevice_test, fd, full, full.sum(0), [root], None, "Reduce", src, f"root={root}")


def test_ranks_outside_the_mesh_take_no_part(multidevice_test):
    """An allgather on every device but the last: the last passes a
    placeholder, posts nothing and gets an empty output."""
    multidevice_test.require(2)
    d = multidevice_test.size - 1
    devices = list(range(d))
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, 4])
        y = fd.ops.set(x)
        fd.add_output(y)
        x.set_device_mesh(mesh_of(devices))
        y.set_device_mesh(mesh_of(devices))
        shard(x, 0, d)
    full = global_tensor([2 * d, 4], seed=29)
    x_tv = fd.fusion.inputs()[0]
    local = multidevice_test.shard(full, x_tv)
    assert local.shape == (2, 4), "a placeholder shaped like device 0's shard"
    (out,) = execute(multidevice_test, fd, [full])
    if multidevice_test.rank in devices:
        assert torch.equal(out, full)
        expect_communication(fd, "Allgather", devices)
    else:
        assert out.numel() == 0
        assert communications(fd) == []
