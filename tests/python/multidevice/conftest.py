# SPDX-License-Identifier: MIT
"""Fixtures for tests run by every process of a job.

Run this folder with ``mpirun -np N pytest tests/python/multidevice`` (or
torchrun); with one process, or plain pytest, the same tests run on a world
of one device. Tests that need more devices skip.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import pytest
import torch

from mdfuser.multidevice import Communicator, shard_tensor

# How many times torch's own rounding error a block may make: its partial
# sums are rounded to the block's dtype before they are summed across
# devices, and its stream chunks round per chunk.
FUDGE = 4


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

    # The reference system's fixture calls it shard_tensor(tensor, tv).
    shard_tensor = shard

    @property
    def dtype(self) -> torch.dtype:
        """The dtype the block tests run in: float32 on the CPU, bfloat16 on
        GPUs."""
        return torch.bfloat16 if self.device.type == "cuda" else torch.float32

    @property
    def nccl_usable(self) -> bool:
        """Whether NCCL can carry this job's collectives: CUDA tensors, and
        no GPU shared by two processes (MDFUSER_SHARE_DEVICES=1 with more
        processes than GPUs), which NCCL refuses."""
        return self.device.type == "cuda" and self.comm.local_size() <= torch.cuda.device_count()

    def require_nccl(self) -> None:
        if self.device.type == "cuda" and not self.nccl_usable:
            pytest.skip(
                f"needs NCCL, which refuses two processes on one GPU "
                f"({self.comm.local_size()} processes share {torch.cuda.device_count()} GPUs)"
            )

    @property
    def collective_backend(self):
        """The backend that keeps collectives collectives: None (the
        default, Gloo) on the CPU, NCCL on GPUs. The tests of the collective
        lowering pin it, so that they check that lowering whichever backend
        execute defaults to (the CUDA backend turns what a ring can carry
        into rings). Skips where NCCL cannot run (GPUs shared by
        processes)."""
        from mdfuser import CommunicatorBackend

        if self.device.type != "cuda":
            return None
        self.require_nccl()
        return CommunicatorBackend.nccl

    @property
    def mdfuser_dtype(self):
        from mdfuser import DataType

        return DataType.BFloat16 if self.device.type == "cuda" else DataType.Float

    def references(self, fn, tensors: dict[str, torch.Tensor], dtype: torch.dtype | None = None):
        """Runs `fn(**tensors)`, plain torch, on this rank's device twice:
        in float64 from the tensors rounded to `dtype` (the block's dtype
        unless given; the reference) and in that dtype (what torch itself
        gets, which sets the tolerance; see `tolerance`). Returns
        (reference, torch's result)."""
        low = {k: v.to(self.device, dtype or self.dtype) for k, v in tensors.items()}
        return fn(**{k: v.double() for k, v in low.items()}), fn(**low)

    def tolerance(self, expected: torch.Tensor, torch_result: torch.Tensor) -> dict[str, float]:
        """Tolerances against `expected`, a float64 reference from
        `references`, derived the way torch's attention tests derive theirs:
        the block may stray from the reference by FUDGE times as much as
        torch's own result in the block's dtype (`torch_result`) does at
        worst, and never less than torch's default absolute tolerance for the
        dtype, plus that dtype's default relative tolerance (the dtype of
        `torch_result`)."""
        defaults = {torch.float32: (1e-5, 1.3e-6), torch.bfloat16: (1e-5, 1.6e-2)}
        atol, rtol = defaults[torch_result.dtype]
        deviation = (torch_result.double() - expected).abs().max().item()
        return dict(rtol=rtol, atol=max(atol, FUDGE * deviation))

    def assert_close(
        self,
        actual: torch.Tensor,
        expected: torch.Tensor,
        tolerance: dict[str, float],
        msg: str = "",
    ) -> None:
        """Compares a block's output with its reference, in the reference's
        dtype, with the tolerances of `tolerance`."""
        torch.testing.assert_close(
            actual.cpu().to(expected.dtype),
            expected.cpu(),
            **tolerance,
            msg=lambda m: f"{msg}: {m}",
        )

    def require(self, devices: int) -> None:
        if self.size < devices:
            pytest.skip(f"needs {devices} processes, the world has {self.size}")


def _device_for(local_rank: int, local_size: int) -> torch.device:
    if not torch.cuda.is_available():
        return torch.device("cpu")
    if os.environ.get("MDFUSER_SHARE_DEVICES") == "1":
        # Several processes per GPU (the CUDA backend's tests on one GPU).
        return torch.device("cuda", local_rank % torch.cuda.device_count())
    if torch.cuda.device_count() >= local_size:
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


# Raised on every rank, before any communication, by a program that needs
# NCCL where processes share GPUs (runtime/executor_cache.cpp).
NCCL_ON_SHARED_GPUS = "runs on NCCL, which refuses two processes on one GPU"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    """Every test starts with the ranks together in one communication
    epoch (Communicator.recover): whatever failed in an earlier test, on
    whichever rank, its communication left in flight meets nothing of this
    one's. Before the fixtures and skip marks, so that every rank gets here
    for every test."""
    comm = Communicator.instance()
    if comm.size() > 1:
        comm.recover()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """With GPUs shared by processes (MDFUSER_SHARE_DEVICES=1), a test whose
    program needs NCCL is skipped, naming the communication, rather than
    failed: only the CUDA backend's rings can run there.

    A test that fails on this rank alone may leave the other ranks waiting
    for it in the test's communication: the failure is reported
    (Communicator.report_failure), which ends their waits within a second
    or two, naming this rank and the test. A failure that came of another
    rank's (this rank's communication is stopped already) is that rank's to
    report."""
    outcome = yield
    report = outcome.get_result()
    if call.when != "call" or call.excinfo is None:
        return
    if NCCL_ON_SHARED_GPUS in str(call.excinfo.value):
        # This rank's refusal, or a peer's that ended this rank's wait for
        # it (ranks running other programs, e.g. other teams of a 2-D
        # mesh): reported, so that peers still waiting stop within seconds.
        comm = Communicator.instance()
        if call.excinfo.errisinstance(ValueError) and comm.size() > 1 and not comm.stopped():
            comm.report_failure(f"test {item.nodeid} needs NCCL: {call.excinfo.exconly()[:300]}")
        report.outcome = "skipped"
        path, line, _ = item.location
        report.longrepr = (path, line or 0, f"Skipped: needs NCCL: {call.excinfo.value}")
        return
    if call.excinfo.errisinstance(pytest.skip.Exception):
        return
    comm = Communicator.instance()
    if comm.size() > 1 and not comm.stopped():
        error = call.excinfo.exconly().splitlines()[0][:300]
        comm.report_failure(f"test {item.nodeid} failed: {error}")


def pytest_runtest_logreport(report):
    """A failure is printed on this rank's stderr as soon as its test ends,
    not only in pytest's summary at the end of the session: a job that a
    launcher or a time limit stops later still shows which test failed on
    which rank, and why."""
    if not report.failed:
        return
    rank = Communicator.instance().rank()
    text = report.longreprtext
    lines = text.splitlines()
    if len(lines) > 50:
        text = "\n".join(["...", *lines[-50:]])
    sys.stderr.write(f"\n[rank {rank}] FAILED {report.nodeid} ({report.when}):\n{text}\n")
    sys.stderr.flush()


@pytest.fixture(scope="session")
def multidevice_test() -> MultideviceTest:
    comm = Communicator.instance()
    device = _device_for(comm.local_rank(), comm.local_size())
    if device.type == "cuda":
        torch.cuda.set_device(device)
    return MultideviceTest(comm, comm.rank(), comm.size(), comm.local_rank(), device)


@dataclass
class DTensorTest:
    """torch.distributed started on mdfuser's processes, and meshes of them."""

    test: MultideviceTest
    _meshes: dict

    def mesh(self, shape: tuple[int, ...]):
        """A torch DeviceMesh of `shape` over ranks 0.. in order, made once
        (each costs process groups)."""
        from torch.distributed.device_mesh import init_device_mesh

        if shape not in self._meshes:
            self._meshes[shape] = init_device_mesh(self.test.device.type, shape)
        return self._meshes[shape]


@pytest.fixture
def dtensor_test(dtensor_world) -> DTensorTest:
    # DTensors of CUDA tensors redistribute through torch.distributed's NCCL.
    dtensor_world.test.require_nccl()
    return dtensor_world


@pytest.fixture(scope="session")
def dtensor_world(multidevice_test) -> DTensorTest:
    from mdfuser.dtensor import init_process_group

    init_process_group()
    return DTensorTest(multidevice_test, {})
