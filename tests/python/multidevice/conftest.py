# SPDX-License-Identifier: MIT
"""Fixtures for tests run by every process of a job.

Run this folder with ``mpirun -np N pytest tests/python/multidevice`` (or
torchrun); with one process, or plain pytest, the same tests run on a world
of one device. Tests that need more devices skip.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from mdfuser.multidevice import Communicator, shard_tensor


@dataclass
class MultideviceTest:
    comm: Communicator
    rank: int
    size: int
    local_rank: int
    device: torch.device

    def shard(self, tensor: torch.Tensor, tv) -> torch.Tensor:
        """This rank's shard of a global tensor, on this rank's device."""
        return shard_tensor(tensor, tv).to(self.device)

    def require(self, devices: int) -> None:
        if self.size < devices:
            pytest.skip(f"needs {devices} processes, the world has {self.size}")


def _device_for(local_rank: int, local_size: int) -> torch.device:
    if torch.cuda.is_available() and torch.cuda.device_count() >= local_size:
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


@pytest.fixture(scope="session")
def multidevice_test() -> MultideviceTest:
    comm = Communicator.instance()
    device = _device_for(comm.local_rank(), comm.local_size())
    if device.type == "cuda":
        torch.cuda.set_device(device)
    return MultideviceTest(comm, comm.rank(), comm.size(), comm.local_rank(), device)
