# SPDX-License-Identifier: MIT
"""Devices, meshes and shards: mdfuser.multidevice."""

from __future__ import annotations

import atexit

import torch

from mdfuser import _C
from mdfuser._C import Communicator, DeviceMesh, TensorView

__all__ = ["Communicator", "DeviceMesh", "shard_tensor"]


def shard_tensor(tensor: torch.Tensor, tv: TensorView) -> torch.Tensor:
    """This process's shard of the global ``tensor``, sharded like ``tv``.

    Device-parallel axes of ``tv`` decide the shard; stream-parallel axes
    do not (every process holds all chunks).
    """
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"shard_tensor: expected a torch.Tensor, got {type(tensor).__name__}")
    if tensor.dim() != tv.ndim:
        raise ValueError(
            f"shard_tensor: the tensor has {tensor.dim()} dimensions but {tv!r} has {tv.ndim}"
        )
    mesh = tv.device_mesh
    if mesh is None:
        return tensor
    rank = Communicator.instance().rank()
    shard = tensor
    for axis, parallel_type in tv._sharded_axes():
        team = mesh.team(rank, parallel_type)
        index = team.index(rank)
        parts = len(team)
        size = tensor.size(axis)
        if size % parts != 0:
            raise ValueError(
                f"shard_tensor: axis {axis} has size {size}, which does not split "
                f"evenly across the {parts} devices of {parallel_type.name}"
            )
        shard = shard.narrow(axis, index * (size // parts), size // parts)
    return shard


atexit.register(_C._shutdown_communicator)
