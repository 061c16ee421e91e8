# SPDX-License-Identifier: MIT
"""The reference system's overlapped column-parallel linear, in its two
forms: the gathered input split into one stream chunk per device, each
chunk broadcast from the device holding it ("broadcast"), or, swizzled with
``swizzle1d``, each device starting on its own part ("collective_permute",
mdfuser's allgather ring). Both against plain torch on the same global
inputs, under ``mpirun -np N`` (N = 1, 2, 3, 4).

The definition is written as the reference's test writes it: only the
import differs.
"""

from __future__ import annotations

import re

import pytest
import torch

import mdfuser as nvfuser
from mdfuser import DataType, FusionDefinition


def column_parallel_linear_forward(h: int, d: int, parallelism: str) -> FusionDefinition:
    with FusionDefinition() as fd:
        inp_tv = fd.define_tensor((-1, h), contiguity=True, dtype=DataType.Float)
        weight_tv = fd.define_tensor((4 * h, h), contiguity=True, dtype=DataType.Float)
        ag_out = fd.ops.set(inp_tv)
        out_tv = fd.ops.linear(ag_out, weight_tv)
        fd.add_output(out_tv)

        mesh = nvfuser.multidevice.DeviceMesh(torch.arange(d))
        for tv in [inp_tv, weight_tv]:
            tv.set_device_mesh(mesh)
            tv.outer_split(0, d)
            tv.axis(0).parallelize(nvfuser.ParallelType.mesh_x)

        ag_out.set_device_mesh(mesh)
        ag_out.outer_split(0, d)
        if parallelism == "collective_permute":
            ag_out.swizzle1d(0, nvfuser.ParallelType.mesh_x)
        ag_out.axis(0).parallelize(nvfuser.ParallelType.stream)
    return fd


def communications(program: str, kind: str) -> list[str]:
    return re.findall(rf"Communication \d+ \(type={kind},[^\n]*", program)


@pytest.mark.mpi
@pytest.mark.parametrize("parallelism", ["broadcast", "collective_permute"])
def test_column_parallel_linear_forward(multidevice_test, parallelism):
    # t and 4h split evenly across any number of devices; integer entries
    # keep every sum exact.
    d = multidevice_test.size
    h, t = 2 * d, 6 * d
    fd = column_parallel_linear_forward(h, d, parallelism)

    g = torch.Generator().manual_seed(0)
    inp_ref = torch.randint(-2, 3, (t, h), generator=g).float()
    weight_ref = torch.randint(-2, 3, (4 * h, h), generator=g).float()
    out_ref = torch.nn.functional.linear(inp_ref, weight_ref)

    inp = multidevice_test.shard(inp_ref, fd.fusion.inputs()[0])
    weight = multidevice_test.shard(weight_ref, fd.fusion.inputs()[1])
    (out,) = fd.execute([inp, weight], backend=multidevice_test.collective_backend)
    (expected,) = [multidevice_test.shard(out_ref, tv) for tv in fd.output_tensors()]
    torch.testing.assert_close(out.cpu(), expected.cpu(), rtol=0, atol=0)

    program = fd.last_host_ir()
    loops = re.findall(r"FOR i\d+ from 0 to (\d+):", program)
    if parallelism == "broadcast":
        # One loop over the d chunks: a broadcast from device i, then the GEMM
        # of chunk i.
        (broadcast,) = communications(program, "Broadcast")
        assert re.search(r"root=team\[i\d+\]", broadcast), broadcast
        assert loops[0] == str(d), program
        after = program[program.index(broadcast) :]
        assert "= linear(" in after, program
        assert communications(program, "Allgather") == [], program
    elif d > 1:
        # The allgather ring: d - 1 permutes in a loop of d - 1 steps, the
        # last step's GEMM after it; no allgather, no stream loop of chunks.
        assert len(communications(program, "CollectivePermute")) == 1, program
        assert loops == [str(d - 1)], program
        assert program.count("= linear(") == 2, program
        assert communications(program, "Allgather") == [], program


@pytest.mark.mpi
def test_swizzle1d_takes_a_device_parallel_type(multidevice_test):
    with FusionDefinition() as fd:
        x = fd.define_tensor((-1, 3), dtype=DataType.Float)
        y = fd.ops.set(x)
        fd.add_output(y)
        y.outer_split(0, 2)
        with pytest.raises(ValueError, match="must be a device one .* got stream"):
            y.swizzle1d(0, nvfuser.ParallelType.stream)
        with pytest.raises(ValueError, match="axis 1 .* must be the outer part of an outer split"):
            y.swizzle1d(1, nvfuser.ParallelType.mesh_x)


@pytest.mark.mpi
def test_a_swizzled_axis_must_be_the_stream_split(multidevice_test):
    # Every rank refuses the schedule when it compiles, before any
    # communication.
    d = multidevice_test.size
    mesh = nvfuser.multidevice.DeviceMesh(torch.arange(d))
    with FusionDefinition() as fd:
        x = fd.define_tensor((-1, 3), dtype=DataType.Float)
        gathered = fd.ops.set(x)
        fd.add_output(gathered)
        for tv in (x, gathered):
            tv.set_device_mesh(mesh)
            tv.outer_split(0, d)
        x.axis(0).parallelize(nvfuser.ParallelType.mesh_x)
        gathered.swizzle1d(0, nvfuser.ParallelType.mesh_x)
    x_shard = multidevice_test.shard(torch.zeros(4 * d, 3), x)
    with pytest.raises(ValueError, match=r"axis 0 of T1.* not parallelized on ParallelType.stream"):
        fd.execute([x_shard], backend=multidevice_test.collective_backend)
