# SPDX-License-Identifier: MIT
"""Layout operations against plain torch, exactly: broadcasting (implicit
and broadcast_in_dim, expanded too), broadcast, reshape, permute, squeeze,
slice, cat, set and stride_order; inputs as outputs, CPU scalars and
from_pytorch."""

from __future__ import annotations

import pytest
import torch
from op_testing import assert_same, run, run1, sample

from mdfuser import DataType, FusionDefinition


@pytest.mark.parametrize(
    "a_shape, b_shape",
    [([3, 1], [4]), ([2, 3, 4], [4]), ([1, 4], [3, 1]), ([2, 1, 4], [3, 1]), ([], [2, 3])],
    ids=str,
)
@pytest.mark.parametrize("static_sizes", [False, True])
def test_implicit_broadcasting_is_torchs(a_shape, b_shape, static_sizes):
    a, b = sample(a_shape, torch.float32, seed=1), sample(b_shape, torch.float32, seed=2)
    out = run1(lambda fd, x, y: fd.ops.add(x, y), a, b, static_sizes=static_sizes)
    assert_same(out, a + b)


def test_broadcast_in_dim_inserts_axes():
    x = sample([4], torch.float32, seed=3)
    out = run1(lambda fd, t: fd.ops.broadcast_in_dim(t, [3, 4], [1]), x, static_sizes=True)
    assert_same(out, x.expand(3, 4))


def test_broadcast_in_dim_expands_a_broadcast_axis():
    x = sample([1, 4], torch.float32, seed=4)
    out = run1(lambda fd, t: fd.ops.broadcast_in_dim(t, [5, 4], [0, 1]), x, static_sizes=True)
    assert_same(out, x.expand(5, 4))


def test_broadcast_in_dim_to_a_symbolic_extent_then_add():
    x, y = sample([1, 4], torch.float32, seed=5), sample([6, 4], torch.float32, seed=6)

    def body(fd, tx, ty):
        b = fd.ops.broadcast_in_dim(tx, [ty.size(0), 4], [0, 1])
        return fd.ops.add(b, ty), b

    total, expanded = run(body, x, y)
    assert_same(total, x + y)
    assert_same(expanded, x.expand(6, 4))


def test_broadcast_inserts_axes_of_extent_one():
    x = sample([3, 4], torch.float32, seed=7)
    out = run1(lambda fd, t: fd.ops.broadcast(t, [True, False, True, False]), x)
    assert_same(out, x[None, :, None, :])


@pytest.mark.parametrize(
    "in_shape, new_shape, expected_shape",
    [
        ([6, 4], [2, 3, 4], [2, 3, 4]),
        ([2, 3, 4], [6, 4], [6, 4]),
        ([2, 3, 4], [-1], [24]),
        ([2, 3, 4], [2, -1], [2, 12]),
        ([6, 4], [4, 6], [4, 6]),
        ([6, 1, 4], [24], [24]),
        ([24], [1, 24, 1], [1, 24, 1]),
    ],
    ids=str,
)
def test_reshape_with_static_extents(in_shape, new_shape, expected_shape):
    x = sample(in_shape, torch.float32, seed=8)
    out = run1(lambda fd, t: fd.ops.reshape(t, new_shape), x, static_sizes=True)
    assert_same(out, x.reshape(expected_shape))


@pytest.mark.parametrize(
    "in_shape, build_shape, torch_shape",
    [
        ([-1, 6], lambda t: [t.size(0), 2, 3], [5, 2, 3]),
        ([-1, 6], lambda t: [-1, 3, 2], [5, 3, 2]),
        ([-1, 2, 3], lambda t: [t.size(0), 6], [5, 6]),
        ([-1, 2, 3], lambda t: [-1, 6], [5, 6]),
        ([-1, 6], lambda t: [-1], [30]),
        ([-1, -1, 6], lambda t: [-1, 6], [20, 6]),
        ([-1, -1, 6], lambda t: [t.size(0), -1], [4, 30]),
        ([2, -1, 6], lambda t: [2, -1, 3, 2], [2, 5, 3, 2]),
        ([-1, 1, 6], lambda t: [t.size(0), 6, 1], [5, 6, 1]),
        ([-1, 6], lambda t: [t.size(0), 1, -1], [5, 1, 6]),
    ],
    ids=[
        "split",
        "split with -1",
        "merge",
        "merge with -1",
        "flatten",
        "merge two symbolic",
        "merge symbolic and static",
        "-1 in the middle",
        "move a broadcast axis",
        "-1 after an inserted axis",
    ],
)
def test_reshape_with_symbolic_extents(in_shape, build_shape, torch_shape):
    data_shape = [s if s != -1 else 5 for s in in_shape]
    if in_shape == [-1, -1, 6]:
        data_shape = [4, 5, 6]
    x = sample(data_shape, torch.float32, seed=9)
    with FusionDefinition() as fd:
        t = fd.define_tensor(in_shape, dtype=DataType.Float)
        fd.add_output(fd.ops.reshape(t, build_shape(t)))
    (out,) = fd.execute([x])
    assert_same(out, x.reshape(torch_shape))


def test_reshape_of_a_symbolic_input_runs_on_other_sizes():
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1, 6], dtype=DataType.Float)
        fd.add_output(fd.ops.reshape(t, [-1, 2, 3]))
    for rows in (1, 4, 7):
        x = sample([rows, 6], torch.float32, seed=rows)
        (out,) = fd.execute([x])
        assert_same(out, x.reshape(rows, 2, 3))


@pytest.mark.parametrize("dims", [[1, 0, 2], [2, 0, 1], [-1, -3, -2], [0, 1, 2]], ids=str)
def test_permute(dims):
    x = sample([2, 3, 4], torch.float32, seed=10)
    assert_same(run1(lambda fd, t: fd.ops.permute(t, dims), x), x.permute(dims))


def test_permute_then_pointwise_sees_the_permuted_values():
    x = sample([2, 3], torch.float32, seed=11)
    out = run1(lambda fd, t: fd.ops.mul(fd.ops.permute(t, [1, 0]), 2.0), x)
    assert_same(out, x.t() * 2.0)


@pytest.mark.parametrize("dims", [[1], [-1], [1, 3]], ids=str)
def test_squeeze(dims):
    x = sample([2, 1, 3, 1], torch.float32, seed=12)
    assert_same(run1(lambda fd, t: fd.ops.squeeze(t, dims), x), x.squeeze(dims))


def test_squeeze_of_an_expanded_axis_needs_squeeze_expanded():
    x = sample([1, 3], torch.float32, seed=13)

    def body(fd, t):
        return fd.ops.squeeze(
            fd.ops.broadcast_in_dim(t, [4, 3], [0, 1]), [0], squeeze_expanded=True
        )

    assert_same(run1(body, x, static_sizes=True), x[0])


@pytest.mark.parametrize(
    "starts, ends",
    [([0, 0], [2, 5]), ([1, 2], [3, 5]), ([0, 1], [4, 4]), ([2, 0], [2, 5])],
    ids=str,
)
def test_slice(starts, ends):
    x = sample([4, 5], torch.float32, seed=14)
    out = run1(lambda fd, t: fd.ops.slice(t, starts, ends), x, static_sizes=True)
    assert_same(out, x[starts[0] : ends[0], starts[1] : ends[1]])


def test_slice_up_to_a_symbolic_extent():
    x = sample([6, 5], torch.float32, seed=15)
    out = run1(lambda fd, t: fd.ops.slice(t, [2, 0], [t.size(0), t.size(1)]), x)
    assert_same(out, x[2:])


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat_of_two_and_three_tensors(dim):
    shapes = {
        0: ([2, 3], [4, 3], [1, 3]),
        1: ([2, 3], [2, 1], [2, 4]),
        -1: ([2, 3], [2, 2], [2, 5]),
    }
    a, b, c = (sample(s, torch.float32, seed=16 + i) for i, s in enumerate(shapes[dim]))
    two = run1(lambda fd, x, y: fd.ops.cat([x, y], dim), a, b, static_sizes=True)
    assert_same(two, torch.cat([a, b], dim))
    three = run1(lambda fd, x, y, z: fd.ops.cat([x, y, z], dim=dim), a, b, c, static_sizes=True)
    assert_same(three, torch.cat([a, b, c], dim))


def test_cat_of_symbolic_extents():
    a, b = sample([3, 4], torch.int64, seed=19), sample([5, 4], torch.int64, seed=20)
    assert_same(run1(lambda fd, x, y: fd.ops.cat([x, y], 0), a, b), torch.cat([a, b]))


def test_set_copies():
    x = sample([3, 4], torch.bfloat16, seed=21)
    out = run1(lambda fd, t: fd.ops.set(t), x)
    assert_same(out, x)
    assert out.data_ptr() != x.data_ptr()


def test_stride_order_keeps_the_values():
    x = sample([3, 4, 5], torch.float32, seed=22)
    assert_same(run1(lambda fd, t: fd.ops.stride_order(t, [0, 2, 1]), x), x)


def test_stride_order_input_of_any_layout():
    x = sample([4, 3], torch.float32, seed=23).t()  # column-major [3, 4]
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1, -1], dtype=DataType.Float, stride_order=[0, 1])
        fd.add_output(fd.ops.mul(t, 2.0))
    (out,) = fd.execute([x])
    assert_same(out, x * 2.0)


def test_an_input_given_as_an_output_is_returned():
    x = sample([3, 4], torch.float32, seed=24)
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1, -1], dtype=DataType.Float)
        fd.add_output(t)
        fd.add_output(fd.ops.neg(t))
    alias, negated = fd.execute([x])
    assert_same(alias, x)
    assert_same(negated, -x)


def test_a_cpu_scalar_with_other_tensors():
    x, s = sample([3, 4], torch.bfloat16, seed=25), torch.tensor(1.5)
    with FusionDefinition() as fd:
        t = fd.define_tensor([-1, -1], dtype=DataType.BFloat16)
        scalar = fd.define_tensor([], dtype=DataType.Float, is_cpu=True)
        fd.add_output(fd.ops.mul(t, scalar))
    (out,) = fd.execute([x, s])
    # BFloat16 arithmetic is Float (nvFuser's promotion).
    assert_same(out, x.float() * s)


def test_from_pytorch_defines_symbolic_or_static_inputs():
    x = sample([3, 1, 4], torch.int32, seed=26)
    with FusionDefinition() as fd:
        symbolic = fd.from_pytorch(x)
        static = fd.from_pytorch(x, static_sizes=True)
        fd.add_output(fd.ops.add(symbolic, static))
    assert symbolic.dtype() == DataType.Int32
    assert [e.is_symbolic() for e in symbolic.shape()] == [True, False, True]
    assert [e.value for e in static.shape()] == [3, 1, 4]
    (out,) = fd.execute([x, x])
    assert_same(out, x + x)


def test_shape_and_size_give_the_extents_at_execute():
    # The symbolic extents that fd.ops.shape / fd.ops.size return take the
    # input's sizes when the fusion runs.
    x = sample([5, 6], torch.float32, seed=29)
    b = sample([6], torch.float32, seed=30)

    def body(fd, t, bias):
        rows, cols = fd.ops.shape(t)
        assert rows.is_symbolic() and cols.is_symbolic()
        expanded = fd.ops.broadcast_in_dim(bias, [rows, cols], [1])
        return fd.ops.add(t, expanded), fd.ops.slice(t, [1, 0], [rows, fd.ops.size(t, 1)])

    summed, sliced = run(body, x, b)
    assert_same(summed, x + b)
    assert_same(sliced, x[1:])


def test_layout_operations_of_an_expanded_broadcast():
    # [1, h] expanded to [t, h]: the operations see t equal rows.
    t_, h = 4, 3
    x = sample([1, h], torch.float32, seed=27)
    y = sample([2, h], torch.float32, seed=28)

    def body(fd, tx, ty):
        b = fd.ops.broadcast_in_dim(tx, [t_, h], [0, 1])
        return fd.ops.set(b), fd.ops.permute(b, [1, 0]), fd.ops.cat([b, ty], 0)

    copied, permuted, joined = run(body, x, y, static_sizes=True)
    assert_same(copied, x.expand(t_, h))
    assert_same(permuted, x.expand(t_, h).t())
    assert_same(joined, torch.cat([x.expand(t_, h), y]))


# expand: torch's Tensor.expand on the same number of axes.
@pytest.mark.parametrize(
    "in_shape, shape",
    [
        ([1, 4], [3, 4]),
        ([1, 4], [3, -1]),
        ([2, 1, 1], [2, 5, 3]),
        ([3], [3]),
        ([1], [0]),
    ],
    ids=str,
)
def test_expand_matches_torch(in_shape, shape):
    x = sample(in_shape, torch.float32, seed=31)
    out = run1(lambda fd, t: fd.ops.expand(t, shape), x, static_sizes=True)
    assert_same(out, x.expand(*shape))


def test_expand_to_a_symbolic_extent_then_add():
    x = sample([1, 3], torch.float32, seed=32)
    y = sample([5, 3], torch.float32, seed=33)
    out = run1(
        lambda fd, tx, ty: fd.ops.add(fd.ops.expand(tx, [fd.ops.size(ty, 0), -1]), ty),
        x,
        y,
    )
    assert_same(out, x.expand(5, 3) + y)


def test_expand_then_sum_counts_every_repeated_element():
    x = sample([1, 4], torch.float32, seed=34)
    out = run1(lambda fd, t: fd.ops.sum(fd.ops.expand(t, [6, 4]), [0]), x, static_sizes=True)
    assert_same(out, x.expand(6, 4).sum(0))


def test_expand_refuses_what_torch_refuses():
    with pytest.raises(
        ValueError,
        match=r"expand: the extent of input dimension 0 .* and shape\[0\] must match, got 2 and 3",
    ):
        run1(lambda fd, t: fd.ops.expand(t, [3, 4]), torch.ones(2, 4), static_sizes=True)
    with pytest.raises(
        ValueError, match="expand: shape has 3 entries but the input has 2 dimensions"
    ):
        run1(lambda fd, t: fd.ops.expand(t, [1, 2, 4]), torch.ones(2, 4), static_sizes=True)
    with pytest.raises(ValueError, match=r"expand: shape\[0\] is -2"):
        run1(lambda fd, t: fd.ops.expand(t, [-2, 4]), torch.ones(1, 4), static_sizes=True)
    with pytest.raises(TypeError, match="expand: operand 0 must be a tensor, got 2.0"):
        run1(lambda fd, t: fd.ops.expand(fd.define_scalar(2.0), [4]), torch.ones(1))
