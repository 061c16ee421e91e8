# SPDX-License-Identifier: MIT
"""Every collective mdfuser chooses on one mesh, from ordinary fusion
definitions, checked exactly and by the Communication in the host program.

Each test builds a global tensor of integer-valued floats on every rank,
passes this rank's shard, and compares the output with the part of the
global result this rank must hold, taken by hand. The host program must
hold the expected collective (type and team), so that a wrong choice fails
even where its numbers happen to match. Run under ``mpirun -np N`` for any N
(with one process every collective is a team of one); the 2-D mesh tests
need 4 processes and skip with fewer.

Moves between meshes are in test_communications_between_meshes.py.
"""

from __future__ import annotations

import pytest
import torch
from communication_helpers import (
    communications,
    execute,
    expect_communication,
    expect_inside_stream_loop,
    expect_no_communication,
    global_tensor,
    host_ir_lines,
    mesh_of,
    part,
    stream_then_device,
)

from mdfuser import DataType, FusionDefinition, ParallelType, PythonProfiler
from mdfuser.multidevice import DeviceMesh, shard_tensor


def shard(tv, axis: int, d: int) -> None:
    tv.outer_split(axis, d)
    tv.axis(axis).parallelize(ParallelType.mesh_x)


def stream_chunks_then_devices(tv, axis: int, s: int, d: int) -> None:
    """`axis` cut into s stream chunks, each chunk split across d devices."""
    tv.outer_split(axis, s)
    tv.axis(axis).parallelize(ParallelType.stream)
    tv.outer_split(axis + 1, d)
    tv.axis(axis + 1).parallelize(ParallelType.mesh_x)


@pytest.mark.parametrize("axis", [0, 1], ids=["outermost", "inner"])
def test_allgather(multidevice_test, axis):
    """set() from a sharded tensor to one placed on the mesh replicated."""
    d = multidevice_test.size
    shape = [3, 5]
    shape[axis] = 2 * d
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1])
        y = fd.ops.set(x)
        fd.add_output(y)
        mesh = mesh_of(range(d))
        x.set_device_mesh(mesh)
        y.set_device_mesh(mesh)
        shard(x, axis, d)
    full = global_tensor(shape, seed=1 + axis)
    (out,) = execute(multidevice_test, fd, [full])
    assert torch.equal(out, full)
    expect_communication(fd, "Allgather", range(d), f"axis={axis}")


def test_allgather_of_a_middle_axis(multidevice_test):
    d = multidevice_test.size
    with FusionDefinition() as fd:
        x = fd.define_tensor([3, 2 * d, 4])
        y = fd.ops.set(x)
        fd.add_output(y)
        mesh = mesh_of(range(d))
        x.set_device_mesh(mesh)
        y.set_device_mesh(mesh)
        shard(x, 1, d)
    full = global_tensor([3, 2 * d, 4], seed=3)
    (out,) = execute(multidevice_test, fd, [full])
    assert torch.equal(out, full)
    expect_communication(fd, "Allgather", range(d), "axis=1")


def reduce_scatter_of_a_sum(d: int):
    """A sum over the sharded axis 0, its output sharded on its axis 0."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([2 * d, 3 * d])
        y = fd.ops.sum(x, [0])
        fd.add_output(y)
        mesh = mesh_of(range(d))
        x.set_device_mesh(mesh)
        y.set_device_mesh(mesh)
        shard(x, 0, d)
        shard(y, 1, d)  # y's loop domain keeps the reduced axis 0
    return fd, x


def test_reduce_scatter_of_a_sum(multidevice_test):
    d, r = multidevice_test.size, multidevice_test.rank
    fd, _ = reduce_scatter_of_a_sum(d)
    full = global_tensor([2 * d, 3 * d], seed=4)
    (out,) = execute(multidevice_test, fd, [full])
    assert torch.equal(out, part(full.sum(0), 0, d, r))
    expect_communication(fd, "ReduceScatter", range(d), "axis=0")


def test_the_profiler_counts_one_communication_per_collective(multidevice_test):
    """PythonProfiler marks the statement posting the collective as
    "communication", not its Wait (nvfuser_direct scripts count them)."""
    d = multidevice_test.size
    fd, x = reduce_scatter_of_a_sum(d)
    inputs = [multidevice_test.shard(global_tensor([2 * d, 3 * d], seed=4), x)]
    backend = multidevice_test.collective_backend
    fd.execute(inputs, backend=backend)
    with PythonProfiler() as prof:
        fd.execute(inputs, backend=backend)
    profiles = prof.profile.kernel_profiles
    communications = [kp.name for kp in profiles if kp.scheduler == "communication"]
    # (One device too: its reduce-scatter is a Communication that copies.)
    assert communications == ["Communication"], [kp.name for kp in profiles]
    assert all(kp.scheduler == "host_ir" for kp in profiles if kp.name == "Wait")


def test_reduce_scatter_of_a_row_parallel_linear(multidevice_test):
    """linear with in_features sharded and the output sharded on its rows."""
    d, r = multidevice_test.size, multidevice_test.rank
    t, k, n = 4 * d, 4 * d, 6
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, k])
        w = fd.define_tensor([n, k])
        y = fd.ops.linear(x, w)
        fd.add_output(y)
        mesh = mesh_of(range(d))
        for tv in (x, w, y):
            tv.set_device_mesh(mesh)
        shard(x, 1, d)
        shard(w, 1, d)
        shard(y, 0, d)
    full_x, full_w = global_tensor([t, k], seed=5), global_tensor([n, k], seed=6)
    (out,) = execute(multidevice_test, fd, [full_x, full_w])
    assert torch.equal(out, part(full_x @ full_w.T, 0, d, r))
    expect_communication(fd, "ReduceScatter", range(d), "axis=0")


@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_allreduce(multidevice_test, op):
    """A reduction over the sharded axis, its output replicated."""
    d = multidevice_test.size
    with FusionDefinition() as fd:
        x = fd.define_tensor([3, 2 * d])
        y = getattr(fd.ops, op)(x, [1])
        fd.add_output(y)
        mesh = mesh_of(range(d))
        x.set_device_mesh(mesh)
        y.set_device_mesh(mesh)
        shard(x, 1, d)
    full = global_tensor([3, 2 * d], seed=7)
    (out,) = execute(multidevice_test, fd, [full])
    expected = {"sum": full.sum(1), "max": full.amax(1), "min": full.amin(1)}[op]
    assert torch.equal(out, expected)
    fields = [] if op == "sum" else [f"op={op}"]
    line = expect_communication(fd, "Allreduce", range(d), *fields)
    if op == "sum":
        assert "op=" not in line, line


def test_allreduce_of_a_sum_over_several_axes(multidevice_test):
    d = multidevice_test.size
    with FusionDefinition() as fd:
        x = fd.define_tensor([2 * d, 4])
        y = fd.ops.sum(x, [0, 1])
        fd.add_output(y)
        mesh = mesh_of(range(d))
        x.set_device_mesh(mesh)
        y.set_device_mesh(mesh)
        shard(x, 0, d)
    full = global_tensor([2 * d, 4], seed=16)
    (out,) = execute(multidevice_test, fd, [full])
    assert torch.equal(out, full.sum())
    expect_communication(fd, "Allreduce", range(d))


def test_alltoall(multidevice_test):
    """set() from sharded on axis 0 to sharded on axis 1."""
    d, r = multidevice_test.size, multidevice_test.rank
    with FusionDefinition() as fd:
        x = fd.define_tensor([2 * d, 3 * d])
        y = fd.ops.set(x)
        fd.add_output(y)
        mesh = mesh_of(range(d))
        x.set_device_mesh(mesh)
        y.set_device_mesh(mesh)
        shard(x, 0, d)
        shard(y, 1, d)
    full = global_tensor([2 * d, 3 * d], seed=8)
    (out,) = execute(multidevice_test, fd, [full])
    assert torch.equal(out, part(full, 1, d, r))
    expect_communication(fd, "AllToAll", range(d), "axis=0", "out_axis=1")


@pytest.mark.parametrize("axis", [0, 1])
def test_sharding_a_replicated_tensor_communicates_nothing(multidevice_test, axis):
    """Each device takes its own part of a replicated input."""
    d, r = multidevice_test.size, multidevice_test.rank
    with FusionDefinition() as fd:
        x = fd.define_tensor([2 * d, 2 * d])
        y = fd.ops.set(x)
        fd.add_output(y)
        mesh = mesh_of(range(d))
        x.set_device_mesh(mesh)
        y.set_device_mesh(mesh)
        shard(y, axis, d)
    full = global_tensor([2 * d, 2 * d], seed=9)
    (out,) = execute(multidevice_test, fd, [full])
    assert torch.equal(out, part(full, axis, d, r))
    expect_no_communication(fd)
    assert "ShardByDevice" in fd.last_host_ir()


@pytest.mark.parametrize("collective", ["Allgather", "ReduceScatter", "Allreduce", "AllToAll"])
@pytest.mark.parametrize("parallel_type", [ParallelType.mesh_x, ParallelType.mesh_y], ids=str)
def test_collective_along_one_axis_of_a_2d_mesh(multidevice_test, parallel_type, collective):
    """On the 2x2 mesh [[0, 1], [2, 3]], mesh_x (the inner axis) groups each
    device with its row, mesh_y with its column."""
    multidevice_test.require(4)
    row, column = divmod(multidevice_test.rank, 2)
    along_x = parallel_type == ParallelType.mesh_x
    team = [2 * row, 2 * row + 1] if along_x else [column, column + 2]
    index = column if along_x else row
    reduces = collective in ("ReduceScatter", "Allreduce")
    with FusionDefinition() as fd:
        x = fd.define_tensor([4, 6])
        y = fd.ops.sum(x, [0]) if reduces else fd.ops.set(x)
        fd.add_output(y)
        mesh = DeviceMesh(torch.arange(4).reshape(2, 2))
        x.set_device_mesh(mesh)
        y.set_device_mesh(mesh)
        x.outer_split(0, 2)
        x.axis(0).parallelize(parallel_type)
        if collective in ("ReduceScatter", "AllToAll"):
            y.outer_split(1, 2)  # y's axis 1 is x's axis 1, reduced or not
            y.axis(1).parallelize(parallel_type)
    full = global_tensor([4, 6], seed=17)
    (out,) = execute(multidevice_test, fd, [full])
    if multidevice_test.rank >= 4:
        # Outside the mesh: a placeholder, and nothing to take part in.
        expect_no_communication(fd)
        return
    expected = {
        "Allgather": full,
        "ReduceScatter": part(full.sum(0), 0, 2, index),
        "Allreduce": full.sum(0),
        "AllToAll": part(full, 1, 2, index),
    }[collective]
    assert torch.equal(out, expected)
    expect_communication(fd, collective, team)


@pytest.mark.parametrize(
    "stream_above", [True, False], ids=["stream_then_device", "device_then_stream"]
)
def test_sharding_a_replicated_tensor_into_stream_chunks(multidevice_test, stream_above):
    """Each stream iteration takes the device's part of its chunk from the
    whole replicated input (the last chunks of a device's shard may be
    short)."""
    d, r, s = multidevice_test.size, multidevice_test.rank, 3
    t = 2 * s * d if stream_above else 5 * d
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, 3])
        y = fd.ops.set(x)
        fd.add_output(y)
        mesh = mesh_of(range(d))
        x.set_device_mesh(mesh)
        y.set_device_mesh(mesh)
        if stream_above:
            stream_chunks_then_devices(y, 0, s, d)
        else:
            shard(y, 0, d)
            y.outer_split(1, s)
            y.axis(1).parallelize(ParallelType.stream)
    full = global_tensor([t, 3], seed=15)
    (out,) = execute(multidevice_test, fd, [full])
    expected = stream_then_device(full, 0, s, d, r) if stream_above else part(full, 0, d, r)
    assert torch.equal(out, expected)
    expect_no_communication(fd)
    assert "ShardByDevice" in fd.last_host_ir()


def test_stream_chunked_allgather_before_a_column_parallel_linear(multidevice_test):
    """Sequence parallel: each stream chunk of tokens, sharded across the
    devices, is gathered in front of the column-parallel linear."""
    d, r, s = multidevice_test.size, multidevice_test.rank, 3
    t, h, n = 2 * s * d, 8, 4 * d
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, h])
        w = fd.define_tensor([n, h])
        y = fd.ops.linear(x, w)
        fd.add_output(y)
        mesh = mesh_of(range(d))
        x.set_device_mesh(mesh)
        w.set_device_mesh(mesh)
        stream_chunks_then_devices(x, 0, s, d)
        shard(w, 0, d)
    full_x, full_w = global_tensor([t, h], seed=10), global_tensor([n, h], seed=11)
    (out,) = execute(multidevice_test, fd, [full_x, full_w])
    assert torch.equal(out, part(full_x @ full_w.T, 1, d, r))
    expect_communication(fd, "Allgather", range(d))
    expect_inside_stream_loop(fd, "Allgather")


def test_gathering_device_shards_into_stream_chunks_runs_whole(multidevice_test):
    """x's outermost axis is split across the devices and the linear's
    output's same axis across streams: a stream chunk of the output is no
    chunk of this device's shard, so the allgather runs whole, before the
    loop, and the numbers are right."""
    d = multidevice_test.size
    m, k, n = 4, 8, 6
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, m, k])
        w = fd.define_tensor([n, k])
        y = fd.ops.linear(x, w)
        fd.add_output(y)
        mesh = mesh_of(range(d))
        for tv in (x, w, y):
            tv.set_device_mesh(mesh)
        x.axis(0).parallelize(ParallelType.mesh_x)
        y.axis(0).parallelize(ParallelType.stream)
    full_x, full_w = global_tensor([d, m, k], seed=16), global_tensor([n, k], seed=17)
    (out,) = execute(multidevice_test, fd, [full_x, full_w])
    assert torch.equal(out, full_x @ full_w.T)
    expect_communication(fd, "Allgather", range(d))
    lines = host_ir_lines(fd)
    gather = next(line for line in lines if "type=Allgather" in line)
    assert not gather.startswith(" " * 4), "\n".join(lines)  # top level


def test_stream_chunked_reduce_scatter_after_a_row_parallel_linear(multidevice_test):
    """Sequence parallel: each stream chunk of the row-parallel linear's
    partial sums is reduce-scattered along the tokens."""
    d, r, s = multidevice_test.size, multidevice_test.rank, 3
    t, k, n = 2 * s * d, 4 * d, 6
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, k])
        w = fd.define_tensor([n, k])
        y = fd.ops.linear(x, w)
        fd.add_output(y)
        mesh = mesh_of(range(d))
        for tv in (x, w, y):
            tv.set_device_mesh(mesh)
        x.outer_split(0, s)
        x.axis(0).parallelize(ParallelType.stream)
        shard(x, 2, d)
        shard(w, 1, d)
        stream_chunks_then_devices(y, 0, s, d)
    full_x, full_w = global_tensor([t, k], seed=12), global_tensor([n, k], seed=13)
    (out,) = execute(multidevice_test, fd, [full_x, full_w])
    assert torch.equal(out, stream_then_device(full_x @ full_w.T, 0, s, d, r))
    expect_communication(fd, "ReduceScatter", range(d))
    expect_inside_stream_loop(fd, "ReduceScatter")


def test_outputs_have_the_input_dtype(multidevice_test):
    """Collectives keep bfloat16 (exact for these small integers)."""
    d = multidevice_test.size
    with FusionDefinition() as fd:
        x = fd.define_tensor([2 * d, 4], dtype=DataType.BFloat16)
        y = fd.ops.set(x)
        fd.add_output(y)
        mesh = mesh_of(range(d))
        x.set_device_mesh(mesh)
        y.set_device_mesh(mesh)
        shard(x, 0, d)
    full = global_tensor([2 * d, 4], seed=14).to(torch.bfloat16)
    (out,) = execute(multidevice_test, fd, [full])
    assert out.dtype == torch.bfloat16
    assert torch.equal(out, full)


def test_a_reshape_part_smaller_than_the_mesh_is_gathered_first(multidevice_test):
    """x [2d, 8] split across the d devices, reshaped to [2, d, 8]: the
    output's outer axis of 2 cannot hold a split across d > 2 devices, so x
    is gathered before the reshape and the output is whole; on one or two
    devices the output stays split like x."""
    d = multidevice_test.size
    with FusionDefinition() as fd:
        x = fd.define_tensor([2 * d, 8])
        fd.add_output(fd.ops.reshape(x, [2, d, 8]))
        x.set_device_mesh(DeviceMesh(torch.arange(d)))
        x.outer_split(0, d)
        x.axis(0).parallelize(ParallelType.mesh_x)
    full = global_tensor([2 * d, 8], seed=41)
    (out,) = execute(multidevice_test, fd, [full])
    output = fd.output_tensors()[0]
    assert torch.equal(out, shard_tensor(full.reshape(2, d, 8), output))
    gathered = d > 2
    axes = {pt: axis for pt, axis, _, _ in output._device_axes()}
    assert axes == ({} if gathered else {ParallelType.mesh_x: 0})
    kinds = [line.split("type=")[1].split(",")[0] for line in communications(fd)]
    assert kinds == (["Allgather"] if gathered else [])
