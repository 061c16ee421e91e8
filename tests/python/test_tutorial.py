# SPDX-License-Identifier: MIT
"""A tour of mdfuser, as tests you can run.

Run it with ``pytest tests/python/test_tutorial.py -s`` to see what it
prints. It uses one process, so its mesh has one device; the same code runs
unchanged on N processes (``mpirun -np N pytest ...``), where each process
holds 1/N of the sharded axes.
"""

from __future__ import annotations

import torch

from mdfuser import DataType, FusionDefinition, ParallelType
from mdfuser.multidevice import Communicator, DeviceMesh, shard_tensor


def test_1_a_fusion_is_written_with_global_shapes():
    # A fusion reads like single-device code: shapes are the whole tensors'.
    # -1 marks a size known only when the fusion runs.
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, 64], dtype=DataType.Float)
        w = fd.define_tensor(shape=[16, 64], dtype=DataType.Float)
        y = fd.ops.linear(x, w)
        fd.add_output(y)

    # Printing shows each tensor's axes. `iS0{i0}` is an iteration axis (i),
    # serial (S), named 0, of extent i0 (the -1); the output's `rS..{64}` is
    # the reduction over in_features.
    text = str(fd.fusion)
    print(text)
    assert "T0_g_float[iS0{i0}, iS1{64}]" in text
    assert "T2_g_float[iS4{i0}, iS5{16}, rS6{64}]" in text

    # Without a mesh it simply runs, on whatever device its inputs are on.
    (out,) = fd.execute([torch.ones(3, 64), torch.ones(16, 64)])
    assert torch.equal(out, torch.full((3, 16), 64.0))


def test_2_a_mesh_and_a_split_shard_a_tensor():
    # Processes form a DeviceMesh. mesh_x is its (only, here) axis.
    d = Communicator.instance().size()
    mesh = DeviceMesh(torch.arange(d))

    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, 64], dtype=DataType.Float)
        w = fd.define_tensor(shape=[16, 64], dtype=DataType.Float)
        fd.add_output(fd.ops.linear(x, w))
        # Sharding is a split of an axis plus a parallel type: the outer part
        # of in_features goes across the d devices, each keeps 64 / d.
        for tv in (x, w):
            tv.set_device_mesh(mesh)
            tv.outer_split(1, d)
            tv.axis(1).parallelize(ParallelType.mesh_x)
    # Loop axes now read [iS0{i0}, ideviceIdx.x7{d}, iS8{64 / d}].
    assert x.axis(1).parallel_type == ParallelType.mesh_x

    # execute() takes each process's local shard and returns its local
    # result. linear reduced over the sharded axis, so mdfuser inserted an
    # allreduce: every process gets the full [3, 16] result.
    full_x, full_w = torch.randn(3, 64), torch.randn(16, 64)
    (out,) = fd.execute([shard_tensor(full_x, x), shard_tensor(full_w, w)])
    torch.testing.assert_close(out, full_x @ full_w.T, rtol=1e-4, atol=1e-4)
    assert "type=Allreduce" in fd.last_host_ir()


def test_3_a_stream_split_overlaps_chunks():
    # Splitting the token axis on `stream` cuts the work into s chunks, each
    # run on its own CUDA stream: while chunk i is being allreduced, chunk
    # i + 1 is already multiplying.
    d, s = Communicator.instance().size(), 3
    mesh = DeviceMesh(torch.arange(d))
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, 64], dtype=DataType.BFloat16)
        w = fd.define_tensor(shape=[16, 64], dtype=DataType.BFloat16)
        fd.add_output(fd.ops.linear(x, w))
        for tv in (x, w):
            tv.set_device_mesh(mesh)
        x.outer_split(0, s)
        x.axis(0).parallelize(ParallelType.stream)
        x.outer_split(2, d)
        x.axis(2).parallelize(ParallelType.mesh_x)
        w.outer_split(1, d)
        w.axis(1).parallelize(ParallelType.mesh_x)

    # Entries in {-1, 0, 1} keep every bf16 sum exact.
    full_x = torch.randint(-1, 2, (10, 64)).to(torch.bfloat16)
    full_w = torch.randint(-1, 2, (16, 64)).to(torch.bfloat16)
    (out,) = fd.execute([shard_tensor(full_x, x), shard_tensor(full_w, w)])
    assert torch.equal(out, torch.nn.functional.linear(full_x, full_w))

    # The host program shows how: the output is allocated once; the caller's
    # stream is captured; each iteration switches to worker stream i, waits
    # for the caller's stream, computes its chunk of partial sums into a
    # fresh buffer and allreduces it into its chunk of the output; a join
    # loop makes the caller's stream wait for every worker. 10 rows in 3
    # chunks give chunks of 4, 4 and 2 rows.
    program = fd.last_host_ir()
    print(program)
    lines = [line.strip() for line in program.splitlines()]
    assert lines[1].endswith("= ALLOCATE(mem_type=global, zero_init=false)")
    assert lines[2] == "Stream 0 = GetCurrentStream()"
    assert lines[3].startswith("FOR ") and lines[3].endswith(" from 0 to 3:")
    assert lines[4].startswith("SetCurrentStream(Stream i")
    assert lines[5] == "Synchronize(Stream 0)"
    assert any(line.startswith("Communication 0 (type=Allreduce") for line in lines)
    assert lines[-4] == "SetCurrentStream(Stream 0)"
    assert lines[-2] == "Synchronize(Stream " + lines[-3].split()[1] + ")"
