# SPDX-License-Identifier: MIT
"""Faults of multi-process jobs on GPUs that a machine of one GPU can show:
ranks that disagree about where their inputs live. Child jobs of two
processes, bounded in time; skipped without a GPU."""

from __future__ import annotations

import os
import time

import pytest
import torch
from helpers import run_world

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")

TESTS = os.path.dirname(__file__)

# Rank 0 passes CUDA shards, rank 1 CPU shards of the same shapes and dtype.
CUDA_AND_CPU = f"""
import sys, torch
sys.path.insert(0, {TESTS!r})
from helpers import row_parallel_linear
from mdfuser.multidevice import Communicator, shard_tensor
comm = Communicator.instance()
fd = row_parallel_linear(2, 1, 4)
full = [torch.ones(8, 16, dtype=torch.bfloat16), torch.ones(4, 16, dtype=torch.bfloat16)]
device = "cuda:0" if comm.rank() == 0 else "cpu"
args = [shard_tensor(t, tv).to(device) for t, tv in zip(full, fd.fusion.inputs())]
try:
    fd.execute(args)
except ValueError as e:
    print("ValueError:", e, flush=True)
    sys.exit(3)
print("ran", flush=True)
"""


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
