# SPDX-License-Identifier: MIT
"""The dropout mask of ``sdpfa_fwd`` on the CPU, for checking attention with
dropout against plain torch."""

from __future__ import annotations

import torch

from mdfuser import _C


def dropout_mask(
    philox_seed: torch.Tensor, shape: tuple[int, int, int, int], dropout_p: float
) -> torch.Tensor:
    """Which attention weights ``sdpfa_fwd`` keeps on the CPU: a bool tensor
    of ``shape`` = (batch, heads, seq_q, seq_k), the global attention's, for
    the ``philox_seed`` it returned (UInt64, 2 elements). A device holding
    some of the heads keeps its part of this mask. The kept weights are
    scaled by 1 / (1 - dropout_p). On CUDA the mask is flash attention's and
    this function does not reproduce it."""
    return _C._sdpa_dropout_keep(philox_seed, list(shape), float(dropout_p))
