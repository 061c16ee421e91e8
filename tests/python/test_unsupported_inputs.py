# SPDX-License-Identifier: MIT
"""Inputs torch can hold but mdfuser cannot run are refused before anything
runs, with a TypeError naming the input and what to pass instead; inputs
that require grad run as plain tensors; and every operation refuses, while
the fusion is defined, a dtype it does not run."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from mdfuser import DataType, FusionDefinition


def doubling() -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor([2, 4], dtype=DataType.Float)
        fd.add_output(fd.ops.mul(x, 2.0))
    return fd


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: torch.empty(2, 4, device="meta"), r"input 0 \(T0\) is on the meta device"),
        (lambda: torch.ones(2, 4).to_sparse(), r"input 0 \(T0\) has layout Sparse; .*to_dense"),
        (
            lambda: torch.ones(2, 4).to_sparse_csr(),
            r"input 0 \(T0\) has layout SparseCsr; .*to_dense",
        ),
        (
            lambda: torch.nested.nested_tensor([torch.ones(2, 4)]),
            r"input 0 \(T0\) is a nested tensor",
        ),
    ],
    ids=["meta", "sparse-coo", "sparse-csr", "nested"],
)
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_inputs_mdfuser_cannot_run_are_refused(make, message):
    fd = doubling()
    with pytest.raises(TypeError, match=message):
        fd.execute([make()])
    # Nothing was compiled, and the fusion still runs.
    assert fd._cache.num_programs == 0
    x = torch.arange(8.0).reshape(2, 4)
    assert torch.equal(fd.execute([x])[0], x * 2)


def test_parameters_that_require_grad_are_read_as_plain_tensors():
    with FusionDefinition() as fd:
        x = fd.define_tensor([2, 4], dtype=DataType.Float)
        w = fd.define_tensor([3, 4], dtype=DataType.Float)
        fd.add_output(fd.ops.linear(x, w))
    x = torch.randn(2, 4, requires_grad=True)
    w = torch.nn.Parameter(torch.randn(3, 4))
    (out,) = fd.execute([x, w])
    assert not out.requires_grad and out.grad_fn is None
    torch.testing.assert_close(out, torch.nn.functional.linear(x, w).detach())
    assert w.grad is None and x.grad is None


DTENSOR_SCRIPT = textwrap.dedent(
    """
    import torch
    import torch.distributed as dist
    from torch.distributed.tensor import DeviceMesh, DTensor, Replicate

    from mdfuser import DataType, FusionDefinition

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    mesh = DeviceMesh("cpu", [0])
    x = DTensor.from_local(torch.ones(2, 4), mesh, [Replicate()])
    with FusionDefinition() as fd:
        t = fd.define_tensor([2, 4], dtype=DataType.Float)
        fd.add_output(fd.ops.mul(t, 2.0))
    try:
        fd.execute([x])
    except TypeError as e:
        print(e)
    else:
        print("accepted")
    dist.destroy_process_group()
    """
)


def test_a_dtensor_passed_to_execute_points_to_the_wrapper():
    # In a process of its own: a DTensor needs an initialized process group.
    root = Path(__file__).resolve().parents[2]
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(root / "python"), str(root / "tests/python")])
    )
    result = subprocess.run(
        [sys.executable, "-c", DTENSOR_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        "execute: input 0 is a DTensor, but execute takes this rank's local shards as plain "
        "tensors; pass DTensors to mdfuser.dtensor.FusionDefinitionWrapper, or pass "
        "t.to_local() here"
    )


# The dtype audit: for every operation named as a torch function, each
# dtype is either refused at definition with a TypeError naming the
# operation and the dtype, or runs and matches torch.
TORCH_DTYPES = {
    DataType.Bool: torch.bool,
    DataType.Int: torch.int64,
    DataType.Int32: torch.int32,
    DataType.Half: torch.float16,
    DataType.BFloat16: torch.bfloat16,
    DataType.Float: torch.float32,
    DataType.Double: torch.float64,
    DataType.UInt64: torch.uint64,
}
UNARY = [
    "abs", "cos", "erf", "exp", "log", "log1p", "neg", "reciprocal", "relu",
    "rsqrt", "sigmoid", "sin", "sqrt", "tanh",
]  # fmt: skip
BINARY = [
    "add",
    "div",
    "eq",
    "ge",
    "gt",
    "le",
    "lt",
    "maximum",
    "minimum",
    "mul",
    "ne",
    "pow",
    "sub",
]
F = torch.nn.functional
# name: (operand shapes, mdfuser call, torch call)
OPERATIONS = {
    **{
        n: ([[2, 4]], lambda ops, x, n=n: getattr(ops, n)(x), lambda x, n=n: getattr(torch, n)(x))
        for n in UNARY
    },
    **{
        n: (
            [[2, 4], [2, 4]],
            lambda ops, a, b, n=n: getattr(ops, n)(a, b),
            lambda a, b, n=n: getattr(torch, n)(a, b),
        )
        for n in BINARY
    },
    "silu": ([[2, 4]], lambda ops, x: ops.silu(x), F.silu),
    "gelu": ([[2, 4]], lambda ops, x: ops.gelu(x), F.gelu),
    "sum": ([[2, 4]], lambda ops, x: ops.sum(x, [1]), lambda x: torch.sum(x, 1)),
    "max": ([[2, 4]], lambda ops, x: ops.max(x, [1]), lambda x: torch.amax(x, 1)),
    "min": ([[2, 4]], lambda ops, x: ops.min(x, [1]), lambda x: torch.amin(x, 1)),
    "mean": ([[2, 4]], lambda ops, x: ops.mean(x, [1]), lambda x: torch.mean(x, 1)),
    "var": ([[2, 4]], lambda ops, x: ops.var(x, [1]), lambda x: torch.var(x, 1)),
    "softmax": ([[2, 4]], lambda ops, x: ops.softmax(x, 1), lambda x: torch.softmax(x, 1)),
    "clamp": ([[2, 4], [2, 4], [2, 4]], lambda ops, x, a, b: ops.clamp(x, a, b), torch.clamp),
    "linear": ([[2, 4], [3, 4]], lambda ops, x, w: ops.linear(x, w), F.linear),
    "matmul": ([[2, 4], [4, 3]], lambda ops, a, b: ops.matmul(a, b), torch.matmul),
}


def sample(shape, dtype: torch.dtype, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    values = torch.rand(shape, generator=generator) * 3 + 0.5  # positive, off zero
    return values > 1.5 if dtype == torch.bool else values.to(dtype)


def torch_result(call, args):
    try:
        return call(*args)
    except (RuntimeError, TypeError):
        return None


# The operations that compute Half and BFloat16 in Float and return Float
# (nvFuser's promotion, doc/ops.md): the arithmetic, the float functions and
# the compositions written with them.
WIDENING = {
    "neg", "add", "sub", "mul", "pow", "maximum", "minimum", "div", "exp", "log", "log1p",
    "tanh", "sigmoid", "erf", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "gelu", "mean",
    "var", "softmax",
}  # fmt: skip


@pytest.mark.parametrize("dtype", list(TORCH_DTYPES), ids=lambda d: d.name)
@pytest.mark.parametrize("name", list(OPERATIONS))
def test_every_dtype_is_refused_at_definition_or_runs_like_torch(name, dtype):
    shapes, define, reference = OPERATIONS[name]
    args = [sample(shape, TORCH_DTYPES[dtype], seed) for seed, shape in enumerate(shapes)]
    expected = torch_result(reference, args)
    fd = FusionDefinition()
    operands = [fd.define_tensor(shape, dtype=dtype) for shape in shapes]
    try:
        out = define(fd.ops, *operands)
    except TypeError as e:
        message = str(e)
        assert name in message and dtype.name in message, message
        return
    fd.add_output(out)
    assert expected is not None, f"{name} accepts {dtype.name}, which torch refuses"
    if name in WIDENING and dtype in (DataType.Half, DataType.BFloat16):
        expected = reference(*(a.float() for a in args))
    (actual,) = fd.execute(args)
    assert actual.dtype == expected.dtype
    if expected.dtype.is_floating_point:
        low = expected.dtype in (torch.float16, torch.bfloat16)
        torch.testing.assert_close(
            actual.double(),
            expected.double(),
            equal_nan=True,
            rtol=2e-2 if low else 1e-5,
            atol=1e-2 if low else 1e-5,
        )
    else:
        assert torch.equal(actual, expected)
