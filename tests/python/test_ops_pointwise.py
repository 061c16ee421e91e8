# SPDX-License-Identifier: MIT
"""Pointwise operations against plain torch: every unary and binary
operation of the table, on every dtype, with nvFuser's result dtypes
(arithmetic on Half and BFloat16 gives Float) and torch's values computed
in them; where, cast and gelu's two forms."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from op_testing import assert_same, reference, run1, sample

from mdfuser import _C, DataType
from mdfuser.pytorch_utils import nvfuser_dtype_to_torch_dtype

UNARY = {
    "neg": torch.neg,
    "abs": torch.abs,
    "exp": torch.exp,
    "log": torch.log,
    "log1p": torch.log1p,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "relu": torch.relu,
    "silu": F.silu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "erf": torch.erf,
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "reciprocal": torch.reciprocal,
    "sin": torch.sin,
    "cos": torch.cos,
}
# Operations tried on positive data only, where negative data gives NaN.
POSITIVE = {"log", "sqrt", "rsqrt", "pow"}


def _as_tensors(a, b):
    """maximum and minimum take tensors only: a Python number becomes a
    0-dimensional tensor of the type torch promotes it to."""
    dtype = torch.result_type(a, b)
    wrap = lambda x: x if isinstance(x, torch.Tensor) else torch.tensor(x, dtype=dtype)  # noqa: E731
    return wrap(a), wrap(b)


BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "pow": lambda a, b: a**b,
    "maximum": lambda a, b: torch.maximum(*_as_tensors(a, b)),
    "minimum": lambda a, b: torch.minimum(*_as_tensors(a, b)),
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
}

DTYPES = [
    DataType.Float,
    DataType.Double,
    DataType.BFloat16,
    DataType.Half,
    DataType.Int,
    DataType.Int32,
    DataType.Bool,
]


def test_every_pointwise_operation_of_the_table_is_tested():
    assert _C.ops._pointwise_ops(1) == list(UNARY)
    assert _C.ops._pointwise_ops(2) == list(BINARY)


def _torch_or_error(f, *args):
    """f(*args), or the RuntimeError torch raises for a dtype it refuses."""
    try:
        return f(*args)
    except RuntimeError as e:
        return e


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(UNARY))
def test_unary_matches_torch(name, dtype):
    x = sample([3, 5], nvfuser_dtype_to_torch_dtype(dtype), seed=1, positive=name in POSITIVE)
    expected = _torch_or_error(UNARY[name], x)
    op = getattr_op(name)
    if isinstance(expected, RuntimeError):
        with pytest.raises(TypeError, match=f"^{name}"):
            run1(op, x)
        return
    assert_same(run1(op, x), reference(name, UNARY[name], x))


def getattr_op(name):
    return lambda fd, *args: getattr(fd.ops, name)(*args)


class Scalar:
    """An operand given as fd.define_scalar(value, dtype); torch sees the
    Python number."""

    def __init__(self, value, dtype=None):
        self.value, self.dtype = value, dtype

    def __repr__(self):
        return f"define_scalar({self.value!r}, {self.dtype})"


class ZeroDim:
    """A 0-dimensional tensor operand."""

    def __init__(self, value, dtype: DataType):
        self.tensor = torch.tensor(value, dtype=nvfuser_dtype_to_torch_dtype(dtype))

    def __repr__(self):
        return f"zero_dim({self.tensor.dtype})"


# (lhs, rhs): a DataType is a [3, 4] tensor of that type.
OPERANDS = [
    (DataType.Float, DataType.Float),
    (DataType.Int, DataType.Int),
    (DataType.Bool, DataType.Bool),
    (DataType.Int, DataType.Float),
    (DataType.Bool, DataType.Int),
    (DataType.Int32, DataType.Int),
    (DataType.BFloat16, DataType.Float),
    (DataType.BFloat16, DataType.BFloat16),
    (DataType.Half, DataType.Half),
    (DataType.Half, DataType.BFloat16),
    (DataType.Half, DataType.Int),
    (DataType.Float, ZeroDim(1.5, DataType.Double)),
    (DataType.BFloat16, ZeroDim(1.5, DataType.Float)),
    (DataType.Int, ZeroDim(0.5, DataType.Double)),
    (DataType.Int, 0.5),
    (DataType.BFloat16, 1.5),
    (DataType.Bool, 2),
    (DataType.Int, True),
    (2, DataType.Int),
    (DataType.Int32, Scalar(2, DataType.Int32)),
    (DataType.Int, Scalar(2, DataType.Int32)),
    (DataType.Bool, Scalar(3, DataType.Int32)),
    (DataType.Int32, Scalar(2, DataType.Float)),
    (DataType.BFloat16, Scalar(0.5)),
]


def _operand(spec, index: int):
    """(torch value, fusion input or None, value for fd.ops given the
    fusion's inputs)."""
    if isinstance(spec, DataType):
        t = sample([3, 4], nvfuser_dtype_to_torch_dtype(spec), seed=index, positive=True)
        return t, t
    if isinstance(spec, ZeroDim):
        return spec.tensor, spec.tensor
    if isinstance(spec, Scalar):
        if spec.dtype not in (None, DataType.Double, DataType.Int, DataType.Bool):
            # A scalar counts with its dtype (a Python float as Double): for
            # torch, a 0-dimensional tensor of it, which counts alike.
            return torch.tensor(spec.value, dtype=nvfuser_dtype_to_torch_dtype(spec.dtype)), spec
        floating = spec.dtype == DataType.Double
        return (float(spec.value) if floating else spec.value), spec
    return spec, spec


@pytest.mark.parametrize("operands", OPERANDS, ids=repr)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_matches_torch_with_nvfusers_result_dtype(name, operands):
    (a, a_arg), (b, b_arg) = (_operand(spec, i) for i, spec in enumerate(operands))
    expected = _torch_or_error(BINARY[name], a, b)
    inputs = [t for t in (a_arg, b_arg) if isinstance(t, torch.Tensor)]

    def body(fd, *tvs):
        it = iter(tvs)

        def arg(x):
            if isinstance(x, torch.Tensor):
                return next(it)
            if isinstance(x, Scalar):
                return fd.define_scalar(x.value, x.dtype)
            return x

        lhs, rhs = arg(a_arg), arg(b_arg)
        return getattr(fd.ops, name)(lhs, rhs)

    if isinstance(expected, RuntimeError):
        with pytest.raises(TypeError, match=f"^{name}"):
            run1(body, *inputs)
        return
    assert_same(run1(body, *inputs), reference(name, BINARY[name], a, b))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_gelu_approximations(approximate, dtype):
    x = sample([4, 6], dtype, seed=3)
    out = run1(lambda fd, t: fd.ops.gelu(t, approximate=approximate), x)
    # Float for BFloat16, computed in Float.
    assert_same(out, F.gelu(x.float(), approximate=approximate))
    if approximate == "tanh":
        assert not torch.equal(out, F.gelu(x.float()))


def test_gelu_rejects_an_unknown_approximation():
    with pytest.raises(ValueError, match="gelu: approximate must be 'none' or 'tanh', got 'fast'"):
        run1(lambda fd, t: fd.ops.gelu(t, approximate="fast"), torch.ones(2))


@pytest.mark.parametrize(
    "a_dtype, b_dtype",
    [(torch.float32, torch.float32), (torch.int64, torch.float32), (torch.bfloat16, torch.int32)],
)
def test_where_with_tensors_promotes_the_branches(a_dtype, b_dtype):
    cond = sample([3, 4], torch.bool, seed=1)
    a, b = sample([3, 4], a_dtype, seed=2), sample([4], b_dtype, seed=3)
    out = run1(lambda fd, c, x, y: fd.ops.where(c, x, y), cond, a, b)
    # where keeps BFloat16 (nvFuser promotes its branches without widening).
    assert_same(out, torch.where(cond, a, b))


@pytest.mark.parametrize("x, y", [(1.0, 0.0), (1, 0), (True, 2.5)])
def test_where_with_scalar_branches(x, y):
    cond = sample([5], torch.bool, seed=4)
    out = run1(lambda fd, c: fd.ops.where(c, x, y), cond)
    # Python floats are Double scalars: Double where torch gives Float.
    assert_same(out, reference("where", lambda a, b: torch.where(cond, a, b), x, y))


def test_where_with_a_scalar_branch_and_a_tensor():
    cond, a = sample([2, 3], torch.bool, seed=5), sample([2, 3], torch.bfloat16, seed=6)
    out = run1(lambda fd, c, t: fd.ops.where(c, t, 0.5), cond, a)
    assert_same(out, torch.where(cond, a, 0.5))


def test_where_requires_a_bool_condition():
    with pytest.raises(TypeError, match="where: the condition must be Bool, got Float"):
        run1(lambda fd, c, t: fd.ops.where(c, t, t), torch.ones(2), torch.ones(2))


@pytest.mark.parametrize("target", DTYPES, ids=str)
@pytest.mark.parametrize("source", DTYPES, ids=str)
def test_cast_matches_to(source, target):
    x = sample([4, 5], nvfuser_dtype_to_torch_dtype(source), seed=7) * (
        3 if source != DataType.Bool else 1
    )
    out = run1(lambda fd, t: fd.ops.cast(t, target), x)
    assert_same(out, x.to(nvfuser_dtype_to_torch_dtype(target)))


def test_cast_needs_a_dtype():
    with pytest.raises(TypeError, match="cast: the target dtype must not be Null"):
        run1(lambda fd, t: fd.ops.cast(t, DataType.Null), torch.ones(1))
    with pytest.raises(
        TypeError, match=r"cast: dtype must be an mdfuser.DataType, got torch.float32"
    ):
        run1(lambda fd, t: fd.ops.cast(t, torch.float32), torch.ones(1))


# clamp: torch.clamp's promotion over the input and both bounds; a bound
# may be a tensor, a scalar or None.
@pytest.mark.parametrize(
    "x_dtype, low, high",
    [
        (DataType.Float, -1.0, 1.5),
        (DataType.Int, -1, 2),
        (DataType.Int, -0.5, 1.5),
        (DataType.BFloat16, -1, 1),
        (DataType.Int32, 0, 1),
        (DataType.Double, 2.0, 1.0),
    ],
    ids=str,
)
def test_clamp_with_scalar_bounds_matches_torch(x_dtype, low, high):
    x = sample([4, 5], nvfuser_dtype_to_torch_dtype(x_dtype), seed=11)
    out = run1(lambda fd, t: fd.ops.clamp(t, low, high), x)
    assert_same(out, reference("clamp", torch.clamp, x, low, high))


@pytest.mark.parametrize(
    "dtypes",
    [
        (DataType.Float, DataType.Float, DataType.Float),
        (DataType.BFloat16, DataType.Float, DataType.Float),
        (DataType.Int32, DataType.Int, DataType.Int32),
        (DataType.Int, DataType.Double, DataType.Int),
    ],
    ids=str,
)
def test_clamp_with_tensor_bounds_broadcasts_and_promotes(dtypes):
    x_dtype, lo_dtype, hi_dtype = (nvfuser_dtype_to_torch_dtype(d) for d in dtypes)
    x = sample([3, 4], x_dtype, seed=12)
    lo = sample([4], lo_dtype, seed=13) - 1
    hi = sample([3, 1], hi_dtype, seed=14) + 1
    out = run1(lambda fd, t, a, b: fd.ops.clamp(t, a, b), x, lo, hi)
    assert_same(out, torch.clamp(x, lo, hi))


def test_clamp_with_one_bound_keeps_bfloat16_where_maximum_widens():
    x = sample([6], torch.bfloat16, seed=15)
    assert_same(run1(lambda fd, t: fd.ops.clamp(t, min=0.0), x), torch.clamp(x, min=0.0))
    assert_same(run1(lambda fd, t: fd.ops.clamp(t, max=0.5), x), torch.clamp(x, max=0.5))
    assert_same(run1(lambda fd, t: fd.ops.maximum(t, 0.0), x), torch.clamp(x.float(), min=0.0))


def test_clamp_with_one_bound():
    x = sample([6], torch.float32, seed=15)
    assert_same(run1(lambda fd, t: fd.ops.clamp(t, min=0.0), x), torch.clamp(x, min=0.0))
    assert_same(run1(lambda fd, t: fd.ops.clamp(t, max=0.5), x), torch.clamp(x, max=0.5))
    assert_same(run1(lambda fd, t: fd.ops.clamp(t, None, 1), x), torch.clamp(x, None, 1))


def test_clamp_errors_name_the_operation():
    with pytest.raises(ValueError, match="clamp: at least one of min and max must be given"):
        run1(lambda fd, t: fd.ops.clamp(t), torch.ones(2))
    with pytest.raises(TypeError, match="clamp does not take Bool operands"):
        run1(lambda fd, t: fd.ops.clamp(t, False, True), torch.ones(2, dtype=torch.bool))
    with pytest.raises(TypeError, match=r"clamp: operand 1 must be a TensorView, .* got 'a'"):
        run1(lambda fd, t: fd.ops.clamp(t, "a", 1.0), torch.ones(2))
    with pytest.raises(TypeError, match="clamp does not take UInt64 operands"):
        run1(lambda fd, t: fd.ops.clamp(t, 0, 1), torch.ones(2, dtype=torch.uint64))
