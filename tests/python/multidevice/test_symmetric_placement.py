# SPDX-License-Identifier: MIT
"""A tensor the user places in symmetric memory (set_memory_type) under
``mpirun -np N``: the values are torch's on every backend; on the CUDA
communication backend its buffer is allocated there, shared with its mesh.
"""

from __future__ import annotations

import re

import pytest
import torch

from mdfuser import CommunicatorBackend, DataType, FusionDefinition, MemoryType, ParallelType
from mdfuser.multidevice import DeviceMesh


def placed_row_parallel(d: int, dtype: DataType) -> tuple[FusionDefinition, object]:
    """relu(x) placed in symmetric memory, then a linear whose in_features
    are split across the d devices."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, 4 * d], dtype=dtype)
        w = fd.define_tensor([6, 4 * d], dtype=dtype)
        a = fd.ops.relu(x)
        fd.add_output(fd.ops.linear(a, w))
        mesh = DeviceMesh(range(d))
        for tv in (x, w):
            tv.set_device_mesh(mesh)
            tv.outer_split(1, d)
            tv.axis(1).parallelize(ParallelType.mesh_x)
        a.set_memory_type(MemoryType.symmetric)
    return fd, a


def allocation_of(fd: FusionDefinition, tv) -> str | None:
    """The ALLOCATE line of `tv`'s buffer in the last program."""
    name = repr(tv).split("[")[0]  # T3_sym_float
    assert name.endswith("_sym_float") or name.endswith("_sym___bfloat"), name
    match = re.search(rf"{re.escape(name)}\[[^\n]*= ALLOCATE\([^\n]*", fd.last_host_ir())
    return None if match is None else match.group(0)


def run(test, backend):
    d = test.size
    fd, a = placed_row_parallel(d, test.mdfuser_dtype)
    g = torch.Generator().manual_seed(1)
    x = torch.randint(-2, 3, (8, 4 * d), generator=g).float()
    w = torch.randint(-2, 3, (6, 4 * d), generator=g).float()
    args = [test.shard(t, tv) for t, tv in zip((x, w), fd.fusion.inputs())]
    (out,) = fd.execute([t.to(test.dtype) for t in args], backend=backend)
    torch.testing.assert_close(out.cpu().float(), torch.nn.functional.linear(x.relu(), w))
    return fd, a


@pytest.mark.mpi
def test_the_values_do_not_depend_on_the_placement(multidevice_test):
    fd, a = run(multidevice_test, multidevice_test.collective_backend)
    # Gloo and NCCL have no symmetric memory: an ordinary buffer.
    allocation = allocation_of(fd, a)
    assert allocation is not None and "mem_type=global" in allocation, fd.last_host_ir()


@pytest.mark.mpi
def test_the_cuda_backend_allocates_it_in_symmetric_memory(multidevice_test):
    if multidevice_test.device.type != "cuda":
        pytest.skip("the CUDA communication backend needs GPUs")
    fd, a = run(multidevice_test, CommunicatorBackend.cuda)
    team = " ".join(str(r) for r in range(multidevice_test.size))
    allocation = allocation_of(fd, a)
    assert allocation is not None, fd.last_host_ir()
    assert f"mem_type=symmetric, team=({team})" in allocation
