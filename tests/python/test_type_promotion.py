# SPDX-License-Identifier: MIT
"""nvFuser's type promotion, family by family (doc/ops.md): arithmetic and
float functions of Half and BFloat16 compute in Float and return Float;
abs, relu, silu, where and clamp keep the dtype; comparisons give Bool;
sum, max and min keep the input's; the compositions follow from their
operations. Values are torch's on the same inputs computed in Float. A
cast back to Half or BFloat16 folds into the operation before it."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from op_testing import assert_same, run1, sample

from mdfuser import DataType, FusionDefinition
from mdfuser.pytorch_utils import torch_dtype_to_nvfuser_dtype

REDUCED = [torch.bfloat16, torch.float16]


@pytest.mark.parametrize("dtype", REDUCED, ids=str)
@pytest.mark.parametrize(
    "name, f",
    [
        ("add", torch.add),
        ("sub", torch.sub),
        ("mul", torch.mul),
        ("div", torch.div),
        ("pow", torch.pow),
        ("maximum", torch.maximum),
        ("minimum", torch.minimum),
    ],
)
def test_binary_arithmetic_is_float(name, f, dtype):
    a = sample([4, 6], dtype, seed=1, positive=True)
    b = sample([6], dtype, seed=2)
    out = run1(lambda fd, x, y: getattr(fd.ops, name)(x, y), a, b)
    assert out.dtype == torch.float32
    assert_same(out, f(a.float(), b.float()))


@pytest.mark.parametrize("dtype", REDUCED, ids=str)
@pytest.mark.parametrize(
    "name, f",
    [
        ("neg", torch.neg),
        ("exp", torch.exp),
        ("tanh", torch.tanh),
        ("sigmoid", torch.sigmoid),
        ("rsqrt", torch.rsqrt),
        ("gelu", F.gelu),
        ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh")),
    ],
)
def test_unary_arithmetic_and_float_functions_are_float(name, f, dtype):
    x = sample([4, 6], dtype, seed=3, positive=True)
    out = run1(lambda fd, t: getattr(fd.ops, name)(t), x)
    assert out.dtype == torch.float32
    assert_same(out, f(x.float()))


@pytest.mark.parametrize("dtype", REDUCED, ids=str)
def test_abs_relu_silu_where_clamp_keep_the_dtype(dtype):
    x = sample([4, 6], dtype, seed=4)
    c = x > 0
    for body, expected in [
        (lambda fd, t: fd.ops.abs(t), torch.abs(x)),
        (lambda fd, t: fd.ops.relu(t), torch.relu(x)),
        (lambda fd, t: fd.ops.silu(t), F.silu(x)),
        (lambda fd, t: fd.ops.clamp(t, -0.5, 0.5), torch.clamp(x, -0.5, 0.5)),
        (lambda fd, t: fd.ops.clamp(t, min=0.0), torch.clamp(x, min=0.0)),
    ]:
        assert_same(run1(body, x), expected)
    out = run1(lambda fd, t, cond: fd.ops.where(cond, t, 0.0), x, c)
    assert_same(out, torch.where(c, x, 0.0))


@pytest.mark.parametrize("dtype", REDUCED, ids=str)
def test_comparisons_are_bool(dtype):
    a, b = sample([4, 6], dtype, seed=5), sample([4, 6], dtype, seed=6)
    assert_same(run1(lambda fd, x, y: fd.ops.lt(x, y), a, b), a < b)
    assert_same(run1(lambda fd, x: fd.ops.eq(x, 0.25), a), a == 0.25)


@pytest.mark.parametrize("dtype", REDUCED, ids=str)
def test_reductions_keep_the_dtype_and_compositions_are_float(dtype):
    x = sample([4, 6], dtype, seed=7)
    assert_same(run1(lambda fd, t: fd.ops.sum(t, [1]), x), x.sum(1))
    assert_same(run1(lambda fd, t: fd.ops.max(t, [1]), x), x.amax(1))
    assert_same(run1(lambda fd, t: fd.ops.min(t, [0]), x), x.amin(0))
    xf = x.float()
    assert_same(run1(lambda fd, t: fd.ops.mean(t, [1]), x), xf.mean(1))
    assert_same(run1(lambda fd, t: fd.ops.var(t, [1]), x), xf.var(1))
    var, mean = torch.var_mean(xf, 0)
    got_var, got_mean = _var_mean(x, 0)
    assert_same(got_var, var)
    assert_same(got_mean, mean)
    assert_same(run1(lambda fd, t: fd.ops.softmax(t, 1), x), torch.softmax(xf, 1))
    assert_same(run1(lambda fd, t: fd.ops.layer_norm(t), x), F.layer_norm(xf, [6]))
    assert_same(run1(lambda fd, t: fd.ops.rms_norm(t), x), F.rms_norm(xf, [6], eps=1e-6))


def _var_mean(x: torch.Tensor, dim: int) -> list[torch.Tensor]:
    with FusionDefinition() as fd:
        var, mean = fd.ops.var_mean(fd.from_pytorch(x), [dim])
        fd.add_output(var)
        fd.add_output(mean)
    return fd.execute([x])


def test_scalars_count_only_through_their_category_and_keep_their_dtype():
    h = sample([3, 4], torch.float16, seed=8)
    i = sample([3, 4], torch.int32, seed=9)
    # A Half tensor times a Python float: Float (the Half result widened).
    assert_same(run1(lambda fd, t: fd.ops.mul(t, 0.5), h), h.float() * 0.5)
    # An Int32 tensor plus a Python float (a Double scalar): Double.
    assert_same(run1(lambda fd, t: fd.ops.add(t, 0.5), i), i.double() + 0.5)
    # A Float scalar counts as Float; an int scalar keeps Int32.
    out = run1(lambda fd, t: fd.ops.add(t, fd.define_scalar(0.5, DataType.Float)), i)
    assert_same(out, i.float() + 0.5)
    assert_same(run1(lambda fd, t: fd.ops.mul(t, 2), i), i * 2)
    # Integer arithmetic stays integer; neg keeps Int.
    assert_same(run1(lambda fd, t: fd.ops.neg(t), i), -i)


@pytest.mark.parametrize("dtype", REDUCED, ids=str)
def test_a_cast_back_folds_into_the_operation_and_rounds_once(dtype):
    """add then exp in Float, cast back: exp writes the narrow dtype
    directly (FoldCasts), which is torch's Float computation rounded once."""
    a, b = sample([8, 16], dtype, seed=10), sample([8, 16], dtype, seed=11)
    mdf = torch_dtype_to_nvfuser_dtype(dtype)
    with FusionDefinition() as fd:
        ta, tb = fd.from_pytorch(a), fd.from_pytorch(b)
        y = fd.ops.cast(fd.ops.mul(fd.ops.add(ta, tb), 0.5), mdf)
        fd.add_output(y)
    (out,) = fd.execute([a, b])
    program = fd.last_host_ir()
    assert "= cast(" not in program, program
    assert program.count("= add(") == 1 and program.count("= mul(") == 1, program
    assert out.dtype == dtype
    assert torch.equal(out, ((a.float() + b.float()) * 0.5).to(dtype))


def test_a_float_intermediate_read_twice_is_not_folded():
    a = sample([4, 4], torch.bfloat16, seed=12)
    with FusionDefinition() as fd:
        ta = fd.from_pytorch(a)
        s = fd.ops.add(ta, ta)
        fd.add_output(fd.ops.cast(s, DataType.BFloat16))
        fd.add_output(s)
    low, high = fd.execute([a])
    assert "= cast(" in fd.last_host_ir()
    assert high.dtype == torch.float32 and low.dtype == torch.bfloat16
    assert_same(high, a.float() * 2)
    assert_same(low, (a.float() * 2).bfloat16())


def test_bad_dtypes_are_still_type_errors_naming_the_dtype():
    with pytest.raises(TypeError, match="silu takes floating-point operands only, got "):
        run1(lambda fd, t: fd.ops.silu(t), torch.ones(2, dtype=torch.int64))
    with pytest.raises(TypeError, match="neg does not take Bool operands"):
        run1(lambda fd, t: fd.ops.neg(t), torch.ones(2, dtype=torch.bool))
