# SPDX-License-Identifier: MIT
"""User errors of the operations, raised while defining: each names the
operation, the offending value and what was expected. (Reduction, matmul,
attention and normalization errors sit with their families' tests.)"""

from __future__ import annotations

import pytest
import torch

from mdfuser import DataType, FusionDefinition


def define(shape, dtype=DataType.Float):
    fd = FusionDefinition()
    return fd, fd.define_tensor(shape, dtype=dtype)


def test_binary_shape_mismatch():
    fd, a = define([2, 3])
    b = fd.define_tensor([4, 3])
    with pytest.raises(
        ValueError,
        match="add: the extents of broadcast dimension 0 of the operands must match, got 2 and 4",
    ):
        fd.ops.add(a, b)


def test_binary_shape_mismatch_aligned_at_the_last_axis():
    fd, a = define([2, 3])
    b = fd.define_tensor([2])
    with pytest.raises(
        ValueError, match="mul: the extents of broadcast dimension 1 .* got 3 and 2"
    ):
        fd.ops.mul(a, b)


@pytest.mark.parametrize("name", ["silu", "gelu"])
@pytest.mark.parametrize("dtype", [DataType.Int, DataType.Int32, DataType.Bool])
def test_floating_only_operations_refuse_integers(name, dtype):
    fd, a = define([2], dtype)
    with pytest.raises(
        TypeError, match=f"{name} takes floating-point operands only, got {dtype.name}; cast"
    ):
        getattr(fd.ops, name)(a)


@pytest.mark.parametrize("name", ["neg", "abs", "relu"])
def test_operations_refusing_bool(name):
    fd, a = define([2], DataType.Bool)
    with pytest.raises(TypeError, match=f"{name} does not take Bool operands"):
        getattr(fd.ops, name)(a)


@pytest.mark.parametrize("rhs", [1, True, "tensor"])
def test_sub_refuses_any_bool_operand(rhs):
    fd, a = define([2], DataType.Bool)
    other = fd.define_tensor([2], dtype=DataType.Int) if rhs == "tensor" else rhs
    with pytest.raises(TypeError, match="sub does not take Bool operands"):
        fd.ops.sub(a, other)
    with pytest.raises(TypeError, match="sub does not take Bool operands"):
        fd.ops.sub(other, a)


def test_reshape_with_a_wrong_element_count():
    fd, a = define([2, 3])
    with pytest.raises(ValueError, match=r"reshape of T0.* to \[4, 2\]: .*6 elements .* 8"):
        fd.ops.reshape(a, [4, 2])


def test_reshape_with_two_inferred_extents():
    fd, a = define([2, 3])
    with pytest.raises(ValueError, match="at most one -1 is allowed"):
        fd.ops.reshape(a, [-1, -1])


def test_cat_of_different_ranks():
    fd, a = define([2, 3])
    b = fd.define_tensor([2])
    with pytest.raises(ValueError, match="cat: tensor 1 has 1 dimensions but tensor 0 has 2"):
        fd.ops.cat([a, b], 0)


def test_cat_of_different_dtypes():
    fd, a = define([2, 3])
    b = fd.define_tensor([2, 3], dtype=DataType.BFloat16)
    with pytest.raises(TypeError, match="cat: tensor 1 has dtype BFloat16 but tensor 0 has Float"):
        fd.ops.cat([a, b], 0)


def test_cat_of_different_extents_outside_the_axis():
    fd, a = define([2, 3])
    b = fd.define_tensor([2, 4])
    with pytest.raises(
        ValueError, match="cat: dimension 1 of tensor 0 and tensor 1 must match, got 3 and 4"
    ):
        fd.ops.cat([a, b], 0)


def test_squeeze_of_an_axis_that_is_not_one():
    fd, a = define([2, 3])
    with pytest.raises(
        ValueError,
        match="squeeze: dimension 1 of T0.* has extent 3; only dimensions of extent 1 can be",
    ):
        fd.ops.squeeze(a, [1])


@pytest.mark.parametrize(
    "starts, ends, message",
    [
        ([0, 0], [2, 4], "slice: end 4 of dimension 1 is past its extent 3"),
        ([-1, 0], [2, 3], "slice: start -1 of dimension 0 is negative"),
        ([2, 0], [1, 3], "slice: end 1 of dimension 0 is before its start 2"),
        ([3, 0], [3, 3], "slice: end 3 of dimension 0 is past its extent 2"),
        ([0], [1], r"slice: start_indices and end_indices need one entry per dimension"),
    ],
)
def test_slice_out_of_range(starts, ends, message):
    fd, a = define([2, 3])
    with pytest.raises(ValueError, match=message):
        fd.ops.slice(a, starts, ends)


@pytest.mark.parametrize("end, ok", [(3, True), (4, False), (100, False)])
def test_slice_past_a_symbolic_extent_is_refused_when_inputs_arrive(end, ok):
    """The extent is known only at execute: checked then, before anything
    runs, like a static one at definition."""
    fd, a = define([-1, 4])
    fd.add_output(fd.ops.slice(a, [0, 0], [end, 4]))
    t = torch.arange(12.0).reshape(3, 4)
    if ok:
        (out,) = fd.execute([t])
        assert torch.equal(out, t[:end])
        return
    with pytest.raises(
        ValueError, match=rf"slice: the end of dimension 0 is {end}, past its extent 3"
    ):
        fd.execute([t])


@pytest.mark.parametrize(
    "dims, message",
    [
        ([0, 0, 1], r"permute: dims=\[0, 0, 1\] names dimension 0 twice; expected a permutation"),
        ([0, 1], r"permute: dims=\[0, 1\] has 2 entries but the input has 3 dimensions"),
        ([0, 1, 3], "permute: dimension 3 is out of range for a tensor of 3 dimensions"),
    ],
)
def test_permute_that_is_not_a_permutation(dims, message):
    fd, a = define([2, 3, 4])
    with pytest.raises(ValueError, match=message):
        fd.ops.permute(a, dims)


def test_stride_order_that_is_not_a_permutation():
    fd, a = define([2, 3])
    with pytest.raises(ValueError, match=r"stride_order: \[0, 0\] is not a permutation of 0..1"):
        fd.ops.stride_order(a, [0, 0])


def test_broadcast_in_dim_errors():
    fd, a = define([3])
    with pytest.raises(ValueError, match=r"broadcast_in_dim: broadcast_dims has 2 entries"):
        fd.ops.broadcast_in_dim(a, [2, 3], [0, 1])
    with pytest.raises(
        ValueError,
        match=r"broadcast_in_dim: the extent of input dimension 0 and shape\[1\] must match, "
        "got 3 and 4",
    ):
        fd.ops.broadcast_in_dim(a, [2, 4], [1])
    with pytest.raises(ValueError, match=r"broadcast_in_dim: shape\[0\] is -1"):
        fd.ops.broadcast_in_dim(a, [-1, 3], [1])


def test_operands_of_another_fusion_definition():
    fd, a = define([2])
    _, b = define([2])
    with pytest.raises(ValueError, match="add: operand 1 T0.* belongs to another FusionDefinition"):
        fd.ops.add(a, b)
    with pytest.raises(ValueError, match="cat: operand 1 T0.* belongs to another FusionDefinition"):
        fd.ops.cat([a, b], 0)
    with pytest.raises(ValueError, match="size: operand 0 T0.* belongs to another"):
        fd.ops.size(b, 0)
    with pytest.raises(ValueError, match="shape: operand 0 T0.* belongs to another"):
        fd.ops.shape(b)


def test_a_torch_tensor_passed_to_an_operation():
    fd, a = define([2])
    with pytest.raises(
        TypeError,
        match=r"mul: operand 1 must be a TensorView, .* \(Tensor\); torch tensors are passed to "
        "execute",
    ):
        fd.ops.mul(a, torch.ones(2))
    with pytest.raises(TypeError, match="sum: operand 0 must be a TensorView"):
        fd.ops.sum(torch.ones(2))
    with pytest.raises(TypeError, match="stride_order: expected a TensorView, got Tensor"):
        fd.ops.stride_order(torch.ones(2), [0])
    with pytest.raises(TypeError, match="shape: expected a TensorView, got Tensor"):
        fd.ops.shape(torch.ones(2))


def test_operations_need_operands():
    fd, _ = define([2])
    with pytest.raises(TypeError, match="exp: operand 0 must be a tensor or a number, got None"):
        fd.ops.exp(None)


def test_define_scalar_errors():
    fd = FusionDefinition()
    # Without a value, a scalar input (tests/python/test_scalar_inputs.py).
    assert fd.define_scalar().is_symbolic() and fd.define_scalar().dtype() == DataType.Double
    with pytest.raises(
        TypeError, match="define_scalar: value must be a bool, int or float, got str"
    ):
        fd.define_scalar("1")
    with pytest.raises(TypeError, match="define_scalar: 0.5 cannot be a Int"):
        fd.define_scalar(0.5, DataType.Int)


def test_python_ints_beyond_64_bits():
    fd, a = define([2], DataType.Int)
    with pytest.raises(
        ValueError, match="add: operand 1 9223372036854775808 does not fit in 64 bits"
    ):
        fd.ops.add(a, 2**63)
    with pytest.raises(ValueError, match=r"sum: dims -?\d+ does not fit in 64 bits"):
        fd.ops.sum(a, [-(2**64)])
    with pytest.raises(ValueError, match=r"reshape: extent \d+ does not fit in 64 bits"):
        fd.ops.reshape(a, [2**70])


def test_static_shapes_of_more_elements_than_an_int64_counts_are_refused():
    with pytest.raises(
        ValueError, match=r"a tensor of extents \[4611686018427387904, 4\] would hold more than"
    ):
        define([2**62, 4])
    fd, a = define([-1, 4])
    with pytest.raises(ValueError, match=r"would hold more than 2\^63 - 1 elements"):
        fd.ops.broadcast_in_dim(a, [2**62, 8, 4], [1, 2])
    define([0, 2**62, 4])  # empty: no element to count
