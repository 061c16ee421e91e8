# SPDX-License-Identifier: MIT
"""TensorView.set_memory_type with the reference system's MemoryType names:
global and symmetric are placements of a buffer mdfuser records and prints
(and, on the CUDA communication backend, honours); the kernel memories
(local, shared, tensor) are refused."""

from __future__ import annotations

import pytest
import torch

from mdfuser import DataType, FusionDefinition, MemoryType


def test_a_placement_is_recorded_and_printed():
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, 4], dtype=DataType.Float)
        y = fd.ops.relu(x)
        fd.add_output(fd.ops.mul(y, 2.0))
        y.set_memory_type(MemoryType.symmetric)
    assert y.memory_type == MemoryType.symmetric
    assert "_sym_float[" in repr(y)
    assert repr(y) in repr(fd)
    # On the CPU (Gloo) there is no symmetric memory: an ordinary buffer,
    # the same values.
    x_in = torch.randn(3, 4)
    (out,) = fd.execute([x_in])
    torch.testing.assert_close(out, x_in.relu() * 2)
    assert "mem_type=symmetric" not in fd.last_host_ir()


def test_global_is_the_default_and_can_be_asked_again():
    with FusionDefinition() as fd:
        x = fd.define_tensor([4], dtype=DataType.Float)
        fd.add_output(x)
    # `global` is a Python keyword: the value is reached by name.
    global_memory = getattr(MemoryType, "global")
    assert x.memory_type == global_memory
    x.set_memory_type(MemoryType.symmetric)
    x.set_memory_type(global_memory)
    assert x.memory_type == global_memory


@pytest.mark.parametrize("name", ["local", "shared", "tensor"])
def test_kernel_memories_are_refused(name):
    with FusionDefinition() as fd:
        x = fd.define_tensor([4], dtype=DataType.Float)
        fd.add_output(x)
    with pytest.raises(ValueError, match=rf"MemoryType\.{name} is not available for T0"):
        x.set_memory_type(getattr(MemoryType, name))


def test_a_memory_type_must_be_a_memory_type():
    with FusionDefinition() as fd:
        x = fd.define_tensor([4], dtype=DataType.Float)
        fd.add_output(x)
    with pytest.raises(TypeError, match="set_memory_type"):
        x.set_memory_type("symmetric")


def test_an_executed_fusion_keeps_its_placements():
    with FusionDefinition() as fd:
        x = fd.define_tensor([4], dtype=DataType.Float)
        fd.add_output(fd.ops.neg(x))
    fd.execute([torch.ones(4)])
    with pytest.raises(ValueError, match="already been executed"):
        x.set_memory_type(MemoryType.symmetric)
