# SPDX-License-Identifier: MIT
"""Tensors with an extent of 0, per operation family: each gives torch's
result, or, where torch refuses, a user error naming the input. The
multi-device side (collectives, rings, sharded axes of extent 0) is in
multidevice/test_zero_size_collectives.py."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from op_testing import assert_same, run1

from mdfuser import DataType, FusionDefinition


def rand(*shape: int) -> torch.Tensor:
    return torch.rand(shape, generator=torch.Generator().manual_seed(sum(shape) + len(shape)))


EMPTY_2D = [(0, 4), (3, 0), (0, 0)]


@pytest.mark.parametrize("shape", EMPTY_2D, ids=str)
@pytest.mark.parametrize(
    "name, body, reference",
    [
        ("exp", lambda fd, x: fd.ops.exp(x), torch.exp),
        ("relu", lambda fd, x: fd.ops.relu(x), F.relu),
        ("add", lambda fd, x: fd.ops.add(x, x), lambda x: x + x),
        ("mul_scalar", lambda fd, x: fd.ops.mul(x, 2.0), lambda x: x * 2.0),
        ("where", lambda fd, x: fd.ops.where(fd.ops.gt(x, 0.5), x, 0.0), None),
        ("cast", lambda fd, x: fd.ops.cast(x, DataType.Half), lambda x: x.half()),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_pointwise(name, body, reference, shape):
    x = rand(*shape)
    if reference is None:
        reference = lambda x: torch.where(x > 0.5, x, 0.0)  # noqa: E731
    assert_same(run1(body, x), reference(x))


@pytest.mark.parametrize("shape", EMPTY_2D, ids=str)
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize(
    "name, body, reference",
    [
        ("sum", lambda fd, x, a: fd.ops.sum(x, [a]), lambda x, a: x.sum(a)),
        ("mean", lambda fd, x, a: fd.ops.mean(x, [a]), lambda x, a: x.mean(a)),
        ("softmax", lambda fd, x, a: fd.ops.softmax(x, a), lambda x, a: torch.softmax(x, a)),
        ("max", lambda fd, x, a: fd.ops.max(x, [a]), lambda x, a: x.amax(a)),
        ("min", lambda fd, x, a: fd.ops.min(x, [a]), lambda x, a: x.amin(a)),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_reductions(name, body, reference, shape, axis):
    """Sums and means of no values are 0 and NaN, as torch's; a max or min
    of an empty axis is refused, as torch refuses it, naming the axis; a
    softmax over an empty axis is empty."""
    x = rand(*shape)
    try:
        expected = reference(x, axis)
    except (RuntimeError, IndexError):
        expected = None
    if expected is None:
        with pytest.raises(ValueError) as error:
            run1(lambda fd, t: body(fd, t, axis), x)
        message = str(error.value)
        assert f"{name} over an empty axis: axis {axis} of T0" in message, message
        assert "has extent 0" in message and "torch refuses it too" in message, message
        return
    assert_same(run1(lambda fd, t: body(fd, t, axis), x), expected)


@pytest.mark.parametrize("m, k, n", [(0, 4, 3), (2, 0, 3), (2, 4, 0), (0, 0, 0)], ids=str)
@pytest.mark.parametrize("op", ["linear", "linear_bias", "matmul", "batched_matmul"])
def test_matmuls(op, m, k, n):
    """A GEMM with an extent of 0: an empty output, or zeros (plus the bias)
    when the summed axis is empty, as torch's."""
    x, w, b = rand(m, k), rand(n, k), rand(n)
    if op == "linear":
        got, want = run1(lambda fd, a, c: fd.ops.linear(a, c), x, w), F.linear(x, w)
    elif op == "linear_bias":
        got = run1(lambda fd, a, c, d: fd.ops.linear(a, c, d), x, w, b)
        want = F.linear(x, w, b)
    elif op == "matmul":
        wt = w.t().contiguous()
        got, want = run1(lambda fd, a, c: fd.ops.matmul(a, c), x, wt), x @ wt
    else:
        xb, wt = rand(2, m, k), w.t().contiguous()
        got, want = run1(lambda fd, a, c: fd.ops.matmul(a, c), xb, wt), xb @ wt
    assert_same(got, want)


@pytest.mark.parametrize(
    "name, body, reference",
    [
        ("permute", lambda fd, x: fd.ops.permute(x, [1, 0]), lambda x: x.permute(1, 0)),
        ("slice", lambda fd, x: fd.ops.slice(x, [0, 1], [0, 3]), lambda x: x[0:0, 1:3]),
        ("cat", lambda fd, x: fd.ops.cat([x, x], 0), lambda x: torch.cat([x, x], 0)),
        (
            "broadcast_in_dim",
            lambda fd, x: fd.ops.broadcast_in_dim(x, [2, 0, 4], [1, 2]),
            lambda x: x.expand(2, 0, 4),
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_layout(name, body, reference):
    x = rand(0, 4)
    assert_same(run1(body, x, static_sizes=True), reference(x))


@pytest.mark.parametrize("normalized", ["rows", "features"])
@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
def test_norms(op, normalized):
    """No rows: an empty output. No features: NaN-free emptiness as torch's
    (its output is empty too)."""
    x = rand(0, 8) if normalized == "rows" else rand(3, 0)
    h = x.shape[1]
    if op == "layer_norm":
        got = run1(lambda fd, t: fd.ops.layer_norm(t, 1), x)
        want = F.layer_norm(x, (h,))
    else:
        got = run1(lambda fd, t: fd.ops.rms_norm(t, 1), x)
        want = F.rms_norm(x, (h,), eps=1e-6)
    assert_same(got, want)


@pytest.mark.parametrize("shape", [[0], [0, 4], [3, 0]], ids=str)
def test_creation(shape):
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.full(shape, 1.5, DataType.Float))
    (out,) = fd.execute([])
    assert_same(out, torch.full(shape, 1.5))
