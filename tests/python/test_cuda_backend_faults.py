# SPDX-License-Identifier: MIT
"""Faults of the CUDA communication backend, in child jobs of two
processes on one GPU (MDFUSER_SHARE_DEVICES=1) or two GPUs: a peer that
stops taking part must end the waiting rank within MDFUSER_TIMEOUT_S with a
message naming the rank, the peer and the operation, never hang it."""

from __future__ import annotations

import os
import time

import pytest
import torch
from helpers import run_world

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="the CUDA backend runs on GPUs"
)

TESTS = os.path.dirname(__file__)

# Both ranks run the row-parallel linear's rings once (and agree on the
# program); then rank 1 stops while rank 0 runs them again and waits.
ABSENT_PEER = f"""
import sys, time, torch
sys.path.insert(0, {TESTS!r})
from helpers import row_parallel_linear
from mdfuser import CommunicatorBackend
from mdfuser.multidevice import Communicator, shard_tensor
comm = Communicator.instance()
device = torch.device("cuda", comm.local_rank() % torch.cuda.device_count())
torch.cuda.set_device(device)
fd = row_parallel_linear(2, 1, 4)
full = [torch.ones(8, 16, dtype=torch.bfloat16), torch.ones(4, 16, dtype=torch.bfloat16)]
args = [shard_tensor(t, tv).to(device) for t, tv in zip(full, fd.fusion.inputs())]
fd.execute(args, backend=CommunicatorBackend.cuda)
torch.cuda.synchronize()
print("first run done", flush=True)
if comm.rank() == 1:
    time.sleep(20)
    sys.exit(0)
fd.execute(args, backend=CommunicatorBackend.cuda)
torch.cuda.synchronize()
print("the second run finished without rank 1", flush=True)
"""


def test_an_absent_peer_ends_the_waiting_rank_with_a_message():
    env = {"MDFUSER_TIMEOUT_S": "3"}
    if torch.cuda.device_count() < 2:
        env["MDFUSER_SHARE_DEVICES"] = "1"
    start = time.monotonic()
    waiting, absent = run_world(ABSENT_PEER, 2, env, timeout=90)
    assert time.monotonic() - start < 80, "bounded by the timeout, not by a hang"
    assert "first run done" in waiting.stdout, waiting.stderr
    assert absent.returncode == 0, absent.stderr
    assert "finished without rank 1" not in waiting.stdout
    assert waiting.returncode not in (0, None), waiting.stderr
    message = waiting.stderr
    assert "[mdfuser] rank 0 in CollectivePermute (Communication " in message, message
    assert "with team (0 1) on the CUDA backend: waited for rank 1" in message, message
    assert "(more than 3 s)" in message, message
