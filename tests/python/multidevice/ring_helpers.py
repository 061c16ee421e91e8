# SPDX-License-Identifier: MIT
"""The fusions and inputs of the ring decompositions' tests: the matmul
collective pairs that lower into rings (examples/ring_decomposition.py),
and global inputs whose sums are exact in bf16."""

from __future__ import annotations

import torch
from ring_decomposition import (  # noqa: F401 (re-exported to the tests)
    allgather_linear,
    linear_reduce_scatter,
    split_across,
)


def integers(shape, generator) -> torch.Tensor:
    return torch.randint(-1, 2, shape, generator=generator).to(torch.bfloat16)


def global_inputs(t: int, k: int, n: int, seed: int) -> dict[str, torch.Tensor]:
    assert k <= 256, "sums of k products in {-1, 0, 1} stay exact in bf16"
    g = torch.Generator().manual_seed(seed)
    return dict(x=integers((t, k), g), w=integers((n, k), g), b=integers((n,), g))


def torch_linear(full: dict[str, torch.Tensor], bias: bool) -> torch.Tensor:
    b = full["b"].double() if bias else None
    return torch.nn.functional.linear(full["x"].double(), full["w"].double(), b).to(torch.bfloat16)
