# SPDX-License-Identifier: MIT
"""linear with a weight [A, B, K]: out_features split in two, as
nvfuser_direct writes a column-parallel weight whose device axis is a
logical axis of its own. The output has an axis for each, A outermost as
in nvfuser_direct: [A, ..., B]."""

from __future__ import annotations

import pytest
import torch

from mdfuser import DataType, FusionDefinition


def reference(x, w, b=None):
    """[A, batch..., B]: torch's linear on the weight [A * B, K], its
    output's A axis moved first."""
    a, bb, k = w.shape
    out = torch.nn.functional.linear(x, w.reshape(a * bb, k), None if b is None else b.reshape(-1))
    return out.reshape(*x.shape[:-1], a, bb).movedim(-2, 0)


@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
@pytest.mark.parametrize("x_shape", [(5, 8), (2, 3, 8), (8,)], ids=["2d", "3d", "1d"])
def test_a_weight_split_in_two_gives_an_axis_each(bias, x_shape):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(*x_shape, generator=g)
    w = torch.randn(2, 3, 8, generator=g)
    b = torch.randn(2, 3, generator=g)
    with FusionDefinition() as fd:
        tx = fd.define_tensor([-1] * len(x_shape), dtype=DataType.Float)
        tw = fd.define_tensor([2, 3, 8], dtype=DataType.Float)
        args = [tx, tw]
        if bias:
            args.append(fd.define_tensor([2, 3], dtype=DataType.Float))
        fd.add_output(fd.ops.linear(*args))
    inputs = [x, w] + ([b] if bias else [])
    (out,) = fd.execute(inputs)
    expected = reference(x, w, b if bias else None)
    assert out.shape == (2, *x_shape[:-1], 3)
    torch.testing.assert_close(out, expected)


def test_weights_of_other_ranks_and_mismatched_biases_are_refused():
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, 8], dtype=DataType.Float)
        w = fd.define_tensor([2, 2, 3, 8], dtype=DataType.Float)
        with pytest.raises(
            ValueError,
            match=r"linear: weight must be 2-dimensional \[out_features, in_features\] or "
            r"3-dimensional \[A, B, in_features\] \(out_features split in two\), got 4",
        ):
            fd.ops.linear(x, w)
        w3 = fd.define_tensor([2, 3, 8], dtype=DataType.Float)
        b1 = fd.define_tensor([6], dtype=DataType.Float)
        with pytest.raises(
            ValueError, match=r"linear: bias must have the weight's out_features axes \(2\), got 1"
        ):
            fd.ops.linear(x, w3, b1)
        b2 = fd.define_tensor([2, 4], dtype=DataType.Float)
        with pytest.raises(
            ValueError, match=r"linear: out_features axis 1 of the weight and the bias"
        ):
            fd.ops.linear(x, w3, b2)
