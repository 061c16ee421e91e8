# SPDX-License-Identifier: MIT
"""Faults of multi-process jobs on GPUs: ranks that disagree about where
their inputs live, and, on a machine of two GPUs or more, an input on
another rank's GPU and an NCCL collective that one rank never reaches.
Child jobs of two processes, bounded in time; skipped without the GPUs."""

from __future__ import annotations

import time

import pytest
import torch
from helpers import row_parallel_job, run_absent_peer_job, run_failing_rank_job, run_world

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
two_gpus = pytest.mark.skipif(
    torch.cuda.device_count() < 2, reason="needs two GPUs (NCCL cannot share one)"
)

# Runs the fusion once; a ValueError ends the process with status 3.
RAISES_VALUE_ERROR = """
try:
    fd.execute(args)
except ValueError as e:
    print("ValueError:", e, flush=True)
    sys.exit(3)
print("ran", flush=True)
"""

# Rank 0 passes CUDA shards, rank 1 CPU shards of the same shapes and dtype.
CUDA_AND_CPU = row_parallel_job('"cuda:0" if comm.rank() == 0 else "cpu"', RAISES_VALUE_ERROR)


def test_a_cuda_rank_and_a_cpu_rank_raise_the_same_value_error():
    """Neither rank posts a collective: the agreement check names the
    device types on both ranks, on both ranks, within the timeout."""
    start = time.monotonic()
    results = run_world(CUDA_AND_CPU, 2, {"MDFUSER_TIMEOUT_S": "20"}, timeout=90)
    assert time.monotonic() - start < 80, "bounded, not a hang"
    messages = []
    for rank, result in enumerate(results):
        assert result.returncode == 3, (rank, result.stdout, result.stderr)
        messages.append(result.stdout)
    expected = (
        "input 0 (T0) is on a device of type cuda on rank 0 and cpu on rank 1; every "
        "rank of the fusion's mesh must pass shards of the same shapes, dtypes and "
        "device types"
    )
    for message in messages:
        assert expected in message, messages


# Rank 1 passes its shards on GPU 0, rank 0's GPU, instead of its own.
ANOTHER_RANKS_GPU = row_parallel_job('"cuda:0"', RAISES_VALUE_ERROR)


@two_gpus
def test_an_input_on_another_ranks_gpu_raises_on_every_rank():
    """Rank 1 refuses its inputs before any collective (NCCL would pair two
    ranks on one GPU and fail or hang); the agreement check gives rank 0 the
    same error."""
    start = time.monotonic()
    results = run_world(ANOTHER_RANKS_GPU, 2, {"MDFUSER_TIMEOUT_S": "20"}, timeout=90)
    assert time.monotonic() - start < 80, "bounded, not a hang"
    expected = (
        "the inputs of rank 1 are on cuda:0, but local rank 1 uses cuda:1 "
        "(one device per process, numbered by local rank)"
    )
    for rank, result in enumerate(results):
        assert result.returncode == 3, (rank, result.stdout, result.stderr)
        assert expected in result.stdout, (rank, result.stdout)
    assert "ValueError: rank 1: " in results[0].stdout, results[0].stdout


@two_gpus
def test_an_nccl_collective_a_rank_never_reaches_ends_the_waiting_rank_with_a_message():
    # Rank 1 stops after the first run of the row-parallel linear's NCCL
    # allreduce while rank 0 runs it again.
    message = run_absent_peer_job("comm.local_rank()", "nccl", {"MDFUSER_TIMEOUT_S": "3"})
    assert "[mdfuser] rank 0 in Allreduce (Communication " in message, message
    assert "with team (0 1) on NCCL: not finished" in message, message
    assert "(more than 3 s)" in message, message


# Seen on two H100s (2026-11-26) and two H200s (2026-11-27): the job does
# not end within its bound; rank 0's watchdog said nothing while its NCCL
# allreduce waited (doc/runtime.md, "Failures"). The same silence with a
# replayed graph was the supervisor destroying a finished entry's CUDA
# event behind the host's `.cpu()` (fixed 2026-11-29); NCCL's work owns
# events too, and since the fix this test passed once on two H200s
# (2026-11-29): kept expected to fail until it passes repeatedly.
@pytest.mark.xfail(reason="recovery after a released GPU wait does not finish yet", strict=False)
@two_gpus
@pytest.mark.timeout(150)
def test_a_failure_on_one_rank_aborts_the_others_nccl_work_and_all_go_on():
    """Two ranks on NCCL: rank 1 reports a failure while rank 0's stream
    waits for it in NCCL's allreduce. Rank 0's watchdog learns it from the
    store and aborts that epoch's communicator, ending the kernel; rank 0's
    next run says that the released run's output is wrong; then both
    recover and run again on new communicators, with exact results."""
    device = '"cuda", comm.local_rank()'
    lines = run_failing_rank_job(2, device, (), {}, backend="nccl")
    assert lines[1] == ["ok 0", "ok 1"], lines[1]
    assert lines[0][0] == "ok 0" and lines[0][-1] == "ok 1", lines[0]
    assert lines[0][1].startswith("stopped after "), lines[0]
    assert (
        "the communication of rank 0 is stopped by failures: rank 1 failed: "
        "AssertionError: rank 1's check failed" in lines[0][1]
    ), lines[0]


def test_the_communicator_makes_each_ranks_gpu_current():
    """Scripts written for nvfuser_direct create tensors with .cuda() after
    asking for the communicator: that must be the GPU input binding expects
    of the rank (its local rank's, modulo the GPUs when they are shared)."""
    gpus = torch.cuda.device_count()
    env = {"MDFUSER_SHARE_DEVICES": "1"} if gpus < 2 else {}
    code = """
import torch
from mdfuser.multidevice import Communicator
comm = Communicator.instance()
print(torch.cuda.current_device(), torch.ones(1).cuda().device, flush=True)
"""
    results = run_world(code, 2, env, timeout=60)
    for rank, result in enumerate(results):
        assert result.returncode == 0, result.stderr[-2000:]
        gpu = rank % gpus
        assert result.stdout.split() == [str(gpu), f"cuda:{gpu}"], result.stdout
