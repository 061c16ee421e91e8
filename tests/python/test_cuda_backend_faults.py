# SPDX-License-Identifier: MIT
"""Faults of the CUDA communication backend, in child jobs of two
processes on one GPU (MDFUSER_SHARE_DEVICES=1) or two GPUs: a peer that
stops taking part must end the waiting rank within MDFUSER_TIMEOUT_S with a
message naming the rank, the peer and the operation, never hang it."""

from __future__ import annotations

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
