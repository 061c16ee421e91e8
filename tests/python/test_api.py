# SPDX-License-Identifier: MIT
"""The Python API in one process: definitions, schedules, execution, errors."""

from __future__ import annotations

import pytest
import torch
from helpers import row_parallel_linear

import mdfuser
from mdfuser import DataType, FusionDefinition, ParallelType
from mdfuser.multidevice import DeviceMesh


def integers(*shape: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(-1, 2, shape, generator=generator).to(torch.bfloat16)


def test_definition_prints_and_lists_its_tensors():
    fd = row_parallel_linear(d=2, s=3, h=4)
    inputs, outputs = fd.fusion.inputs(), fd.fusion.outputs()
    assert len(inputs) == 2 and len(outputs) == 1
    assert all(isinstance(tv, mdfuser.TensorView) for tv in inputs + outputs)
    inp, w = inputs
    assert inp.ndim == 2 and inp.num_loop_axes == 4
    assert inp.dtype() == DataType.BFloat16
    assert inp.axis(0).parallel_type == ParallelType.stream
    assert inp.axis(2).parallel_type == ParallelType.mesh_x
    assert inp.axis(2).extent().value == 2
    assert inp.axis(1).extent().is_symbolic()  # ceilDiv(t, 3), t known at run time
    assert inp.axis(1).extent().value is None
    assert [e.value for e in w.shape()] == [4, 16]
    assert inp.size(0).is_symbolic() and w.size(-1).value == 16
    text = str(fd.fusion)
    assert "T0_g___bfloat[istreamIdx7{3}, iS8{ceilDiv(i0, 3)}, ideviceIdx.x9{2}, iS10{8}]" in text
    assert "Outer split: iS1{16} by factor 2 -> ideviceIdx.x9{2}, iS10{8}" in text
    assert "= linear(T0_g___bfloat" in text
    assert repr(inp.device_mesh) == "DeviceMesh{0 1}"


def test_single_device_execution_is_exact():
    fd = row_parallel_linear(d=1, s=3, h=8)
    inp, w = integers(10, 32, seed=1), integers(8, 32, seed=2)
    (out,) = fd.execute([inp, w])
    assert torch.equal(out, torch.nn.functional.linear(inp, w))


def test_programs_are_cached_per_input_signature():
    fd = row_parallel_linear(d=1, s=2, h=8)
    w = integers(8, 32)
    for _ in range(3):
        fd.execute([integers(6, 32), w], _enable_options=["host_ir_lowering"])
    assert fd._cache.num_programs == 1
    fd.execute([integers(7, 32), w])
    assert fd._cache.num_programs == 2


def test_matmul_and_set_without_a_mesh():
    with FusionDefinition() as fd:
        a = fd.define_tensor([-1, 8], dtype=DataType.Float)
        b = fd.define_tensor([8, 4], dtype=DataType.Float)
        c = fd.ops.matmul(a, b)
        fd.add_output(fd.ops.set(c))
        a.outer_split(0, 2)
        a.axis(0).parallelize(ParallelType.stream)
    x, y = torch.randn(5, 8), torch.randn(8, 4)
    (out,) = fd.execute([x, y])
    torch.testing.assert_close(out, x @ y)


# ------------------------------------------------------------ definition errors


def test_define_tensor_rejects_bad_arguments():
    fd = FusionDefinition()
    with pytest.raises(TypeError, match="shape must be a sequence of ints"):
        fd.define_tensor("ab")
    with pytest.raises(TypeError, match=r"shape\[1\] must be an int, got 2.5"):
        fd.define_tensor([2, 2.5])
    with pytest.raises(ValueError, match="axis 1 has extent -3; expected a size >= 0"):
        fd.define_tensor([2, -3])
    with pytest.raises(TypeError, match="dtype must be an mdfuser.DataType"):
        fd.define_tensor([2], dtype=torch.float32)
    with pytest.raises(ValueError, match="contiguity has 1 entries but shape has 2 axes"):
        fd.define_tensor([2, 3], contiguity=[True])


def test_split_and_parallelize_errors_name_the_axis():
    fd = FusionDefinition()
    tv = fd.define_tensor([8, 4])
    with pytest.raises(ValueError, match="axis 5 is out of range for T0.*valid: -2 to 1"):
        tv.axis(5)
    with pytest.raises(ValueError, match="split factor must be positive, got 0"):
        tv.outer_split(0, 0)
    tv.outer_split(0, 2)
    tv.axis(0).parallelize(ParallelType.stream)
    with pytest.raises(ValueError, match="already parallelized on stream; it cannot also"):
        tv.axis(0).parallelize(ParallelType.mesh_x)
    with pytest.raises(ValueError, match="split an axis before parallelizing it"):
        tv.outer_split(0, 2)
    with pytest.raises(ValueError, match="only one axis per parallel type"):
        tv.axis(1).parallelize(ParallelType.stream)


def test_operand_errors():
    fd = FusionDefinition()
    x = fd.define_tensor([4, 8], dtype=DataType.Float)
    w16 = fd.define_tensor([3, 8], dtype=DataType.BFloat16)
    w = fd.define_tensor([3, 6], dtype=DataType.Float)
    with pytest.raises(TypeError, match="operands must have the same dtype"):
        fd.ops.linear(x, w16)
    with pytest.raises(ValueError, match="in_features .* must match, got 8 and 6"):
        fd.ops.linear(x, w)
    with pytest.raises(TypeError, match="add_output: expected a TensorView, got int"):
        fd.add_output(3)
    other = FusionDefinition()
    with pytest.raises(ValueError, match="belongs to another fusion"):
        fd.add_output(other.define_tensor([2]))
    with pytest.raises(ValueError, match="belongs to another FusionDefinition"):
        fd.ops.neg(other.define_tensor([2]))


def test_device_mesh_errors():
    with pytest.raises(ValueError, match="lists device 1 twice"):
        DeviceMesh([0, 1, 1])
    with pytest.raises(TypeError, match="devices must be integers"):
        DeviceMesh(torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match="at least one device"):
        DeviceMesh([])
    mesh = DeviceMesh(torch.arange(4).reshape(2, 2))
    assert repr(mesh) == "DeviceMesh{{0 1} {2 3}}"
    assert mesh.team(3, ParallelType.mesh_x) == [2, 3]
    assert mesh.team(3, ParallelType.mesh_y) == [1, 3]


# ------------------------------------------------------------- execute errors


@pytest.fixture
def single_device_fusion() -> FusionDefinition:
    return row_parallel_linear(d=1, s=2, h=8)


def test_execute_checks_the_inputs(single_device_fusion):
    fd = single_device_fusion
    inp, w = integers(6, 32), integers(8, 32)
    with pytest.raises(TypeError, match="expects a list of torch.Tensor, got Tensor"):
        fd.execute(inp)
    with pytest.raises(TypeError, match="input 1 must be a torch.Tensor, got int"):
        fd.execute([inp, 3])
    with pytest.raises(ValueError, match="execute expected 2 inputs .* got 1"):
        fd.execute([inp])
    with pytest.raises(
        TypeError, match=r"input 1 \(T1\) has dtype Float but was defined as BFloat16"
    ):
        fd.execute([inp, w.float()])
    with pytest.raises(ValueError, match=r"input 0 \(T0\) has 3 dimensions but was defined with 2"):
        fd.execute([inp.unsqueeze(0), w])
    with pytest.raises(
        ValueError, match=r"input 1 \(T1\) axis 0 has local size 7, but the fusion defines it as 8"
    ):
        fd.execute([inp, integers(7, 32)])
    with pytest.raises(ValueError, match="unknown option 'bogus' in _enable_options"):
        fd.execute([inp, w], _enable_options=["bogus"])
    with pytest.raises(TypeError, match="_disable_options must be a list of option names"):
        fd.execute([inp, w], _disable_options="host_ir_lowering")


def test_schedule_is_frozen_after_execute(single_device_fusion):
    fd = single_device_fusion
    fd.execute([integers(6, 32), integers(8, 32)])
    inp = fd.fusion.inputs()[0]
    with pytest.raises(ValueError, match="has already been executed"):
        inp.outer_split(1, 2)


def test_mesh_larger_than_the_world_says_how_to_launch():
    fd = row_parallel_linear(d=2, s=2, h=8)
    with pytest.raises(ValueError, match=r"not started by a launcher.*mpirun -np 2.*torchrun"):
        fd.execute([integers(6, 16), integers(8, 16)])


def test_sharded_axis_must_divide_evenly():
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, 6], dtype=DataType.Float)
        w = fd.define_tensor([3, 6], dtype=DataType.Float)
        fd.add_output(fd.ops.linear(x, w))
        mesh = DeviceMesh([0, 1, 2, 3])
        for tv in (x, w):
            tv.set_device_mesh(mesh)
            tv.outer_split(1, 4)
            tv.axis(1).parallelize(ParallelType.mesh_x)
    with pytest.raises(ValueError, match="has extent 6, which is not divisible into 4 equal parts"):
        fd.execute([torch.zeros(2, 2), torch.zeros(3, 2)])


def test_operands_sharded_differently_are_reconciled():
    # in_features of the input are sharded, the weight's are not: each
    # device takes its part of the weight, and the products are summed.
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, 8], dtype=DataType.Float)
        w = fd.define_tensor([3, 8], dtype=DataType.Float)
        fd.add_output(fd.ops.linear(x, w))
        mesh = DeviceMesh([0])
        x.set_device_mesh(mesh)
        w.set_device_mesh(mesh)
        x.outer_split(1, 1)
        x.axis(1).parallelize(ParallelType.mesh_x)
    xs, ws = integers(2, 8, seed=3).float(), integers(3, 8, seed=4).float()
    (out,) = fd.execute([xs, ws])
    assert torch.equal(out, torch.nn.functional.linear(xs, ws))
    assert "ShardByDevice" in fd.last_host_ir()
