# SPDX-License-Identifier: MIT
"""Every operation and every API that takes a TensorView or a Scalar refuses
one of another FusionDefinition with a ValueError naming the operation and
the operand, and leaves the fusion as it was: a value of another fusion
would otherwise be read from memory this fusion never writes."""

from __future__ import annotations

import functools

import pytest

from mdfuser import DataType, FusionDefinition


class Operands:
    """Hands out operands for one call of an operation: tensors and scalars
    of `fd`, except the `foreign`-th one, which comes from another
    FusionDefinition."""

    def __init__(self, fd: FusionDefinition, foreign: int | None = None) -> None:
        self.fd = fd
        self.other = FusionDefinition()
        self.foreign = foreign
        self.count = 0

    def _owner(self) -> FusionDefinition:
        owner = self.other if self.count == self.foreign else self.fd
        self.count += 1
        return owner

    def t(self, shape=(2, 4), dtype=DataType.Float):
        """A tensor operand."""
        return self._owner().define_tensor(list(shape), dtype=dtype)

    def s(self, value: float = 2.0):
        """A scalar operand."""
        return self._owner().define_scalar(value)

    def extent(self, tensor, dim: int):
        """An extent operand: `tensor`'s extent `dim`, or another fusion's
        symbolic extent."""
        owner = self._owner()
        return tensor.shape()[dim] if owner is self.fd else owner.define_tensor([-1]).shape()[0]


UNARY = [
    "abs", "cos", "erf", "exp", "gelu", "gelu_tanh", "log", "log1p", "neg",
    "reciprocal", "relu", "rsqrt", "sigmoid", "silu", "sin", "sqrt", "tanh",
]  # fmt: skip
BINARY = [
    "add", "div", "eq", "ge", "gt", "le", "lt", "maximum", "minimum", "mul",
    "ne", "pow", "sub",
]  # fmt: skip
SDPA = (2, 2, 4, 8)


def unary(name, ops, o):
    return getattr(ops, name)(o.t())


def binary(name, ops, o):
    return getattr(ops, name)(o.t(), o.t())


# A valid call of each operation of fd.ops, its operands taken from `o`.
CALLS = {
    **{name: functools.partial(unary, name) for name in UNARY},
    **{name: functools.partial(binary, name) for name in BINARY},
    "add(tensor, scalar)": lambda ops, o: ops.add(o.t(), o.s()),
    "where": lambda ops, o: ops.where(o.t(dtype=DataType.Bool), o.t(), o.t()),
    "cast": lambda ops, o: ops.cast(o.t(), DataType.Double),
    "clamp": lambda ops, o: ops.clamp(o.t(), o.s(), o.t()),
    "set": lambda ops, o: ops.set(o.t()),
    "stride_order": lambda ops, o: ops.stride_order(o.t(), [1, 0]),
    "shape": lambda ops, o: ops.shape(o.t()),
    "size": lambda ops, o: ops.size(o.t(), 0),
    "sum": lambda ops, o: ops.sum(o.t(), [1]),
    "max": lambda ops, o: ops.max(o.t(), [1]),
    "min": lambda ops, o: ops.min(o.t(), [1]),
    "mean": lambda ops, o: ops.mean(o.t(), [1]),
    "var": lambda ops, o: ops.var(o.t(), [1]),
    "var_mean": lambda ops, o: ops.var_mean(o.t(), [1]),
    "softmax": lambda ops, o: ops.softmax(o.t(), 1),
    "layer_norm": lambda ops, o: ops.layer_norm(o.t(), 1, o.t([4]), o.t([4])),
    "rms_norm": lambda ops, o: ops.rms_norm(o.t(), 1, o.t([4])),
    "broadcast": lambda ops, o: ops.broadcast(o.t(), [False, True, False]),
    "broadcast_in_dim": lambda ops, o: (
        lambda x, y: ops.broadcast_in_dim(x, [o.extent(y, 0), 4], [1])
    )(o.t([4]), o.t([-1])),
    "expand": lambda ops, o: (lambda x, y: ops.expand(x, [o.extent(y, 0), 4]))(
        o.t([1, 4]), o.t([-1])
    ),
    "full": lambda ops, o: (lambda y: ops.full([o.extent(y, 0), 3], o.s(), DataType.Float))(
        o.t([-1])
    ),
    "iota": lambda ops, o: (lambda y: ops.iota(o.extent(y, 0), o.s(), o.s(), DataType.Float))(
        o.t([-1])
    ),
    "uniform": lambda ops, o: (
        lambda y: ops.uniform(o.s(1.0), o.s(2.0), [o.extent(y, 0)], rng_seed=1, rng_offset=0)
    )(o.t([-1])),
    "normal": lambda ops, o: (lambda y: ops.normal(o.s(0.0), o.s(1.0), [o.extent(y, 0), 2]))(
        o.t([-1])
    ),
    "reshape": lambda ops, o: (lambda x: ops.reshape(x, [o.extent(x, 0), 2, 2]))(o.t([-1, 4])),
    "permute": lambda ops, o: ops.permute(o.t(), [1, 0]),
    "squeeze": lambda ops, o: ops.squeeze(o.t([2, 1]), [1]),
    "slice": lambda ops, o: (lambda x: ops.slice(x, [0, 0], [o.extent(x, 0), 4]))(o.t([-1, 4])),
    "cat": lambda ops, o: ops.cat([o.t(), o.t()], 0),
    "linear": lambda ops, o: ops.linear(o.t(), o.t([3, 4]), o.t([3])),
    "matmul": lambda ops, o: ops.matmul(o.t(), o.t([4, 3])),
    "grouped_mm": lambda ops, o: ops.grouped_mm(o.t(), o.t([2, 4, 3]), o.t([2], DataType.Int32)),
    "sdpfa_fwd": lambda ops, o: ops.sdpfa_fwd(
        o.t(SDPA, DataType.BFloat16), o.t(SDPA, DataType.BFloat16), o.t(SDPA, DataType.BFloat16)
    ),
    "sdpfa_bwd": lambda ops, o: ops.sdpfa_bwd(
        *(o.t(SDPA, DataType.BFloat16) for _ in range(5)),
        o.t(SDPA[:3], DataType.Float),
        0.0,
        False,
        None,
        None,
        None,
    ),
}


def operand_count(call) -> int:
    fd = FusionDefinition()
    operands = Operands(fd)
    call(fd.ops, operands)  # valid with operands of one fusion
    return operands.count


def cases() -> list:
    return [
        pytest.param(name, i, id=f"{name}-operand-{i}")
        for name, call in CALLS.items()
        for i in range(operand_count(call))
    ]


def test_every_operation_is_covered():
    public = {name for name in dir(FusionDefinition().ops) if not name.startswith("_")}
    covered = {name.split("(")[0] for name in CALLS}
    assert public - covered == set(), "add a call to CALLS for each new operation"


@pytest.mark.parametrize("name, foreign", cases())
def test_an_operand_of_another_fusion_is_refused(name, foreign):
    fd = FusionDefinition()
    op = name.split("(")[0]
    with pytest.raises(
        ValueError,
        match=rf"^{op}: (operand \d+|input|weight|bias|extent) .* belongs to another "
        "FusionDefinition",
    ):
        CALLS[name](fd.ops, Operands(fd, foreign))


def test_add_output_refuses_a_tensor_of_another_fusion():
    fd, other = FusionDefinition(), FusionDefinition()
    x = other.define_tensor([2], dtype=DataType.Float)
    with pytest.raises(ValueError, match=r"add_output: T0.* belongs to another fusion"):
        fd.add_output(x)
    assert fd.fusion.outputs() == []


def test_a_scalar_of_another_fusion_is_refused_as_an_extent():
    fd, other = FusionDefinition(), FusionDefinition()
    x = fd.define_tensor([-1, 4])
    n = other.define_tensor([-1]).shape()[0]
    with pytest.raises(ValueError, match=r"reshape: extent .* belongs to another FusionDefinition"):
        fd.ops.reshape(x, [n, 2])
