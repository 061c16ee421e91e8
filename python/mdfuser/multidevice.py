# SPDX-License-Identifier: MIT
"""Devices, meshes and shards: mdfuser.multidevice."""

from __future__ import annotations

import atexit
import sys
from dataclasses import dataclass

import torch

from mdfuser import _C
from mdfuser._C import Communicator, CommunicatorBackend, DeviceMesh, TensorView
from mdfuser.executor_cache import propagated_output
from mdfuser.fusion_definition import _split_arguments
from mdfuser.sharding import Sharding

__all__ = [
    "Communicator",
    "CommunicatorBackend",
    "DeviceMesh",
    "MultiDeviceExecutor",
    "MultiDeviceExecutorParams",
    "Sharding",
    "shard_tensor",
]


def shard_tensor(tensor: torch.Tensor, tv: TensorView) -> torch.Tensor:
    """This process's part of the global ``tensor``, laid out like ``tv``.

    Device-parallel axes of ``tv`` decide the part (with a stream split
    above a device split, one run per stream chunk); stream splits alone do
    not (every process holds all chunks). A process outside ``tv``'s mesh
    gets a placeholder of the right shape. An output the user left without
    a mesh, once its fusion ran, is laid out as the last run returned it
    (the sharding mdfuser propagated to it, as nvfuser_direct's
    shard_tensor reads it); before, and for any other tensor without a
    mesh, the part is the whole tensor.
    """
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"shard_tensor: expected a torch.Tensor, got {type(tensor).__name__}")
    if not isinstance(tv, TensorView):
        raise TypeError(f"shard_tensor: expected a TensorView, got {type(tv).__name__}")
    if tensor.dim() != tv.ndim:
        raise ValueError(
            f"shard_tensor: the tensor has {tensor.dim()} dimensions but {tv!r} has {tv.ndim}"
        )
    if tv.device_mesh is None:
        propagated = propagated_output(tv)
        if propagated is None or propagated.device_mesh is None:
            return tensor
        tv = propagated
    return _C._shard_tensor(tensor, tv, Communicator.instance().rank())


@dataclass
class MultiDeviceExecutorParams:
    """Options of a MultiDeviceExecutor, named after nvFuser's.
    ``use_allocation_cache`` and ``offset_stream_indexing_by_rank`` are
    accepted and have no effect in mdfuser."""

    backend_type: CommunicatorBackend | None = None
    use_allocation_cache: bool = False
    offset_stream_indexing_by_rank: bool = False


class MultiDeviceExecutor:
    """Runs a fusion (``fd.fusion``) with explicit options:
    ``MultiDeviceExecutor(fd.fusion, params).run(inputs)``."""

    def __init__(self, fusion: _C.Fusion, params: MultiDeviceExecutorParams | None = None):
        if not isinstance(fusion, _C.Fusion):
            raise TypeError(
                f"MultiDeviceExecutor: expected an mdfuser Fusion (fd.fusion), got "
                f"{type(fusion).__name__}"
            )
        self._params = params or MultiDeviceExecutorParams()
        self._cache = _C._FusionExecutorCache(fusion)

    def run(self, inputs: list) -> list[torch.Tensor]:
        """``inputs`` as for ``FusionDefinition.execute``: the local shards,
        and the values of scalar inputs in their places."""
        tensors, scalars = _split_arguments(inputs)
        return self._cache.execute(tensors, scalars, [], [], self._params.backend_type)

    def __str__(self) -> str:
        return self._cache.last_host_ir() or "<not run yet>"


def _excepthook(exc_type, exc, tb, _previous=sys.excepthook) -> None:
    """An error the program did not catch ends this process: its peers may
    wait for it in a collective, so the exit must not wait for them (the
    launcher then ends the job at once), and their errors quote this one."""
    try:
        _C._note_exit_on_error(f"{exc_type.__name__}: {exc}")
    finally:
        _previous(exc_type, exc, tb)


sys.excepthook = _excepthook
atexit.register(_C._shutdown_communicator)
