# SPDX-License-Identifier: MIT
"""Reductions against plain torch: sum, max, min, mean, var_mean and var
over single, multiple, negative and all axes, with keepdim, nvFuser's
spellings, sum's dtype, and reductions of broadcast axes."""

from __future__ import annotations

import pytest
import torch
from op_testing import assert_same, run, run1, sample

from mdfuser import _C, DataType

DIMS = [[0], [1], [-1], [0, 2], [-1, 0], [0, 1, 2]]

TORCH = {
    "sum": lambda x, dims, keepdim: torch.sum(x, dims, keepdim),
    "max": lambda x, dims, keepdim: torch.amax(x, dims, keepdim),
    "min": lambda x, dims, keepdim: torch.amin(x, dims, keepdim),
    "mean": lambda x, dims, keepdim: torch.mean(x, dims, keepdim),
}


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dims", DIMS, ids=str)
@pytest.mark.parametrize("name", list(TORCH))
def test_reduction_matches_torch(name, dims, keepdim):
    x = sample([3, 4, 5], torch.float32, seed=1)
    out = run1(lambda fd, t: getattr(fd.ops, name)(t, dims, keepdim=keepdim), x)
    assert_same(out, TORCH[name](x, dims, keepdim))


@pytest.mark.parametrize("name", list(TORCH))
def test_reduction_over_every_axis_when_dims_are_omitted(name):
    x = sample([3, 4], torch.float32, seed=2)
    out = run1(lambda fd, t: getattr(fd.ops, name)(t), x)
    assert_same(out, TORCH[name](x, [0, 1], False))


@pytest.mark.parametrize("name", list(TORCH))
def test_nvfuser_spellings_dim_and_keep_dim(name):
    x = sample([3, 4], torch.float32, seed=3)
    expected = TORCH[name](x, [1], True)
    assert_same(run1(lambda fd, t: getattr(fd.ops, name)(t, dim=1, keep_dim=True), x), expected)
    assert_same(run1(lambda fd, t: getattr(fd.ops, name)(t, 1, True), x), expected)
    assert_same(run1(lambda fd, t: getattr(fd.ops, name)(t, dims=[-1], keepdim=True), x), expected)


def test_dims_and_dim_together_are_a_type_error():
    with pytest.raises(TypeError, match="sum: give dims or dim, not both"):
        run1(lambda fd, t: fd.ops.sum(t, [0], dim=0), torch.ones(2, 2))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool, torch.bfloat16])
def test_sum_dtype_is_torchs(dtype):
    x = sample([4, 6], dtype, seed=4)
    assert_same(run1(lambda fd, t: fd.ops.sum(t, [1]), x), torch.sum(x, [1]))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool, torch.bfloat16])
@pytest.mark.parametrize("name", ["max", "min"])
def test_max_and_min_keep_the_dtype(name, dtype):
    x = sample([4, 6], dtype, seed=5)
    assert_same(run1(lambda fd, t: getattr(fd.ops, name)(t, [0]), x), TORCH[name](x, [0], False))


@pytest.mark.parametrize(
    "dtype, torch_dtype", [(DataType.Float, torch.float32), (DataType.Double, torch.float64)]
)
def test_sum_with_a_dtype(dtype, torch_dtype):
    x = sample([4, 6], torch.bfloat16, seed=6)
    out = run1(lambda fd, t: fd.ops.sum(t, [0], dtype=dtype), x)
    assert_same(out, torch.sum(x, [0], dtype=torch_dtype))


def test_only_sum_takes_a_dtype():
    with pytest.raises(TypeError, match="max keeps the input's dtype; only sum takes a dtype"):
        run1(lambda fd, t: _C.ops._max(fd.fusion, t, [0], False, DataType.Double), torch.ones(2))


@pytest.mark.parametrize("correction", [0, 1, 2])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dims", [[0], [-1], [0, 2], None], ids=str)
def test_var_mean_matches_torch(dims, keepdim, correction):
    x = sample([3, 4, 5], torch.float32, seed=7)
    var, mean = run(
        lambda fd, t: fd.ops.var_mean(t, dims, correction=correction, keepdim=keepdim), x
    )
    expected_var, expected_mean = torch.var_mean(x, dims, correction=correction, keepdim=keepdim)
    assert_same(var, expected_var)
    assert_same(mean, expected_mean)


@pytest.mark.parametrize("keepdim", [False, True])
def test_var_matches_torch_and_takes_nvfuser_spellings(keepdim):
    x = sample([3, 4], torch.float32, seed=8)
    out = run1(lambda fd, t: fd.ops.var(t, dim=1, correction=0, keep_dim=keepdim), x)
    assert_same(out, torch.var(x, 1, correction=0, keepdim=keepdim))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_mean_and_var_of_reduced_precision_are_computed_and_returned_in_float(dtype):
    x = (sample([4, 64], torch.float32, seed=9) + 0.001).to(dtype)
    mean = run1(lambda fd, t: fd.ops.mean(t, [1]), x)
    assert_same(mean, torch.mean(x.float(), [1]))
    var, m = run(lambda fd, t: fd.ops.var_mean(t, [1]), x)
    expected_var, expected_mean = torch.var_mean(x.float(), [1])
    assert_same(var, expected_var)
    assert_same(m, expected_mean)


def test_reductions_over_an_expanded_broadcast_axis():
    # [1, h] broadcast to [t, h]: the broadcast axis counts t times.
    t_, h = 5, 3
    x = sample([1, h], torch.float32, seed=10)
    expanded = x.expand(t_, h)

    def body(fd, tv):
        b = fd.ops.broadcast_in_dim(tv, [t_, h], [0, 1])
        return fd.ops.sum(b, [0]), fd.ops.mean(b, [0]), fd.ops.max(b, [0]), fd.ops.sum(b)

    total, mean, maximum, everything = run(body, x, static_sizes=True)
    assert_same(total, expanded.sum(0))
    assert_same(mean, expanded.mean(0))
    assert_same(maximum, expanded.amax(0))
    assert_same(everything, expanded.sum())


def test_reduction_keeping_an_expanded_axis():
    t_, h = 4, 3
    x = sample([1, h], torch.float32, seed=11)

    def body(fd, tv):
        return fd.ops.sum(fd.ops.broadcast_in_dim(tv, [t_, h], [0, 1]), [1])

    out = run1(body, x, static_sizes=True)
    assert_same(out, x.expand(t_, h).sum(1))


def test_reductions_of_a_symbolic_extent():
    x = sample([7, 3], torch.float32, seed=12)
    assert_same(run1(lambda fd, t: fd.ops.mean(t, [0]), x), x.mean(0))
    y = sample([2, 3], torch.float32, seed=13)
    assert_same(run1(lambda fd, t: fd.ops.mean(t, [0]), y), y.mean(0))


# ------------------------------------------------------------------ errors


def test_an_axis_given_twice_is_a_value_error():
    with pytest.raises(ValueError, match=r"sum: dimension 1 is given twice in dims=\[1, -2\]"):
        run1(lambda fd, t: fd.ops.sum(t, [1, -2]), torch.ones(2, 3, 4))


def test_an_axis_out_of_range_is_a_value_error():
    with pytest.raises(
        ValueError,
        match=r"max: dimension 3 is out of range for a tensor of 3 dimensions \(valid: -3 to 2\)",
    ):
        run1(lambda fd, t: fd.ops.max(t, [3]), torch.ones(2, 3, 4))


@pytest.mark.parametrize("name", ["mean", "var_mean", "var"])
def test_mean_and_var_of_integers_are_type_errors(name):
    op = "var_mean" if name == "var" else name
    with pytest.raises(TypeError, match=f"{op} takes floating-point tensors, got Int"):
        run1(lambda fd, t: getattr(fd.ops, name)(t, [0]), torch.ones(2, 3, dtype=torch.int64))


def test_a_zero_dimensional_reduction_is_a_value_error():
    with pytest.raises(ValueError, match="sum: cannot reduce the 0-dimensional T0"):
        run1(lambda fd, t: fd.ops.sum(t), torch.tensor(1.0))


def test_negative_correction_is_a_value_error():
    with pytest.raises(ValueError, match="var_mean: correction must be >= 0, got -1"):
        run1(lambda fd, t: fd.ops.var_mean(t, [0], correction=-1), torch.ones(2, 3))


@pytest.mark.parametrize("correction", [0.5, "1", True])
def test_a_correction_that_is_not_an_int_is_a_type_error(correction):
    # torch takes a fractional correction; mdfuser would have truncated it.
    with pytest.raises(TypeError, match=f"var_mean: correction must be an int, got {correction!r}"):
        run1(lambda fd, t: fd.ops.var(t, [0], correction=correction), torch.ones(2, 3))


def test_a_keepdim_that_is_not_a_bool_is_a_type_error():
    with pytest.raises(TypeError, match="mean: keepdim must be a bool, got 'yes'"):
        run1(lambda fd, t: fd.ops.mean(t, [0], keepdim="yes"), torch.ones(2, 3))
