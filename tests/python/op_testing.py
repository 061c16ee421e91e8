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
