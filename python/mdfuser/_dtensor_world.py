# SPDX-License-Identifier: MIT
"""The torch.distributed world that DTensors and mdfuser share: starting it on
mdfuser's processes and checking that both number the ranks alike."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from mdfuser.multidevice import Communicator


def init_process_group(backend: str | None = None, **kwargs: Any) -> None:
    """Initializes torch.distributed on mdfuser's processes, so that DTensors
    and mdfuser share one world with one rank numbering.

    Ranks and world size come from mdfuser's Communicator (Open MPI's or
    torchrun's variables), and torch.distributed joins mdfuser's rendezvous
    store, so that it needs no port of its own under mpirun. Does nothing
    when torch.distributed is already initialized. `backend` and `kwargs`
    go to ``torch.distributed.init_process_group`` (default: Gloo for CPU
    tensors and, where CUDA is available, NCCL for CUDA tensors).
    """
    if dist.is_initialized():
        _check_same_world()
        return
    comm = Communicator.instance()
    if comm.size() == 1:
        store = dist.HashStore()
    else:
        store = dist.PrefixStore("torch.distributed/", comm._store())
    if backend is None:
        backend = "cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(
        backend, store=store, rank=comm.rank(), world_size=comm.size(), **kwargs
    )


def _check_same_world() -> None:
    """torch.distributed and mdfuser must number the same processes alike."""
    if not dist.is_initialized():
        raise ValueError(
            "DTensors need torch.distributed: call mdfuser.dtensor.init_process_group() "
            "(or torch.distributed.init_process_group) before building them"
        )
    comm = Communicator.instance()
    if (dist.get_rank(), dist.get_world_size()) != (comm.rank(), comm.size()):
        raise ValueError(
            f"torch.distributed says rank {dist.get_rank()} of {dist.get_world_size()} but "
            f"mdfuser's launcher says rank {comm.rank()} of {comm.size()}: the two must number "
            "the same processes alike (start torch.distributed with "
            "mdfuser.dtensor.init_process_group())"
        )
