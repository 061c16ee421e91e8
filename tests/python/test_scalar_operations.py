# SPDX-License-Identifier: MIT
"""Operations on scalars alone (nvfuser_direct's reciprocal of a scalar
input, say): a 0-dimensional tensor that feeds tensor operations as a
scalar would, computed at every run from the values given."""

from __future__ import annotations

import pytest
import torch

from mdfuser import DataType, FusionDefinition


def test_the_reciprocal_of_a_scalar_input_scales_a_tensor():
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, 4], dtype=DataType.BFloat16)
        s = fd.define_scalar(None, dtype=DataType.Double)
        r = fd.ops.reciprocal(s)
        fd.add_output(fd.ops.mul(x, r))
    x = torch.arange(8.0).view(2, 4).bfloat16()
    for value in (4.0, 0.5):
        (out,) = fd.execute([x, value])
        # BFloat16 arithmetic is Float, as in nvFuser.
        assert out.dtype == torch.float32
        assert torch.equal(out, x.float() * torch.tensor(1.0 / value, dtype=torch.float64).item())


@pytest.mark.parametrize(
    "define, expected, dtype",
    [
        (lambda fd, a, b: fd.ops.add(a, b), 5.0, torch.float64),
        (lambda fd, a, b: fd.ops.sqrt(a), 2.0, torch.float64),
        (lambda fd, a, b: fd.ops.neg(fd.ops.mul(a, b)), -4.0, torch.float64),
    ],
    ids=["add", "sqrt", "neg_mul"],
)
def test_scalar_results_are_0_dimensional_outputs(define, expected, dtype):
    with FusionDefinition() as fd:
        a = fd.define_scalar(None, dtype=DataType.Double)
        b = fd.define_scalar(None, dtype=DataType.Double)
        fd.add_output(define(fd, a, b))
    (out,) = fd.execute([4.0, 1.0])
    assert out.dim() == 0 and out.dtype == dtype
    assert out.item() == expected


def test_an_int_under_a_float_operation_gives_a_float():
    with FusionDefinition() as fd:
        a = fd.define_scalar(None, dtype=DataType.Int)
        fd.add_output(fd.ops.exp(a))
    (out,) = fd.execute([0])
    assert out.dtype == torch.float32 and out.item() == 1.0


def test_a_cast_scalar_is_a_0_dimensional_tensor_of_the_dtype():
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1], dtype=DataType.Float)
        fd.add_output(fd.ops.add(x, fd.ops.cast(2.7, DataType.Int)))
    (out,) = fd.execute([torch.zeros(3)])
    assert torch.equal(out, torch.full((3,), 2.0))


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize("op", ["neg", "abs", "relu"])
def test_a_bool_scalar_under_an_operation_that_refuses_bool_is_a_type_error(op):
    with FusionDefinition() as fd:
        b = fd.define_scalar(None, dtype=DataType.Bool)
        with pytest.raises(TypeError, match=f"{op} does not take Bool operands"):
            getattr(fd.ops, op)(b)


def test_sub_of_bool_scalars_is_a_type_error():
    with FusionDefinition() as fd:
        with pytest.raises(TypeError, match="sub does not take Bool operands"):
            fd.ops.sub(fd.define_scalar(True), fd.define_scalar(False))


def test_an_operand_that_is_not_a_number_or_tensor_is_a_type_error():
    with FusionDefinition() as fd:
        with pytest.raises(TypeError, match="reciprocal: operand 0 must be"):
            fd.ops.reciprocal("2.0")
        with pytest.raises(TypeError, match="reciprocal: operand 0 must be"):
            fd.ops.reciprocal(None)
