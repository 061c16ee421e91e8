# SPDX-License-Identifier: MIT
"""The fused_matmul_communication option: an allgather and the linear
consuming it, or a linear and the reduce-scatter of its partial sums,
computed by one fused kernel (Hopper, the CUDA backend). A CPU run cannot
have it: forcing it is a ValueError that says why, raised when the program
is compiled, before anything communicates; refusing it, or leaving it to
mdfuser, runs the program as before. One process: the error does not
depend on the mesh (the C++ golden tests show the lowering)."""

from __future__ import annotations

import pytest
import torch

from mdfuser import DataType, FusionDefinition, ParallelType
from mdfuser.multidevice import DeviceMesh

OPTION = "fused_matmul_communication"


def gathered_linear() -> FusionDefinition:
    """x [t, 8] split on its tokens feeding a linear whose weight [16, 8] is
    split on out_features: the pair the fused kernel computes, on a mesh of
    one device."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, 8], contiguity=True, dtype=DataType.BFloat16)
        w = fd.define_tensor([16, 8], contiguity=True, dtype=DataType.BFloat16)
        fd.add_output(fd.ops.linear(x, w))
        mesh = DeviceMesh([0])
        for tv in (x, w):
            tv.set_device_mesh(mesh)
            tv.outer_split(0, 1)
            tv.axis(0).parallelize(ParallelType.mesh_x)
    return fd


def scattered_linear() -> FusionDefinition:
    """x [t, 8] and a weight [16, 8] split on in_features, the linear's
    output split on its tokens: the partial sums the fused kernel
    reduce-scatters, on a mesh of one device."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, 8], contiguity=True, dtype=DataType.BFloat16)
        w = fd.define_tensor([16, 8], contiguity=True, dtype=DataType.BFloat16)
        out = fd.ops.linear(x, w)
        fd.add_output(out)
        mesh = DeviceMesh([0])
        for tv, axis in ((x, 1), (w, 1), (out, 0)):
            tv.set_device_mesh(mesh)
            tv.outer_split(axis, 1)
            tv.axis(axis).parallelize(ParallelType.mesh_x)
    return fd


# The pairs, by the statement each becomes where the kernels can run.
DEFINITIONS = {"AllgatherLinear": gathered_linear, "LinearReduceScatter": scattered_linear}
pairs = pytest.mark.parametrize("statement", DEFINITIONS)


def inputs() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = torch.randint(-3, 4, (4, 8), generator=g).bfloat16()
    w = torch.randint(-3, 4, (16, 8), generator=g).bfloat16()
    return [x, w]


@pairs
def test_forcing_it_on_cpu_tensors_is_a_value_error_naming_the_option_and_why(statement):
    fd = DEFINITIONS[statement]()
    with pytest.raises(ValueError) as error:
        fd.execute(inputs(), _enable_options=[OPTION])
    message = str(error.value)
    assert f'_enable_options=["{OPTION}"]' in message
    assert "the inputs are CPU tensors" in message
    assert "Hopper GPU (sm_90a)" in message
    assert "CUDA communication backend" in message
    assert "a build with the fused kernels" in message
    # Nothing was compiled: a run without the option still works.
    (out,) = fd.execute(inputs())
    x, w = inputs()
    torch.testing.assert_close(out, torch.nn.functional.linear(x, w))


@pairs
def test_refused_or_left_to_mdfuser_the_program_runs_unfused(statement):
    x, w = inputs()
    for options in ({}, {"_disable_options": [OPTION]}):
        fd = DEFINITIONS[statement]()
        (out,) = fd.execute([x, w], **options)
        torch.testing.assert_close(out, torch.nn.functional.linear(x, w))
        assert statement not in fd.last_host_ir()


def test_enabled_and_disabled_at_once_is_a_value_error():
    with pytest.raises(
        ValueError, match=f"{OPTION} is both in _enable_options and in _disable_options"
    ):
        gathered_linear().execute(inputs(), _enable_options=[OPTION], _disable_options=[OPTION])


def test_the_removed_kernel_choice_is_an_unknown_option():
    """fused_reduce_scatter_pulls chose between two reduce-scatter kernels;
    one is left, and the name is an unknown option like any other."""
    for which in ("_enable_options", "_disable_options"):
        with pytest.raises(
            ValueError,
            match=f"unknown option 'fused_reduce_scatter_pulls' in {which}; valid options are: ",
        ):
            scattered_linear().execute(inputs(), **{which: ["fused_reduce_scatter_pulls"]})
