# SPDX-License-Identifier: MIT
"""Shardings only the raw API expresses, and the non-uniform ones neither
API supports (doc/dtensor.md).

Non-outermost sharding: axis 0 of x is split in two blocks and each block
across the devices, [serial{2}, mesh_x{d}, rest], so a device holds a run
of rows from every block: DTensor's Shard(0) cannot say that. mdfuser
computes on such shards; moving them between devices, a strided shard (the
inner part of a split on mesh_x) and jagged shards are refused with a
ValueError before anything runs.
"""

from __future__ import annotations

import pytest
import torch
from communication_helpers import execute, global_tensor, mesh_of

from mdfuser import FusionDefinition, ParallelType
from mdfuser.multidevice import shard_tensor


def non_outermost_rows(t: torch.Tensor, blocks: int, d: int, r: int) -> torch.Tensor:
    """Device r's rows when the rows form `blocks` blocks, each split
    across d devices: part r of every block, in block order."""
    return torch.cat([block.chunk(d)[r] for block in t.chunk(blocks)])


def split_blocks_then_devices(tv, d: int) -> None:
    tv.outer_split(0, 2)  # [2 blocks, rows per block, ...]
    tv.outer_split(1, d)  # [2, d, rows per device and block, ...]
    tv.axis(1).parallelize(ParallelType.mesh_x)


def doubled_relu_of_split_blocks(d: int):
    """y = 2 relu(x), x [4d, 3] on d devices split as split_blocks_then_devices
    does, y left without a mesh: (fd, x, y)."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([4 * d, 3])
        y = fd.ops.mul(fd.ops.relu(x), 2.0)
        fd.add_output(y)
        x.set_device_mesh(mesh_of(range(d)))
        split_blocks_then_devices(x, d)
    return fd, x, y


def test_non_outermost_sharding_computes_on_every_block(multidevice_test):
    d, r = multidevice_test.size, multidevice_test.rank
    fd, x, _ = doubled_relu_of_split_blocks(d)
    full = global_tensor([4 * d, 3], seed=41)
    local_x = non_outermost_rows(full, 2, d, r)
    assert torch.equal(shard_tensor(full, x), local_x)
    (out,) = fd.execute([local_x.to(multidevice_test.device)])
    assert torch.equal(out.cpu(), non_outermost_rows(2 * full.relu(), 2, d, r))
    assert "Communication" not in fd.last_host_ir()


def test_non_outermost_sharding_reduces_across_devices(multidevice_test):
    """A sum over the rows: each device sums its rows of every block, then
    an allreduce."""
    d, r = multidevice_test.size, multidevice_test.rank
    with FusionDefinition() as fd:
        x = fd.define_tensor([4 * d, 3])
        fd.add_output(fd.ops.sum(x, [0]))
        x.set_device_mesh(mesh_of(range(d)))
        split_blocks_then_devices(x, d)
    full = global_tensor([4 * d, 3], seed=42)
    (out,) = fd.execute([non_outermost_rows(full, 2, d, r).to(multidevice_test.device)])
    assert torch.equal(out.cpu(), full.sum(0))


def test_moving_a_non_outermost_shard_is_refused(multidevice_test):
    """A collective moves each device's rows as one block, which for this
    layout is not one block of the tensor: gathering it is refused, on
    every rank, before anything runs."""
    d = multidevice_test.size
    multidevice_test.require(2)
    with FusionDefinition() as fd:
        x = fd.define_tensor([4 * d, 3])
        y = fd.ops.set(x)
        fd.add_output(y)
        mesh = mesh_of(range(d))
        x.set_device_mesh(mesh)
        y.set_device_mesh(mesh)
        split_blocks_then_devices(x, d)
    full = global_tensor([4 * d, 3], seed=43)
    with pytest.raises(ValueError, match=r"non-outermost sharding.*Allgather on mesh_x axis 0"):
        execute(multidevice_test, fd, [full])


def test_a_strided_shard_is_refused(multidevice_test):
    """The inner part of a split on mesh_x would give each device every
    d-th row: refused, naming the axis, before anything runs."""
    d = multidevice_test.size
    with FusionDefinition() as fd:
        x = fd.define_tensor([4 * d, 3])
        fd.add_output(fd.ops.mul(x, 2.0))
        x.set_device_mesh(mesh_of(range(d)))
        x.inner_split(0, d)
        x.axis(1).parallelize(ParallelType.mesh_x)
    with pytest.raises(
        ValueError,
        match="is the inner part of a split, which would give each device a strided shard",
    ):
        fd.execute([torch.zeros(4, 3, device=multidevice_test.device)])


def test_shard_tensor_of_an_inner_split_takes_every_dth_row(multidevice_test):
    """shard_tensor follows the split: with the inner part on mesh_x, rank r
    holds rows r, r + d, r + 2d, ... (execute refuses such a shard, above)."""
    d, r = multidevice_test.size, multidevice_test.rank
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, 2])
        fd.add_output(fd.ops.mul(x, 2.0))
        x.set_device_mesh(mesh_of(range(d)))
        x.inner_split(0, d)
        x.axis(1).parallelize(ParallelType.mesh_x)
    full = torch.arange(3 * d * 2.0).reshape(3 * d, 2)
    assert torch.equal(shard_tensor(full, x), full[r::d])


def test_a_broadcast_axis_parallelized_on_mesh_x(multidevice_test):
    """Scripts written for d devices define [d, ...] and parallelize axis
    0; run on one device that axis is a broadcast of one element, which the
    one device holds whole. Split among more devices it is refused."""
    d = multidevice_test.size
    with FusionDefinition() as fd:
        x = fd.define_tensor([1, 4])
        y = fd.ops.sum(x, [0])
        fd.add_output(y)
        x.set_device_mesh(mesh_of(range(d)))
        x.axis(0).parallelize(ParallelType.mesh_x)
    full = torch.arange(4.0).reshape(1, 4)
    if d == 1:
        (out,) = fd.execute([full.to(multidevice_test.device)])
        assert torch.equal(out.cpu(), full.sum(0))
        return
    with pytest.raises(ValueError, match=rf"has 1 parts, but DeviceMesh.* has {d} devices"):
        fd.execute([full.to(multidevice_test.device)])


def test_an_input_without_a_mesh_is_replicated_on_the_others_mesh(multidevice_test):
    """A row-parallel linear whose bias was never given a mesh: replicated."""
    d = multidevice_test.size
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, 4 * d])
        w = fd.define_tensor([6, 4 * d])
        b = fd.define_tensor([6])
        fd.add_output(fd.ops.linear(x, w, b))
        for tv in (x, w):
            tv.set_device_mesh(mesh_of(range(d)))
            tv.outer_split(1, d)
            tv.axis(1).parallelize(ParallelType.mesh_x)
    full = [global_tensor([5, 4 * d], 31), global_tensor([6, 4 * d], 32), global_tensor([6], 33)]
    (out,) = execute(multidevice_test, fd, full)
    assert torch.equal(out, full[0] @ full[1].T + full[2])


def test_jagged_shards_are_refused(multidevice_test):
    """A global extent that does not divide among the devices, and a local
    shard whose size disagrees with the global shape."""
    test = multidevice_test
    test.require(2)
    d = test.size

    def sharded_rows(rows: int):
        with FusionDefinition() as fd:
            x = fd.define_tensor([rows, 3])
            fd.add_output(fd.ops.mul(x, 2.0))
            x.set_device_mesh(mesh_of(range(d)))
            x.outer_split(0, d)
            x.axis(0).parallelize(ParallelType.mesh_x)
        return fd, x

    fd, x = sharded_rows(2 * d + 1)
    with pytest.raises(
        ValueError, match=f"has extent {2 * d + 1}, which is not divisible into {d} equal"
    ):
        fd.execute([torch.zeros(2, 3, device=test.device)])
    with pytest.raises(
        ValueError, match=f"axis 0 has size {2 * d + 1}, which does not split evenly"
    ):
        shard_tensor(torch.zeros(2 * d + 1, 3), x)

    fd, _ = sharded_rows(2 * d)
    with pytest.raises(
        ValueError, match=r"axis 0 has local size 3; sharded across \d+ devices on mesh_x"
    ):
        fd.execute([torch.zeros(3, 3, device=test.device)])


@pytest.mark.parametrize("above", ["stream", "plain"])
def test_an_axis_cut_two_ways_names_each_cut(multidevice_test, above):
    """x's rows are split into 3, then across the devices; y's across the
    devices alone: the devices would hold other rows of each. The error
    names the split above the device split, a stream split or a plain one
    as it is, before any communication."""
    test = multidevice_test
    d = test.size
    with FusionDefinition() as fd:
        x = fd.define_tensor([6 * d, 4], dtype=test.mdfuser_dtype)
        y = fd.ops.set(x)
        fd.add_output(y)
        for tv in (x, y):
            tv.set_device_mesh(mesh_of(range(d)))
        x.outer_split(0, 3)
        if above == "stream":
            x.axis(0).parallelize(ParallelType.stream)
        x.outer_split(1, d)
        x.axis(1).parallelize(ParallelType.mesh_x)
        y.outer_split(0, d)
        y.axis(0).parallelize(ParallelType.mesh_x)
    kind = "a stream split" if above == "stream" else "a split"
    with pytest.raises(ValueError) as error:
        fd.execute([torch.zeros(6, 4, dtype=test.dtype, device=test.device)])
    message = str(error.value)
    assert (
        f"axis 0 is cut into parts two ways: its mesh_x split lies below {kind} into 3 "
        "in the producer and is the outermost split in the consumer; split both alike"
    ) in message, message


def test_shard_tensor_of_an_output_left_unplaced_follows_the_run(multidevice_test):
    """An output without a mesh takes the sharding mdfuser propagates to
    it; once the fusion ran, shard_tensor lays it out that way (as
    nvfuser_direct's tests read outputs), and before, it is the whole
    tensor. An input without a mesh stays whole."""
    d, r = multidevice_test.size, multidevice_test.rank
    fd, x, y = doubled_relu_of_split_blocks(d)
    full = global_tensor([4 * d, 3], seed=43)
    expected = 2 * full.relu()
    assert torch.equal(shard_tensor(expected, y), expected)
    (out,) = fd.execute([shard_tensor(full, x).to(multidevice_test.device)])
    assert y.device_mesh is None, "the definition stays as the user wrote it"
    assert torch.equal(shard_tensor(expected, y), non_outermost_rows(expected, 2, d, r))
    assert torch.equal(out.cpu(), shard_tensor(expected, y))
    with FusionDefinition() as other:
        z = other.define_tensor([4 * d, 3])
        other.add_output(other.ops.neg(z))
    assert torch.equal(shard_tensor(full, z), full)


def test_an_allocation_domain_that_is_the_layout_is_accepted(multidevice_test):
    """The nvfuser_direct idiom of a sharded input: an outer split across
    the devices, then the loop axes declared as the allocation. That is the
    layout mdfuser holds the local tensor in, so the run computes as
    without it."""
    d, r = multidevice_test.size, multidevice_test.rank
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1])
        fd.add_output(fd.ops.add(x, 1.0))
        x.set_device_mesh(mesh_of(range(d)))
        x.split(0, d, inner_split=False)
        x.axis(0).parallelize(ParallelType.mesh_x)
        x.set_allocation_domain(x.get_loop_domain(), new_contiguity=True)
    full = global_tensor([2 * d, 5], seed=43)
    local_x = shard_tensor(full, x)
    assert torch.equal(local_x, full.chunk(d)[r])
    (out,) = fd.execute([local_x.to(multidevice_test.device)])
    assert torch.equal(out.cpu(), full.chunk(d)[r] + 1)
