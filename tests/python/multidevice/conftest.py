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

    @property
    def dtype(self) -> torch.dtype:
        """The dtype the block tests run in: float32 on the CPU, bfloat16 on
        GPUs."""
        return torch.bfloat16 if self.device.type == "cuda" else torch.float32

    @property
    def mdfuser_dtype(self):
        from mdfuser import DataType

        return DataType.BFloat16 if self.device.type == "cuda" else DataType.Float

    def assert_close(self, actual: torch.Tensor, expected: torch.Tensor, msg: str = "") -> None:
        """torch's tolerances for the dtype; bfloat16 with an absolute
        tolerance of 1e-2 as torch's own matmul tests use, since partial sums
        are rounded before they are summed across devices."""
        kwargs = dict(rtol=1.6e-2, atol=1e-2) if actual.dtype == torch.bfloat16 else {}
        torch.testing.assert_close(
            actual.cpu(), expected.cpu(), **kwargs, msg=lambda m: f"{msg}: {m}"
        )

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
