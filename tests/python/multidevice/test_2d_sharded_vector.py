# SPDX-License-Identifier: MIT
"""One tensor axis sharded across both axes of a 2-D mesh (a 2-D sharded
vector), under ``mpirun -np N`` with N even (dx = 2, dy = N / 2).

Written as two successive outer splits (mesh_y the outer part, mesh_x the
outer part of the rest), each device holds one contiguous block, in mesh
order, and operations and gathers run on it. The reference's own test
writes it with an inner split first, which puts mesh_y on the outer part of
that inner split: each device holds strided pieces, which shard_tensor
cuts (as the reference's test checks), while a fusion computing on them is
refused with a ValueError naming the axis: mdfuser's shardings are chains
of splits, each of the inner part of the previous one.
"""

from __future__ import annotations

import pytest
import torch

import mdfuser as nvfuser
from mdfuser import DataType, FusionDefinition

DX = 2


def mesh_2d(test):
    d = test.size
    if d % DX != 0:
        pytest.skip(f"needs an even number of processes, the world has {d}")
    return nvfuser.multidevice.DeviceMesh(torch.arange(d).reshape(d // DX, DX)), d // DX


@pytest.mark.mpi
def test_two_successive_splits_shard_one_axis_across_both_mesh_axes(multidevice_test):
    mesh, dy = mesh_2d(multidevice_test)
    with FusionDefinition() as fd:
        tv = fd.define_tensor([-1], dtype=DataType.Float)
        doubled = fd.ops.mul(fd.ops.relu(tv), 2.0)
        gathered = fd.ops.set(doubled)
        fd.add_output(doubled)
        fd.add_output(gathered)
        tv.set_device_mesh(mesh)
        tv.outer_split(0, dy)
        tv.axis(0).parallelize(nvfuser.ParallelType.mesh_y)
        tv.outer_split(1, DX)
        tv.axis(1).parallelize(nvfuser.ParallelType.mesh_x)
        gathered.set_device_mesh(mesh)

    per_device = 3
    t_ref = torch.arange(dy * DX * per_device, dtype=torch.float) - 5
    x = multidevice_test.shard_tensor(t_ref, tv)
    rank = multidevice_test.rank
    torch.testing.assert_close(x.cpu(), t_ref.reshape(dy, DX, per_device)[rank // DX, rank % DX])
    out, whole = fd.execute([x], backend=multidevice_test.collective_backend)
    expected = t_ref.relu() * 2
    torch.testing.assert_close(out, multidevice_test.shard_tensor(expected, fd.output_tensors()[0]))
    torch.testing.assert_close(whole.cpu(), expected)


def reference_schedule(fd: FusionDefinition, mesh, dy: int, cols_per_rank: int):
    """The reference's test_2d_sharded_vector: an inner split first."""
    tv = fd.define_tensor([-1])
    fd.add_output(fd.ops.relu(tv))
    tv.set_device_mesh(mesh)
    tv.inner_split(0, DX * cols_per_rank)
    tv.outer_split(0, dy)
    tv.axis(0).parallelize(nvfuser.ParallelType.mesh_y)
    tv.outer_split(2, DX)
    tv.axis(2).parallelize(nvfuser.ParallelType.mesh_x)
    return tv


@pytest.mark.mpi
def test_the_strided_pieces_of_an_inner_split_are_cut_and_computing_on_them_is_refused(
    multidevice_test,
):
    mesh, dy = mesh_2d(multidevice_test)
    rows_per_rank, cols_per_rank = 2, 3
    with FusionDefinition() as fd:
        tv = reference_schedule(fd, mesh, dy, cols_per_rank)
    t_ref = torch.arange(dy * rows_per_rank * DX * cols_per_rank, dtype=torch.float)
    rank = multidevice_test.rank
    # The reference's expectation: rows of every block, this rank's columns.
    expected = t_ref.reshape(dy, rows_per_rank, DX, cols_per_rank)[rank // DX, :, rank % DX, :]
    local = multidevice_test.shard_tensor(t_ref, tv)
    torch.testing.assert_close(local.cpu(), expected.flatten())
    # execute refuses it when it compiles, on every rank, before any
    # communication.
    message = r"mesh_y axis ideviceIdx\.y\d+\{\d+\} of T0.* derives from the outer part of a split"
    with pytest.raises(ValueError, match=message):
        fd.execute([local], backend=multidevice_test.collective_backend)
