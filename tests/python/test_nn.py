# SPDX-License-Identifier: MIT
"""The normalizations of mdfuser.nn (and fd.ops.softmax, layer_norm,
rms_norm) against torch.nn.functional. As the operations they are written
with, they give Float for BFloat16 inputs: torch's result computed on the
inputs in Float."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from helpers import stream_loop_statements, tensor_name
from op_testing import assert_same, run1, sample

from mdfuser import FusionDefinition, ParallelType, nn
from mdfuser.multidevice import DeviceMesh
from mdfuser.pytorch_utils import torch_dtype_to_nvfuser_dtype

DTYPES = [torch.float32, torch.bfloat16, torch.float64]


def _up(t: torch.Tensor) -> torch.Tensor:
    """`t` as the normalizations compute it: Float for Half and BFloat16."""
    return t.float() if t.dtype in (torch.bfloat16, torch.float16) else t


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax(dim, dtype):
    x = sample([4, 6], dtype, seed=1)
    expected = torch.softmax(_up(x), dim)
    assert_same(run1(lambda fd, t: fd.ops.softmax(t, dim), x), expected)
    assert_same(run1(lambda fd, t: nn.softmax(fd.ops, t, dim), x), expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("normalized_ndim", [1, 2])
@pytest.mark.parametrize("affine", [False, True])
def test_layer_norm(affine, normalized_ndim, dtype):
    x = sample([3, 4, 8], dtype, seed=2)
    shape = list(x.shape[-normalized_ndim:])
    w, b = sample(shape, dtype, seed=3), sample(shape, dtype, seed=4)
    expected = F.layer_norm(
        _up(x), shape, _up(w) if affine else None, _up(b) if affine else None, eps=1e-5
    )
    if affine:
        out = run1(
            lambda fd, t, tw, tb: fd.ops.layer_norm(t, normalized_ndim, tw, tb, eps=1e-5), x, w, b
        )
    else:
        out = run1(lambda fd, t: nn.layer_norm(fd.ops, t, normalized_ndim), x)
    assert_same(out, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("normalized_ndim", [1, 2])
@pytest.mark.parametrize("with_weight", [False, True])
def test_rms_norm(with_weight, normalized_ndim, dtype):
    x = sample([3, 4, 8], dtype, seed=5)
    shape = list(x.shape[-normalized_ndim:])
    w = sample(shape, dtype, seed=6)
    expected = F.rms_norm(_up(x), shape, _up(w) if with_weight else None, eps=1e-6)
    if with_weight:
        out = run1(lambda fd, t, tw: fd.ops.rms_norm(t, normalized_ndim, tw, eps=1e-6), x, w)
    else:
        out = run1(lambda fd, t: nn.rms_norm(fd.ops, t, normalized_ndim), x)
    assert_same(out, expected)


def test_layer_norm_of_a_symbolic_row_length():
    x = sample([5, 7], torch.float32, seed=7)
    assert_same(run1(lambda fd, t: fd.ops.layer_norm(t), x), F.layer_norm(x, [7]))


@pytest.mark.parametrize("cast_back", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("affine", [False, True])
def test_layer_norm_runs_as_one_fused_kernel(affine, dtype, cast_back):
    """FuseLayerNorms: the composition runs as one layer_norm statement
    (ATen's kernel) and gives torch's result; with the pass disabled the
    primitives run and agree within the dtype's tolerance. A BFloat16
    layer_norm is Float (normalized in Float) unless cast back, when the
    kernel normalizes the BFloat16 input as torch's module does."""
    x = sample([6, 16], dtype, seed=8)
    w, b = sample([16], dtype, seed=9), sample([16], dtype, seed=10)
    params = (w, b) if affine else ()
    mdf_dtype = torch_dtype_to_nvfuser_dtype(dtype)
    with FusionDefinition() as fd:
        tx = fd.define_tensor([-1, 16], dtype=mdf_dtype)
        tp = [fd.define_tensor([16], dtype=mdf_dtype) for _ in params]
        y = nn.layer_norm(fd.ops, tx, 1, *tp, eps=1e-5)
        fd.add_output(fd.ops.cast(y, mdf_dtype) if cast_back and y.dtype() != mdf_dtype else y)
    (fused,) = fd.execute([x, *params])
    program = fd.last_host_ir()
    (composed,) = fd.execute([x, *params], _disable_options=["fuse_layer_norms"])
    assert program.count("= layer_norm(") == 1, program
    assert "= sum(" not in program and "rsqrt" not in program
    assert "= sum(" in fd.last_host_ir()
    if cast_back:
        assert "= cast(" not in program, program
        expected = F.layer_norm(x, [16], *(params or (None, None)), eps=1e-5)
    else:
        expected = F.layer_norm(_up(x), [16], *([_up(p) for p in params] or (None, None)))
    assert_same(fused, expected)
    assert_same(composed, expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_stream_chunked_layer_norm_fuses_whole_in_the_loop(dtype):
    """With the tokens split into stream chunks, a layer_norm in front of a
    linear runs in one Stream loop with the linear, fused per chunk with its
    weight and bias. In bfloat16 the upcasts of weight and bias, which no
    chunk splits, run once in front of the loop rather than ending it."""
    x = sample([8, 16], dtype, seed=12)
    w, b = sample([16], dtype, seed=13), sample([16], dtype, seed=14)
    lw = sample([32, 16], dtype, seed=15)
    mdf_dtype = torch_dtype_to_nvfuser_dtype(dtype)
    with FusionDefinition() as fd:
        tx = fd.define_tensor([-1, 16], dtype=mdf_dtype)
        tw, tb = (fd.define_tensor([16], dtype=mdf_dtype) for _ in range(2))
        tlw = fd.define_tensor([32, 16], dtype=mdf_dtype)
        normed = fd.ops.layer_norm(tx, 1, tw, tb, eps=1e-5)
        if normed.dtype() != mdf_dtype:
            normed = fd.ops.cast(normed, mdf_dtype)
        fd.add_output(fd.ops.linear(normed, tlw))
        for tv in (tx, tw, tb, tlw):
            tv.set_device_mesh(DeviceMesh([0]))
        tx.outer_split(0, 2)
        tx.axis(0).parallelize(ParallelType.stream)
    (y,) = fd.execute([x, w, b, lw])
    program = fd.last_host_ir()
    loops = stream_loop_statements(program)
    assert len(loops) == 2, program  # the Stream loop and its join loop
    loop = loops[0]
    (fused,) = [s for s in loop if "= layer_norm(" in s]
    assert tensor_name(tw) in fused and tensor_name(tb) in fused, fused
    assert any("= linear(" in s for s in loop), program
    for primitive in ("= cast(", "= mul(", "= add(", "= sum("):
        assert primitive not in program, program
    assert_same(y, F.linear(F.layer_norm(x, [16], w, b, eps=1e-5), lw))


def test_layer_norm_whose_centred_values_are_returned_stays_composed():
    # layer_norm written out as mdfuser.nn writes it, returning x - mean
    # too, which the fused kernel does not produce: the primitives run.
    x = sample([4, 8], torch.float32, seed=11)
    with FusionDefinition() as fd:
        ops = fd.ops
        tx = fd.define_tensor([-1, 8])
        centred = ops.sub(tx, ops.mean(tx, [1], keepdim=True))
        var = ops.mean(ops.mul(centred, centred), [1], keepdim=True)
        fd.add_output(ops.mul(centred, ops.rsqrt(ops.add(var, 1e-5))))
        fd.add_output(centred)
    y, got_centred = fd.execute([x])
    assert "= layer_norm(" not in fd.last_host_ir()
    assert_same(y, F.layer_norm(x, [8]))
    assert_same(got_centred, x - x.mean(1, keepdim=True))
    # Without the second output the same composition is fused.
    with FusionDefinition() as fd:
        ops = fd.ops
        tx = fd.define_tensor([-1, 8])
        centred = ops.sub(tx, ops.mean(tx, [1], keepdim=True))
        var = ops.mean(ops.mul(centred, centred), [1], keepdim=True)
        fd.add_output(ops.mul(centred, ops.rsqrt(ops.add(var, 1e-5))))
    (y,) = fd.execute([x])
    assert fd.last_host_ir().count("= layer_norm(") == 1
    assert_same(y, F.layer_norm(x, [8]))


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize("name", ["softmax", "layer_norm", "rms_norm"])
def test_integer_inputs_are_type_errors(name):
    x = torch.ones(2, 3, dtype=torch.int64)
    args = (1,) if name == "softmax" else ()
    with pytest.raises(TypeError, match=f"{name} takes floating-point tensors, got Int"):
        run1(lambda fd, t: getattr(fd.ops, name)(t, *args), x)


@pytest.mark.parametrize("normalized_ndim", [0, 3])
def test_normalized_ndim_out_of_range_is_a_value_error(normalized_ndim):
    with pytest.raises(
        ValueError,
        match=f"layer_norm: normalized_ndim={normalized_ndim} must be in 1..2 for a 2-dimensional",
    ):
        run1(lambda fd, t: fd.ops.layer_norm(t, normalized_ndim), torch.ones(2, 3))
