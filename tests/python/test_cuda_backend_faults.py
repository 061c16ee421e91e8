# SPDX-License-Identifier: MIT
"""Faults of the CUDA communication backend, in child jobs of two
processes on one GPU (MDFUSER_SHARE_DEVICES=1) or two GPUs: a peer that
stops taking part must end the waiting rank within MDFUSER_TIMEOUT_S with a
message naming the rank, the peer and the operation, never hang it."""

from __future__ import annotations

import time

import pytest
import torch
from helpers import run_absent_peer_job

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="the CUDA backend runs on GPUs"
)


def test_an_absent_peer_ends_the_waiting_rank_with_a_message():
    env = {"MDFUSER_TIMEOUT_S": "3"}
    if torch.cuda.device_count() < 2:
        env["MDFUSER_SHARE_DEVICES"] = "1"
    # Rank 1 stops after the first run of the row-parallel linear's rings
    # while rank 0 runs them again.
    device = '"cuda", comm.local_rank() % torch.cuda.device_count()'
    message = run_absent_peer_job(device, "cuda", env)
    assert "[mdfuser] rank 0 in CollectivePermute (Communication " in message, message
    assert "with team (0 1) on the CUDA backend: waited for rank 1" in message, message
    assert "(more than 3 s)" in message, message


def test_an_absent_peer_ends_a_waiting_graph_replay_with_a_message():
    """The same with the cuda_graph option: the second run captured and
    replayed the rings, the third replays them without rank 1."""
    env = {"MDFUSER_TIMEOUT_S": "3"}
    if torch.cuda.device_count() < 2:
        env["MDFUSER_SHARE_DEVICES"] = "1"
    device = '"cuda", comm.local_rank() % torch.cuda.device_count()'
    message = run_absent_peer_job(device, "cuda", env, options=("cuda_graph",), runs=2)
    assert "[mdfuser] rank 0 in a CUDA graph replay of a program that communicates" in message, (
        message
    )
    assert "(more than 3 s)" in message, message


@pytest.mark.parametrize("graphs", [False, True], ids=["statements", "graphs"])
def test_a_peer_that_exits_on_an_error_ends_the_waiting_rank_early(graphs):
    """Rank 1 raises an error it does not catch while rank 0 waits for it
    on the stream: rank 0's watchdog learns it from the store and ends the
    process within seconds, quoting the error, not after the 60 s bound."""
    env = {"MDFUSER_TIMEOUT_S": "60"}
    if torch.cuda.device_count() < 2:
        env["MDFUSER_SHARE_DEVICES"] = "1"
    device = '"cuda", comm.local_rank() % torch.cuda.device_count()'
    options = ("cuda_graph",) if graphs else ()
    start = time.monotonic()
    message = run_absent_peer_job(device, "cuda", env, options=options, runs=2, raises=True)
    assert time.monotonic() - start < 45, message
    assert "(rank 1 exited on an error: RuntimeError: rank 1 gives up)" in message, message
    assert "the stream cannot go on, ending the process" in message, message
