# SPDX-License-Identifier: MIT
"""grouped_mm in plain torch, the reference of the grouped_mm tests:
torch._grouped_mm where the device has it for the operands (CUDA sm90,
BFloat16, mat1 [M, K] with mat2 [G, K, N], rows 16-byte aligned and every
row in a group), a loop of matmuls over the groups the offsets cut
otherwise. Differentiable, so that the tests can take torch's gradients
through it."""

from __future__ import annotations

import torch


def group_ranges(offsets: torch.Tensor) -> list[tuple[int, int]]:
    """(start, end) of each group from the cumulative ends."""
    ends = [int(e) for e in offsets.tolist()]
    return list(zip([0] + ends[:-1], ends))


def offsets_of(sizes: list[int]) -> torch.Tensor:
    """The Int32 cumulative ends of groups of these sizes."""
    return torch.cumsum(torch.tensor(sizes), 0, dtype=torch.int32)


def _torch_grouped_mm_applies(a: torch.Tensor, b: torch.Tensor, offsets: torch.Tensor) -> bool:
    return (
        a.is_cuda
        and a.dtype == torch.bfloat16
        and a.dim() == 2
        and b.dim() == 3
        and torch.cuda.get_device_capability(a.device) >= (9, 0)
        and int(offsets[-1]) == a.shape[0]
        # Its TMA loads need every row of a and b to start 16-byte aligned.
        and all(s * t.element_size() % 16 == 0 for t in (a, b) for s in t.stride()[:-1])
    )


def grouped_mm(a: torch.Tensor, b: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """a [M, K] @ b [G, K, N] -> [M, N] (rows by group), a [G, M, K] @
    b [K, N] -> [M, N] (columns by group), a [M, K] @ b [K, N] -> [G, M, N]
    (K by group); what no group covers is zero."""
    if _torch_grouped_mm_applies(a, b, offsets):
        return torch._grouped_mm(a, b, offs=offsets.to(a.device))
    ranges = group_ranges(offsets)
    if a.dim() == 2 and b.dim() == 3:
        parts, covered = [], 0
        for e, (start, end) in enumerate(ranges):
            parts.append(a[start:end] @ b[e])
            covered = end
        parts.append(a.new_zeros(a.shape[0] - covered, b.shape[2]))
        return torch.cat(parts, 0)
    if a.dim() == 3 and b.dim() == 2:
        parts, covered = [], 0
        for e, (start, end) in enumerate(ranges):
            parts.append(a[e] @ b[:, start:end])
            covered = end
        parts.append(a.new_zeros(a.shape[1], b.shape[1] - covered))
        return torch.cat(parts, 1)
    assert a.dim() == 2 and b.dim() == 2, (a.shape, b.shape)
    return torch.stack([a[:, start:end] @ b[start:end] for start, end in ranges])
