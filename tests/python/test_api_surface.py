# SPDX-License-Identifier: MIT
"""The parts of the Python surface that scripts written for nvFuser's
nvfuser_direct touch, in one process."""

from __future__ import annotations

import pytest
import torch

import mdfuser
from mdfuser import CommunicatorBackend, DataType, FusionDefinition, ParallelType, PythonProfiler
from mdfuser.multidevice import (
    DeviceMesh,
    MultiDeviceExecutor,
    MultiDeviceExecutorParams,
    shard_tensor,
)
from mdfuser.pytorch_utils import nvfuser_dtype_to_torch_dtype, torch_dtype_to_nvfuser_dtype


def small_mlp() -> tuple[FusionDefinition, list[torch.Tensor]]:
    with FusionDefinition() as fd:
        x = fd.define_tensor([4, 8], dtype=DataType.Float)
        w = fd.define_tensor([6, 8], dtype=DataType.Float)
        y = fd.ops.relu(fd.ops.linear(x, w))
        fd.add_output(fd.ops.mul(y, fd.define_scalar(2.0)))
    g = torch.Generator().manual_seed(0)
    return fd, [torch.randn(4, 8, generator=g), torch.randn(6, 8, generator=g)]


def test_torch_dtype_to_nvfuser_dtype():
    assert torch_dtype_to_nvfuser_dtype(torch.bfloat16) == DataType.BFloat16
    assert torch_dtype_to_nvfuser_dtype(torch.float32) == DataType.Float
    assert torch_dtype_to_nvfuser_dtype(torch.int64) == DataType.Int
    assert torch_dtype_to_nvfuser_dtype(torch.bool) == DataType.Bool
    assert torch_dtype_to_nvfuser_dtype(float) == DataType.Double
    with pytest.raises(KeyError, match="no DataType for torch.uint8"):
        torch_dtype_to_nvfuser_dtype(torch.uint8)


def test_nvfuser_dtype_to_torch_dtype():
    pairs = {
        DataType.Float: torch.float32,
        DataType.Double: torch.float64,
        DataType.Half: torch.float16,
        DataType.BFloat16: torch.bfloat16,
        DataType.Int: torch.int64,
        DataType.Int32: torch.int32,
        DataType.Bool: torch.bool,
        DataType.UInt64: torch.uint64,
    }
    for dtype, torch_dtype in pairs.items():
        assert nvfuser_dtype_to_torch_dtype(dtype) == torch_dtype
        assert torch_dtype_to_nvfuser_dtype(torch_dtype) == dtype


def test_device_mesh_from_a_range_and_its_size():
    mesh = DeviceMesh(range(4))
    assert mesh.size == 4 and len(mesh) == 4
    assert mesh == DeviceMesh([0, 1, 2, 3]) == DeviceMesh(torch.arange(4))
    assert 3 in mesh and 4 not in mesh
    full = torch.arange(8).reshape(4, 2)
    # An int picks another device's part; a ParallelType this rank's (rank 0).
    assert torch.equal(mesh.shard_tensor(full, 0, 2), full[2:3])
    assert torch.equal(mesh.shard_tensor(full, 0, ParallelType.mesh_x), full[0:1])
    assert torch.equal(mesh.shard_tensor(full, -2), full[0:1])
    with pytest.raises(ValueError, match="does not split evenly across the 4 devices"):
        mesh.shard_tensor(torch.zeros(6), 0)


def test_shard_tensor_follows_a_stream_split_above_the_device_split():
    # [stream{2}, device{2}, rest{2}] on 8 rows: device 0 holds rows 0-1 and
    # 4-5 (one run per stream chunk).
    with FusionDefinition() as fd:
        x = fd.define_tensor([8], dtype=DataType.Float)
        fd.add_output(fd.ops.set(x))
        x.set_device_mesh(DeviceMesh([0, 1]))
        x.outer_split(0, 2)
        x.axis(0).parallelize(ParallelType.stream)
        x.outer_split(1, 2)
        x.axis(1).parallelize(ParallelType.mesh_x)
    assert torch.equal(shard_tensor(torch.arange(8.0), x), torch.tensor([0.0, 1.0, 4.0, 5.0]))


def test_define_scalar_and_python_numbers_promote_as_nvfuser_does():
    with FusionDefinition() as fd:
        x = fd.define_tensor([3], dtype=DataType.BFloat16)
        i = fd.define_tensor([3], dtype=DataType.Int)
        fd.add_output(fd.ops.mul(x, fd.define_scalar(0.5)))
        fd.add_output(fd.ops.add(i, 0.5))
        fd.add_output(fd.ops.lt(i, fd.define_scalar(2, dtype=DataType.Int32)))
    xs = torch.tensor([1.0, 2.0, 3.0], dtype=torch.bfloat16)
    ints = torch.tensor([1, 2, 3])
    a, b, c = fd.execute([xs, ints])
    # BFloat16 arithmetic is Float; a Python float is a Double scalar.
    assert torch.equal(a, xs.float() * 0.5) and a.dtype == torch.float32
    assert torch.equal(b, ints.double() + 0.5) and b.dtype == torch.float64
    assert torch.equal(c, ints < 2)
    with pytest.raises(ValueError, match="cannot define a scalar input in a fusion that has"):
        fd.define_scalar(dtype=DataType.Double)
    with pytest.raises(ValueError, match="does not fit a 64-bit integer"):
        FusionDefinition().define_scalar(2**63)
    with pytest.raises(TypeError, match="cannot be a Bool"):
        FusionDefinition().define_scalar(1.5, dtype=DataType.Bool)


def test_an_input_can_be_an_output():
    with FusionDefinition() as fd:
        x = fd.define_tensor([3], dtype=DataType.Float)
        fd.add_output(x)
        fd.add_output(fd.ops.neg(x))
    t = torch.tensor([1.0, 2.0, 3.0])
    same, neg = fd.execute([t])
    assert torch.equal(same, t) and torch.equal(neg, -t)


def test_backends_and_the_multidevice_executor():
    fd, inputs = small_mlp()
    (expected,) = fd.execute(inputs)
    (with_gloo,) = fd.execute(inputs, backend=CommunicatorBackend.gloo)
    assert torch.equal(with_gloo, expected)
    with pytest.raises(ValueError, match="CPU tensors, which only the Gloo backend carries"):
        fd.execute(inputs, backend=CommunicatorBackend.nccl)
    # The CUDA backend carries CUDA tensors (tests/python/multidevice/
    # test_cuda_backend.py runs it on GPUs).
    with pytest.raises(ValueError, match="CPU tensors, which only the Gloo backend carries"):
        fd.execute(inputs, backend=CommunicatorBackend.cuda)
    with pytest.raises(TypeError, match="backend must be an mdfuser.CommunicatorBackend"):
        fd.execute(inputs, backend="nccl")
    params = MultiDeviceExecutorParams(backend_type=CommunicatorBackend.gloo)
    executor = MultiDeviceExecutor(fd.fusion, params)
    (out,) = executor.run(inputs)
    assert torch.equal(out, expected)
    assert "linear" in str(executor)


def test_reference_option_names_are_accepted_and_unknown_ones_are_not():
    fd, inputs = small_mlp()
    (expected,) = fd.execute(inputs)
    (out,) = fd.execute(
        inputs,
        _enable_options=["host_ir_lowering", "fast_math"],
        _disable_options=["infer_contiguity", "resize_scheduler"],
    )
    assert torch.equal(out, expected)
    with pytest.raises(ValueError, match="unknown option 'warp_specialize' in _enable_options"):
        fd.execute(inputs, _enable_options=["warp_specialize"])
    with pytest.raises(ValueError, match="input 0 is on cpu, not on device=0"):
        fd.execute(inputs, device=0)


def test_fusion_vals_lists_its_tensors():
    with FusionDefinition() as fd:
        x = fd.define_tensor([4, 8])
        y = fd.ops.relu(x)
        z = fd.ops.mul(y, 2.0)
        fd.add_output(z)
    vals = fd.fusion.vals()
    assert [repr(v) for v in vals] == [repr(t) for t in (x, y, z)]
    assert all(v.is_tensor() for v in vals)
    assert not x.size(0).is_tensor()


def test_output_shardings_after_execute():
    with FusionDefinition() as fd:
        x = fd.define_tensor([4, 8], dtype=DataType.Float)
        w = fd.define_tensor([6, 8], dtype=DataType.Float)
        fd.add_output(fd.ops.linear(x, w))
        mesh = DeviceMesh([0])
        x.set_device_mesh(mesh)
        w.set_device_mesh(mesh)
        w.outer_split(0, 1)
        w.axis(0).parallelize(ParallelType.mesh_x)
    with pytest.raises(ValueError, match="execute the fusion first"):
        fd.output_tensors()
    assert not hasattr(fd, "fec")  # as in nvfuser_direct: no cache before execute
    fd.execute([torch.zeros(4, 8), torch.zeros(6, 8)])
    (via_fec,) = fd.fec.get_output_shardings()
    assert via_fec.axis_sharded_on(ParallelType.mesh_x) == 1
    assert fd.fec.fusion() is fd.fusion
    (sharding,) = fd.get_output_shardings()
    assert sharding.mesh == mesh
    assert sharding.axis_sharded_on(ParallelType.mesh_x) == 1
    assert sharding.axis_sharded_on(ParallelType.mesh_y) == -1


def test_python_profiler_records_each_host_ir_statement():
    fd, inputs = small_mlp()
    fd.execute(inputs)
    with PythonProfiler() as prof:
        fd.execute(inputs)
    names = [kp.name for kp in prof.profile.kernel_profiles]
    assert names.count("linear") == 1
    assert names.count("relu") == 1 and names.count("mul") == 1
    assert names.count("Allocate") == 3
    assert all(kp.host_time_ms >= 0 for kp in prof.profile.kernel_profiles)
    assert {kp.scheduler for kp in prof.profile.kernel_profiles} == {"host_ir"}
    assert prof.profile.host_time_ms > 0
    with pytest.raises(RuntimeError, match="nothing was profiled"):
        _ = PythonProfiler().profile


def test_manual_scheduling_is_refused():
    fd, inputs = small_mlp()
    fd.execute(inputs, auto_schedule=True)
    with pytest.raises(ValueError, match="auto_schedule=False asks for manual scheduling"):
        fd.execute(inputs, auto_schedule=False)


def test_top_level_names():
    for name in (
        "CommunicatorBackend",
        "PythonProfiler",
        "pytorch_utils",
        "nn",
        "multidevice",
        "execute_with_dtensors",
    ):
        assert hasattr(mdfuser, name), name
