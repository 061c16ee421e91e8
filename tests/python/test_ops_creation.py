# SPDX-License-Identifier: MIT
"""Creation operations against plain torch: full, iota, uniform and normal
build tensors from their parameters alone. full and iota are exact; the
random ones are checked for determinism under a seed, for new values
without one, and for their range and moments."""

from __future__ import annotations

import pytest
import torch
from op_testing import assert_same, run1

from mdfuser import DataType, FusionDefinition
from mdfuser.pytorch_utils import nvfuser_dtype_to_torch_dtype


def created(body, *inputs: torch.Tensor) -> torch.Tensor:
    """Runs a fusion whose only output is `body(fd, *tvs)`."""
    return run1(body, *inputs)


# ------------------------------------------------------------------- full


@pytest.mark.parametrize(
    "dtype, value",
    [
        (DataType.Float, 1.5),
        (DataType.Double, -2.25),
        (DataType.Half, 0.5),
        (DataType.BFloat16, 3.0),
        (DataType.Int, 7),
        (DataType.Int32, -3),
        (DataType.Bool, True),
        (DataType.Float, 2),
        (DataType.Int, 1.75),
    ],
)
def test_full_is_torch_full(dtype, value):
    actual = created(lambda fd: fd.ops.full([2, 3], value, dtype))
    expected = torch.full((2, 3), value, dtype=nvfuser_dtype_to_torch_dtype(dtype))
    assert_same(actual, expected)


def test_full_of_a_symbolic_extent_and_a_scalar():
    x = torch.arange(5.0)
    actual = run1(
        lambda fd, x: fd.ops.add(
            x, fd.ops.full([fd.ops.size(x, 0)], fd.define_scalar(0.5), DataType.Float)
        ),
        x,
    )
    assert_same(actual, x + 0.5)


def test_full_of_shape_zero_and_zero_dimensions():
    assert_same(created(lambda fd: fd.ops.full([0, 4], 1.0, DataType.Float)), torch.ones(0, 4))
    assert_same(created(lambda fd: fd.ops.full([], 3, DataType.Int)), torch.tensor(3))


def test_full_of_uint64():
    actual = created(lambda fd: fd.ops.full([3], 2**40, DataType.UInt64))
    assert actual.dtype == torch.uint64
    assert actual.tolist() == [2**40] * 3


def test_full_as_a_tuple_shape():
    assert_same(
        created(lambda fd: fd.ops.full((2,), 1, DataType.Int)), torch.ones(2, dtype=torch.long)
    )


# ------------------------------------------------------------------- iota


@pytest.mark.parametrize(
    "length, start, step, dtype",
    [
        (5, None, None, DataType.Int),
        (6, 3, 2, DataType.Int),
        (4, -1, -3, DataType.Int32),
        (7, 0.5, 0.25, DataType.Float),
        (5, 1, 3, DataType.Double),
        (9, -2.0, 0.5, DataType.BFloat16),
        (0, 0, 1, DataType.Int),
    ],
)
def test_iota_is_start_plus_index_times_step(length, start, step, dtype):
    actual = created(lambda fd: fd.ops.iota(length, start, step, dtype))
    index = torch.arange(length, dtype=torch.float64)
    expected = ((0 if start is None else start) + index * (1 if step is None else step)).to(
        nvfuser_dtype_to_torch_dtype(dtype)
    )
    assert_same(actual, expected)


def test_iota_defaults_and_keywords():
    assert_same(created(lambda fd: fd.ops.iota(4)), torch.arange(4))
    assert_same(
        created(lambda fd: fd.ops.iota(3, start=10, step=-1, dtype=DataType.Int32)),
        torch.tensor([10, 9, 8], dtype=torch.int32),
    )


def test_iota_of_a_symbolic_length_feeds_pointwise():
    x = torch.ones(6)
    actual = run1(
        lambda fd, x: fd.ops.mul(x, fd.ops.iota(fd.ops.size(x, 0), dtype=DataType.Float)), x
    )
    assert_same(actual, torch.arange(6.0))


# ---------------------------------------------------------------- random


def random_op(name, a, b, shape, dtype=DataType.Float, seed=None, offset=None):
    def body(fd):
        op = getattr(fd.ops, name)
        return op(a, b, shape, rng_seed=seed, rng_offset=offset, dtype=dtype)

    return body


@pytest.mark.parametrize("name", ["uniform", "normal"])
def test_a_seed_and_offset_fix_the_values(name):
    first = created(random_op(name, 0.0, 1.0, [64, 32], seed=7, offset=3))
    again = created(random_op(name, 0.0, 1.0, [64, 32], seed=7, offset=3))
    other_seed = created(random_op(name, 0.0, 1.0, [64, 32], seed=8, offset=3))
    other_offset = created(random_op(name, 0.0, 1.0, [64, 32], seed=7, offset=4))
    assert torch.equal(first, again)
    assert not torch.equal(first, other_seed)
    assert not torch.equal(first, other_offset)


@pytest.mark.parametrize("name", ["uniform", "normal"])
def test_a_seeded_fusion_gives_the_same_values_at_every_execute(name):
    with FusionDefinition() as fd:
        fd.add_output(random_op(name, 0.0, 1.0, [16], seed=1, offset=0)(fd))
    (a,) = fd.execute([])
    (b,) = fd.execute([])
    assert torch.equal(a, b)


@pytest.mark.parametrize("name", ["uniform", "normal"])
def test_without_a_seed_each_execute_and_each_op_draws_new_values(name):
    with FusionDefinition() as fd:
        fd.add_output(random_op(name, 0.0, 1.0, [256])(fd))
        fd.add_output(random_op(name, 0.0, 1.0, [256])(fd))
    a, b = fd.execute([])
    (c, _) = fd.execute([])
    assert not torch.equal(a, b)
    assert not torch.equal(a, c)


@pytest.mark.parametrize(
    "dtype", [DataType.Float, DataType.Double, DataType.Half, DataType.BFloat16]
)
def test_uniform_range_and_moments(dtype):
    t = created(random_op("uniform", -2.0, 3.0, [200, 100], dtype=dtype, seed=0, offset=0))
    assert t.dtype == nvfuser_dtype_to_torch_dtype(dtype)
    assert t.shape == (200, 100)
    assert t.min() >= -2.0 and t.max() <= 3.0
    d = t.double()
    assert abs(d.mean().item() - 0.5) < 0.05
    assert abs(d.std().item() - 5 / 12**0.5) < 0.05


@pytest.mark.parametrize("dtype", [DataType.Float, DataType.Double, DataType.BFloat16])
def test_normal_moments(dtype):
    t = created(random_op("normal", 1.5, 0.5, [200, 100], dtype=dtype, seed=3, offset=1))
    assert t.dtype == nvfuser_dtype_to_torch_dtype(dtype)
    d = t.double()
    assert abs(d.mean().item() - 1.5) < 0.02
    assert abs(d.std().item() - 0.5) < 0.02


def test_random_default_dtype_is_float_and_seeds_may_be_scalars():
    def body(fd):
        return fd.ops.uniform(
            0, 1, [8], rng_seed=fd.define_scalar(5), rng_offset=fd.define_scalar(0)
        )

    t = created(body)
    assert t.dtype == torch.float32
    assert torch.equal(t, created(random_op("uniform", 0, 1, [8], seed=5, offset=0)))


def test_random_feeds_pointwise():
    x = torch.zeros(4, 8)
    actual = run1(
        lambda fd, x: fd.ops.add(x, fd.ops.uniform(0.0, 1.0, [4, 8], rng_seed=2, rng_offset=0)), x
    )
    assert torch.equal(actual, created(random_op("uniform", 0.0, 1.0, [4, 8], seed=2, offset=0)))


# ----------------------------------------------------------------- errors


def define(body):
    with FusionDefinition() as fd:
        body(fd)


@pytest.mark.parametrize(
    "body, error, message",
    [
        (
            lambda fd: fd.ops.full([2, -3], 1.0, DataType.Float),
            ValueError,
            r"full: shape\[1\] is -3",
        ),
        (
            lambda fd: fd.ops.full([2], 1.0, "float"),
            TypeError,
            r"full: dtype must be an mdfuser.DataType",
        ),
        (
            lambda fd: fd.ops.full([2], 1.0, DataType.Null),
            TypeError,
            r"full: dtype must not be Null",
        ),
        (
            lambda fd: fd.ops.full(2, 1.0, DataType.Float),
            TypeError,
            r"full: expected a list of extents",
        ),
        (lambda fd: fd.ops.full([2], "a", DataType.Float), TypeError, r"full: operand 1 must be"),
        (
            lambda fd: fd.ops.full([2], fd.define_tensor([2]), DataType.Float),
            TypeError,
            r"full: operand 1 must be a number .*got the tensor T0",
        ),
        (
            lambda fd: fd.ops.iota(4, dtype=DataType.Bool),
            TypeError,
            r"iota: dtype must be an integer",
        ),
        (
            lambda fd: fd.ops.iota(4, 0.5, 1),
            TypeError,
            r"iota: an integer dtype \(Int\) takes integer start",
        ),
        (lambda fd: fd.ops.iota(-1), ValueError, r"iota: shape\[0\] is -1"),
        (
            lambda fd: fd.ops.iota(4, True),
            TypeError,
            r"iota: operand 1 must be a number, got the Bool",
        ),
        (lambda fd: fd.ops.iota(4.0), TypeError, r"iota: extents are ints or Scalars, got 4.0"),
        (
            lambda fd: fd.ops.uniform(0, 1, [2], dtype=DataType.Int),
            TypeError,
            r"uniform: dtype must be a floating-point type .* got Int",
        ),
        (
            lambda fd: fd.ops.normal(0, 1, [2], dtype=DataType.UInt64),
            TypeError,
            r"normal: dtype must be a floating-point type .* got UInt64",
        ),
        (
            lambda fd: fd.ops.uniform(2.0, 1.0, [2]),
            ValueError,
            r"uniform: minval 2 is greater than maxval 1",
        ),
        (
            lambda fd: fd.ops.normal(0.0, -1.0, [2]),
            ValueError,
            r"normal: std is -1; expected std >= 0",
        ),
        (
            lambda fd: fd.ops.uniform(0, 1, [2], rng_seed=1),
            ValueError,
            r"uniform: rng_seed and rng_offset must be given together, got rng_seed=1 and "
            "rng_offset=None",
        ),
        (
            lambda fd: fd.ops.normal(0, 1, [2], rng_seed=1.5, rng_offset=0),
            TypeError,
            r"normal: rng_seed must be an int or an integer define_scalar, got 1.5",
        ),
        (
            lambda fd: fd.ops.uniform(0, 1, [2], rng_seed=1, rng_offset=2**64),
            ValueError,
            r"uniform: rng_offset .* does not fit in 64 bits",
        ),
        (
            lambda fd: fd.ops.uniform(None, 1, [2]),
            TypeError,
            r"uniform: operand 0 must be a tensor or a number, got None",
        ),
    ],
)
def test_bad_arguments_are_refused_naming_the_op_and_the_value(body, error, message):
    with pytest.raises(error, match=message):
        define(body)


def test_a_seed_of_another_fusion_is_refused():
    other = FusionDefinition()
    seed = other.define_scalar(1)
    with pytest.raises(ValueError, match="uniform: rng_seed 1 belongs to another FusionDefinition"):
        define(lambda fd: fd.ops.uniform(0, 1, [2], rng_seed=seed, rng_offset=0))
