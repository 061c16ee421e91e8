# SPDX-License-Identifier: MIT
"""grouped_mm against plain torch on one process: its three forms (rows,
columns or K cut into groups by the offsets), empty groups and rows past
the last offset, BFloat16, the weight transposed as nvfuser_direct's tests
write it, a grouped linear's backward written with grouped_mm, and its
errors."""

from __future__ import annotations

import pytest
import torch
from grouped_mm_reference import grouped_mm as reference
from grouped_mm_reference import offsets_of
from op_testing import assert_same, sample

from mdfuser import DataType, FusionDefinition

# Group sizes with an empty group in the middle and one at the end.
SIZES = [3, 0, 5, 2, 0]


def run_grouped_mm(a: torch.Tensor, b: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    with FusionDefinition() as fd:
        ta, tb, to = (fd.from_pytorch(t) for t in (a, b, offsets))
        fd.add_output(fd.ops.grouped_mm(ta, tb, to))
    (out,) = fd.execute([a, b, offsets])
    return out


def test_rows_by_group_times_each_groups_matrix():
    # [M, K] @ [G, K, N] -> [M, N]: the experts' forward.
    offsets = offsets_of(SIZES)
    a, b = sample([10, 8], torch.float32, seed=1), sample([5, 8, 6], torch.float32, seed=2)
    assert_same(run_grouped_mm(a, b, offsets), reference(a, b, offsets))


def test_rows_past_the_last_offset_are_zero():
    offsets = offsets_of([2, 3])
    a, b = sample([7, 4], torch.float32, seed=3), sample([2, 4, 3], torch.float32, seed=4)
    out = run_grouped_mm(a, b, offsets)
    assert_same(out, reference(a, b, offsets))
    assert torch.equal(out[5:], torch.zeros(2, 3))


def test_columns_by_group_times_each_groups_matrix():
    # [G, M, K] @ [K, N] -> [M, N]
    offsets = offsets_of(SIZES)
    a, b = sample([5, 4, 8], torch.float32, seed=5), sample([8, 10], torch.float32, seed=6)
    assert_same(run_grouped_mm(a, b, offsets), reference(a, b, offsets))


def test_k_by_group_gives_one_product_per_group():
    # [M, K] @ [K, N] -> [G, M, N]: the experts' weight gradient; an empty
    # group gives zeros.
    offsets = offsets_of(SIZES)
    a, b = sample([4, 10], torch.float32, seed=7), sample([10, 6], torch.float32, seed=8)
    out = run_grouped_mm(a, b, offsets)
    assert_same(out, reference(a, b, offsets))
    assert torch.equal(out[1], torch.zeros(4, 6))


def test_bfloat16_keeps_its_dtype():
    offsets = offsets_of([4, 4, 8])
    a, b = sample([16, 16], torch.bfloat16, seed=9), sample([3, 16, 8], torch.bfloat16, seed=10)
    out = run_grouped_mm(a, b, offsets)
    assert out.dtype == torch.bfloat16
    assert_same(out, reference(a, b, offsets))


def test_symbolic_and_static_extents_agree():
    offsets = offsets_of([1, 2])
    a, b = sample([3, 4], torch.float32, seed=11), sample([2, 4, 5], torch.float32, seed=12)
    with FusionDefinition() as fd:
        ta = fd.define_tensor([-1, 4], dtype=DataType.Float)
        tb = fd.define_tensor([2, 4, 5], dtype=DataType.Float)
        to = fd.define_tensor([2], dtype=DataType.Int32)
        fd.add_output(fd.ops.grouped_mm(ta, tb, to))
    (out,) = fd.execute([a, b, offsets])
    assert_same(out, reference(a, b, offsets))


def test_weight_stored_n_by_k_and_permuted():
    # nvfuser_direct's tests keep the experts' weights [G, N, K] and permute.
    g, n, k, m = 4, 6, 8, 12
    offsets = offsets_of([2, 3, 4, 3])
    x, w = sample([m, k], torch.float32, seed=13), sample([g, n, k], torch.float32, seed=14)
    with FusionDefinition() as fd:
        tx = fd.define_tensor([-1, k], dtype=DataType.Float)
        tw = fd.define_tensor([g, n, k], dtype=DataType.Float)
        to = fd.define_tensor([g], dtype=DataType.Int32)
        fd.add_output(fd.ops.grouped_mm(tx, fd.ops.permute(tw, [0, 2, 1]), to))
    (out,) = fd.execute([x, w, offsets])
    assert_same(out, reference(x, w.transpose(1, 2), offsets))


def test_grouped_linear_backward_written_with_grouped_mm():
    # y = grouped_mm(x, w, offsets); the gradients as nvfuser_direct's
    # backward writes them: dx = grouped_mm(dy, w^T), dw = grouped_mm(x^T,
    # dy) with the offsets on K.
    g, k, n = 3, 8, 6
    sizes = [4, 1, 5]
    offsets = offsets_of(sizes)
    x = sample([sum(sizes), k], torch.float32, seed=15)
    w = sample([g, k, n], torch.float32, seed=16)
    dy = sample([sum(sizes), n], torch.float32, seed=17)
    with FusionDefinition() as fd:
        tx, tw, tdy = (fd.from_pytorch(t) for t in (x, w, dy))
        to = fd.define_tensor([g], dtype=DataType.Int32)
        fd.add_output(fd.ops.grouped_mm(tdy, fd.ops.permute(tw, [0, 2, 1]), to))
        fd.add_output(fd.ops.grouped_mm(fd.ops.permute(tx, [1, 0]), tdy, to))
    dx, dw = fd.execute([x, w, dy, offsets])

    xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
    reference(xr, wr, offsets).backward(dy)
    assert_same(dx, xr.grad)
    assert_same(dw, wr.grad)


# ------------------------------------------------------------------ errors


def operands(a_shape, b_shape, offsets_shape=(3,), dtype=DataType.Float, offsets_dtype=None):
    fd = FusionDefinition()
    a = fd.define_tensor(list(a_shape), dtype=dtype)
    b = fd.define_tensor(list(b_shape), dtype=dtype)
    o = fd.define_tensor(list(offsets_shape), dtype=offsets_dtype or DataType.Int32)
    return fd, a, b, o


@pytest.mark.parametrize("dtype", [DataType.Int, DataType.Float, DataType.Bool])
def test_offsets_must_be_int32(dtype):
    fd, a, b, o = operands([6, 4], [3, 4, 5], offsets_dtype=dtype)
    with pytest.raises(TypeError, match=f"grouped_mm: offsets must be Int32 .* got {dtype.name}"):
        fd.ops.grouped_mm(a, b, o)


def test_offsets_must_be_one_dimensional():
    fd, a, b, o = operands([6, 4], [3, 4, 5], offsets_shape=(3, 1))
    with pytest.raises(
        ValueError, match="grouped_mm: offsets must be 1-dimensional \\[groups\\], got 2 dimensions"
    ):
        fd.ops.grouped_mm(a, b, o)


def test_mismatched_k():
    fd, a, b, o = operands([6, 4], [3, 7, 5])
    with pytest.raises(
        ValueError, match="grouped_mm: K of mat1 \\(its last axis\\) and of mat2 .* 4 and 7"
    ):
        fd.ops.grouped_mm(a, b, o)


def test_group_counts_must_agree():
    fd, a, b, o = operands([6, 4], [2, 4, 5], offsets_shape=(3,))
    with pytest.raises(
        ValueError, match="grouped_mm: the groups of offsets and of mat2 .* 3 and 2"
    ):
        fd.ops.grouped_mm(a, b, o)


@pytest.mark.parametrize(
    "a_shape, b_shape, note",
    [([2, 6, 4], [2, 4, 5], "use matmul"), ([4], [3, 4, 5], ""), ([6, 4], [1, 3, 4, 5], "")],
    ids=["3x3", "1x3", "2x4"],
)
def test_ranks_outside_the_three_forms(a_shape, b_shape, note):
    fd, a, b, o = operands(a_shape, b_shape)
    with pytest.raises(
        ValueError,
        match=f"grouped_mm: takes mat1 \\[M, K\\] .* got {len(a_shape)} and "
        f"{len(b_shape)} dimensions.*{note}",
    ):
        fd.ops.grouped_mm(a, b, o)


def test_operand_dtypes_must_agree():
    fd = FusionDefinition()
    a = fd.define_tensor([6, 4], dtype=DataType.Float)
    b = fd.define_tensor([3, 4, 5], dtype=DataType.BFloat16)
    o = fd.define_tensor([3], dtype=DataType.Int32)
    with pytest.raises(
        TypeError, match="grouped_mm: mat1 and mat2 must have the same dtype, got Float"
    ):
        fd.ops.grouped_mm(a, b, o)


def test_integer_operands_are_refused():
    fd, a, b, o = operands([6, 4], [3, 4, 5], dtype=DataType.Int)
    with pytest.raises(TypeError, match="grouped_mm takes floating-point mat1 and mat2, got Int"):
        fd.ops.grouped_mm(a, b, o)


def test_offsets_that_are_not_a_tensor():
    fd, a, b, _ = operands([6, 4], [3, 4, 5])
    with pytest.raises(TypeError, match="grouped_mm"):
        fd.ops.grouped_mm(a, b, [2, 4, 6])


@pytest.mark.parametrize(
    "values, message",
    [
        ([4, 2, 6], "offsets\\[1\\] = 2 after 4"),
        ([2, 4, 9], "ragged axis of 6 positions, got offsets\\[2\\] = 9"),
        ([-1, 2, 6], "offsets\\[0\\] = -1"),
    ],
    ids=["decreasing", "past_the_end", "negative"],
)
def test_offsets_values_are_checked_when_they_arrive(values, message):
    a, b = sample([6, 4], torch.float32, seed=18), sample([3, 4, 5], torch.float32, seed=19)
    with pytest.raises(ValueError, match=f"grouped_mm: offsets must be non-decreasing.*{message}"):
        run_grouped_mm(a, b, torch.tensor(values, dtype=torch.int32))


def test_offsets_given_in_another_dtype_at_execute():
    with FusionDefinition() as fd:
        ta = fd.define_tensor([6, 4], dtype=DataType.Float)
        tb = fd.define_tensor([3, 4, 5], dtype=DataType.Float)
        to = fd.define_tensor([3], dtype=DataType.Int32)
        fd.add_output(fd.ops.grouped_mm(ta, tb, to))
    a, b = sample([6, 4], torch.float32, seed=20), sample([3, 4, 5], torch.float32, seed=21)
    with pytest.raises(TypeError, match="Int32"):
        fd.execute([a, b, torch.tensor([2, 4, 6])])
