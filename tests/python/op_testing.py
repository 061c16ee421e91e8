# SPDX-License-Identifier: MIT
"""Helpers of the operation tests: run a definition on torch tensors and
compare with plain torch."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from mdfuser import FusionDefinition
from mdfuser.pytorch_utils import nvfuser_dtype_to_torch_dtype


def define_like(fd: FusionDefinition, t: torch.Tensor, static_sizes: bool = False):
    """An input of `fd` shaped like `t`: symbolic extents unless
    `static_sizes`, an extent 1 as a broadcast axis."""
    return fd.from_pytorch(t, static_sizes=static_sizes)


def run(
    body: Callable,
    *inputs: torch.Tensor,
    static_sizes: bool = False,
) -> list[torch.Tensor]:
    """Defines one input per tensor of `inputs`, the outputs that
    `body(fd, *tvs)` returns (one tensor or a sequence), and runs the fusion
    on `inputs`. Checks that each result has the dtype its TensorView
    declares."""
    with FusionDefinition() as fd:
        tvs = [define_like(fd, t, static_sizes) for t in inputs]
        outs = body(fd, *tvs)
        outs = list(outs) if isinstance(outs, Sequence) else [outs]
        for out in outs:
            fd.add_output(out)
    results = fd.execute(list(inputs))
    assert len(results) == len(outs)
    for tv, result in zip(outs, results):
        assert result.dtype == nvfuser_dtype_to_torch_dtype(tv.dtype()), (tv, result.dtype)
    return results


def run1(body: Callable, *inputs: torch.Tensor, static_sizes: bool = False) -> torch.Tensor:
    """`run` for a body with one output."""
    (result,) = run(body, *inputs, static_sizes=static_sizes)
    return result


def assert_same(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Equal dtype and shape; exactly equal values for integer and bool
    results, torch's default tolerances of the dtype otherwise (NaN where
    torch has NaN)."""
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if expected.dtype.is_floating_point:
        torch.testing.assert_close(actual, expected, equal_nan=True)
    else:
        assert torch.equal(actual, expected), (actual, expected)


def sample(shape: Sequence[int], dtype: torch.dtype, seed: int = 0, positive: bool = False):
    """Deterministic test data: floats in [-2, 2) (or [0.25, 2.25) when
    `positive`) on a grid of 1/4, so that comparisons see ties; integers in
    [-3, 3] (or [1, 3]); random bools."""
    generator = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, tuple(shape), generator=generator).bool()
    low, high = (1, 4) if positive else (-3, 4)
    if not dtype.is_floating_point:
        return torch.randint(low, high, tuple(shape), generator=generator).to(dtype)
    quarters = torch.randint(
        1 if positive else -8, 9 if positive else 8, tuple(shape), generator=generator
    )
    return (quarters.double() / 4).to(dtype)


# nvFuser's type promotion (doc/ops.md), by operation family.
WIDENING = {"neg", "add", "sub", "mul", "pow", "maximum", "minimum"}
FLOAT_FUNCTIONS = {
    "exp",
    "log",
    "log1p",
    "tanh",
    "sigmoid",
    "erf",
    "sqrt",
    "rsqrt",
    "reciprocal",
    "sin",
    "cos",
    "gelu",
    "gelu_tanh",
    "div",
}
KEEPING = {"abs", "relu", "silu", "where", "clamp"}
COMPARISONS = {"eq", "ne", "lt", "le", "gt", "ge"}
_REDUCED = (torch.float16, torch.bfloat16)


def _category(dtype: torch.dtype) -> int:
    return 0 if dtype == torch.bool else (2 if dtype.is_floating_point else 1)


def _promote_all(dtypes):
    result = None
    for d in dtypes:
        result = d if result is None else torch.promote_types(result, d)
    return result


def _combine(higher, lower):
    if higher is None:
        return lower
    if lower is None or _category(lower) <= _category(higher):
        return higher
    return torch.promote_types(higher, lower)


def common_dtype(*args) -> torch.dtype:
    """The operands' common dtype in torch's three tiers (tensors with
    dimensions, 0-dimensional tensors, numbers), but with a Python float
    counting as a Double scalar (nvFuser's rule; torch counts it as its
    default dtype, Float)."""

    def number_dtype(x):
        if isinstance(x, bool):
            return torch.bool
        return torch.float64 if isinstance(x, float) else torch.int64

    tensors = [a.dtype for a in args if isinstance(a, torch.Tensor) and a.dim() > 0]
    zero_dim = [a.dtype for a in args if isinstance(a, torch.Tensor) and a.dim() == 0]
    numbers = [number_dtype(a) for a in args if not isinstance(a, torch.Tensor)]
    return _combine(_promote_all(tensors), _combine(_promote_all(zero_dim), _promote_all(numbers)))


def result_dtype(name: str, *args) -> torch.dtype:
    """The dtype of operation `name` on `args` under nvFuser's rule."""
    if name in COMPARISONS:
        return torch.bool
    common = common_dtype(*args)
    if name in WIDENING and common in _REDUCED:
        return torch.float32
    if name in FLOAT_FUNCTIONS and (common in _REDUCED or not common.is_floating_point):
        return torch.float32
    return common


def reference(name: str, f: Callable, *args):
    """torch's `f` computed as nvFuser computes operation `name`: tensor
    operands converted to the computation dtype (Half and BFloat16 to Float
    for arithmetic), Python numbers as they are."""
    dtype = result_dtype(name, *args)
    compute = common_dtype(*args) if name in COMPARISONS else dtype
    converted = [a.to(compute) if isinstance(a, torch.Tensor) else a for a in args]
    return f(*converted).to(dtype)
