# SPDX-License-Identifier: MIT
"""linear and matmul against plain torch: with and without bias, batched
inputs, batch broadcasting, and their operand errors."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from op_testing import assert_same, run, run1, sample


@pytest.mark.parametrize("in_shape", [[5, 8], [2, 3, 8], [8]], ids=str)
@pytest.mark.parametrize("with_bias", [False, True])
def test_linear(in_shape, with_bias):
    x, w = sample(in_shape, torch.float32, seed=1), sample([4, 8], torch.float32, seed=2)
    b = sample([4], torch.float32, seed=3)
    if with_bias:
        out = run1(lambda fd, tx, tw, tb: fd.ops.linear(tx, tw, tb), x, w, b)
    else:
        out = run1(lambda fd, tx, tw: fd.ops.linear(tx, tw), x, w)
    assert_same(out, F.linear(x, w, b if with_bias else None))


def test_linear_in_bfloat16():
    x, w = sample([6, 16], torch.bfloat16, seed=4), sample([3, 16], torch.bfloat16, seed=5)
    b = sample([3], torch.bfloat16, seed=6)
    out = run1(lambda fd, tx, tw, tb: fd.ops.linear(tx, tw, bias=tb), x, w, b)
    assert_same(out, F.linear(x, w, b))


@pytest.mark.parametrize(
    "a_shape, b_shape",
    [
        ([3, 8], [8, 5]),
        ([2, 3, 8], [8, 5]),
        ([3, 8], [2, 8, 5]),
        ([2, 3, 8], [2, 8, 5]),
        ([2, 1, 3, 8], [4, 8, 5]),
        ([1, 3, 8], [6, 8, 5]),
    ],
    ids=str,
)
@pytest.mark.parametrize("static_sizes", [False, True])
def test_matmul_broadcasts_batch_axes(a_shape, b_shape, static_sizes):
    a, b = sample(a_shape, torch.float32, seed=7), sample(b_shape, torch.float32, seed=8)
    out = run1(lambda fd, x, y: fd.ops.matmul(x, y), a, b, static_sizes=static_sizes)
    assert_same(out, torch.matmul(a, b))


def test_linear_then_pointwise_and_reduction():
    x, w = sample([4, 8], torch.float32, seed=9), sample([6, 8], torch.float32, seed=10)

    def body(fd, tx, tw):
        y = fd.ops.relu(fd.ops.linear(tx, tw))
        return fd.ops.sum(y, [1])

    assert_same(run1(body, x, w), F.relu(F.linear(x, w)).sum(1))


# ------------------------------------------------------------------ errors


def test_linear_of_bools_is_a_type_error():
    x, w = torch.ones(2, 3, dtype=torch.bool), torch.ones(4, 3, dtype=torch.bool)
    with pytest.raises(TypeError, match="linear takes floating-point or integer tensors, got Bool"):
        run1(lambda fd, tx, tw: fd.ops.linear(tx, tw), x, w)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32], ids=str)
@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
def test_linear_of_integers_on_the_cpu_is_torchs(dtype, bias):
    g = torch.Generator().manual_seed(3)
    x = torch.randint(-50, 50, (5, 7), generator=g, dtype=dtype)
    w = torch.randint(-50, 50, (4, 7), generator=g, dtype=dtype)
    b = torch.randint(-50, 50, (4,), generator=g, dtype=dtype)
    if bias:
        got = run1(lambda fd, tx, tw, tb: fd.ops.linear(tx, tw, tb), x, w, b)
        assert torch.equal(got, F.linear(x, w, b))
    else:
        got = run1(lambda fd, tx, tw: fd.ops.linear(tx, tw), x, w)
        assert torch.equal(got, F.linear(x, w))
    assert got.dtype == dtype


def test_batched_matmul_of_integers_on_the_cpu_is_torchs():
    g = torch.Generator().manual_seed(4)
    a = torch.randint(-9, 9, (3, 2, 5), generator=g)
    b = torch.randint(-9, 9, (5, 4), generator=g)
    assert torch.equal(run1(lambda fd, ta, tb: fd.ops.matmul(ta, tb), a, b), torch.matmul(a, b))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_matmul_of_integers_on_cuda_is_a_type_error():
    a = torch.ones(2, 3, dtype=torch.int64, device="cuda")
    with pytest.raises(TypeError, match="matmul of Int tensors runs on the CPU only"):
        run1(lambda fd, ta, tb: fd.ops.matmul(ta, tb), a, a.t())


def test_a_stream_split_of_the_axis_a_linear_reduces_is_a_value_error():
    """The chunks of in_features would have to be added up across the
    stream loop: the split is refused, naming the axis and the operation,
    rather than silently run whole."""
    from mdfuser import DataType, FusionDefinition, ParallelType

    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, 8], dtype=DataType.Float)
        w = fd.define_tensor([4, 8], dtype=DataType.Float)
        fd.add_output(fd.ops.linear(x, w))
        x.outer_split(1, 2)
        x.axis(1).parallelize(ParallelType.stream)
    with pytest.raises(ValueError) as error:
        fd.execute([torch.ones(5, 8), torch.ones(4, 8)])
    message = str(error.value)
    assert message.startswith("axis 1 of T0") and "is split into 2 stream chunks" in message
    assert "no operation runs in them: linear reads it and reduces that axis" in message


def test_linear_in_features_mismatch_is_a_value_error():
    with pytest.raises(
        ValueError,
        match=r"linear: in_features of the input \(last axis\) and of the weight \(its last axis\) "
        "must match, got 8 and 6",
    ):
        run1(
            lambda fd, a, b: fd.ops.linear(a, b),
            torch.ones(2, 8),
            torch.ones(3, 6),
            static_sizes=True,
        )


def test_linear_mixed_dtypes_is_a_type_error():
    with pytest.raises(TypeError, match="linear: operands must have the same dtype, got Float"):
        run1(
            lambda fd, a, b: fd.ops.linear(a, b),
            torch.ones(2, 8),
            torch.ones(3, 8, dtype=torch.bfloat16),
        )


def test_matmul_batch_mismatch_is_a_value_error():
    with pytest.raises(
        ValueError, match="matmul: batch dimension 0 of the operands must match, got 2 and 3"
    ):
        run1(
            lambda fd, a, b: fd.ops.matmul(a, b),
            torch.ones(2, 4, 8),
            torch.ones(3, 8, 5),
            static_sizes=True,
        )


def test_contractions_of_an_expanded_broadcast():
    # Batch axes expanded from one row: [1, K] -> [t, K] and [1, M, K] -> [b, M, K].
    x, w = sample([1, 8], torch.float32, seed=11), sample([4, 8], torch.float32, seed=12)
    a, b = sample([1, 3, 8], torch.float32, seed=13), sample([2, 8, 5], torch.float32, seed=14)

    def body(fd, tx, tw, ta, tb):
        ex = fd.ops.broadcast_in_dim(tx, [6, 8], [0, 1])
        ea = fd.ops.broadcast_in_dim(ta, [2, 3, 8], [0, 1, 2])
        gram = fd.ops.matmul(ea, fd.ops.permute(ea, [0, 2, 1]))
        return fd.ops.linear(ex, tw), fd.ops.matmul(ea, tb), gram

    lin, mm, gram = run(body, x, w, a, b, static_sizes=True)
    assert_same(lin, F.linear(x.expand(6, 8), w))
    assert_same(mm, torch.matmul(a.expand(2, 3, 8), b))
    assert_same(gram, torch.matmul(a.expand(2, 3, 8), a.expand(2, 3, 8).transpose(1, 2)))
