# SPDX-License-Identifier: MIT
"""Faults of the CUDA communication backend, in child jobs of two
processes on one GPU (MDFUSER_SHARE_DEVICES=1) or two GPUs: a peer that
stops taking part must end the waiting rank within MDFUSER_TIMEOUT_S with a
message naming the rank, the peer and the operation, never hang it."""

from __future__ import annotations

import time

import pytest
import torch
from helpers import run_absent_peer_job, run_failing_rank_job

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


@pytest.mark.timeout(150)
@pytest.mark.parametrize("graphs", [False, True], ids=["statements", "graphs"])
def test_a_failure_on_one_rank_releases_the_others_and_all_go_on(graphs):
    """Three ranks (sharing GPUs where the machine has fewer): the last
    reports a failure while the others' streams wait for it in the rings of
    the row-parallel linear. Their watchdogs learn it from the store within
    about a second and release the waits; their next run says that the
    released run's output is wrong, naming the rank and its error; then all
    three recover and run again, in the next epoch, with exact results,
    instead of the process ending at the 60 s bound. The released ranks
    wait for their output with `.cpu()`, a copy to pageable memory, which
    holds up every other CUDA call of the process until their stream ends:
    their own watchdogs cannot release them, the failed rank's does."""
    env = {}
    if torch.cuda.device_count() < 3:
        env["MDFUSER_SHARE_DEVICES"] = "1"
    device = '"cuda", comm.local_rank() % torch.cuda.device_count()'
    options = ("cuda_graph",) if graphs else ()
    # With graphs: the first run runs the statements, the second captures,
    # so that the run the last rank skips is a replay.
    lines = run_failing_rank_job(3, device, options, env, warmups=2 if graphs else 1)
    warmups = 2 if graphs else 1
    for rank, out in enumerate(lines):
        assert out[:warmups] == ["ok 0"] * warmups and out[-1] == "ok 1", (rank, out)
        if rank == 2:
            assert len(out) == warmups + 1, out
            continue
        stopped = out[warmups]
        assert stopped.startswith("stopped after "), out
        assert float(stopped.split()[2]) < 20, out
        assert (
            f"the communication of rank {rank} is stopped by failures: rank 2 failed: "
            "AssertionError: rank 2's check failed; the watchdog released this rank's waits "
            "on them, so the outputs of its runs since then are wrong. Call "
            "Communicator.recover() on every rank to communicate again"
        ) in stopped, out


@pytest.mark.skipif(
    torch.cuda.device_count() < 2 or torch.cuda.get_device_capability() != (9, 0),
    reason="the fused kernels run on Hopper GPUs, one per rank here",
)
@pytest.mark.parametrize(
    "pair,statement,waited",
    [
        ("allgather_linear", "AllgatherLinear", "waited for the peers' rows"),
        (
            "allgather_linear_filling",
            "AllgatherLinear",
            "waited for rank 1 to free its place for this rank's rows",
        ),
        ("linear_reduce_scatter", "LinearReduceScatter", "waited for the peers' partial sums"),
    ],
    ids=["allgather_linear_pushed", "allgather_linear_copy_engines", "linear_reduce_scatter"],
)
def test_an_absent_peer_of_a_fused_kernel_ends_the_waiting_rank_with_a_message(
    pair, statement, waited
):
    """Rank 1 stops after a run of the fused allgather + linear (or linear
    + reduce-scatter) while rank 0 runs it again: rank 0's kernel waits for
    rank 1's rows (the copy engines' moves, where the GEMM fills the GPU,
    for rank 1 to free its place; the reduce-scatter's kernel for rank 1's
    partial sums), and the watchdog ends rank 0 within the bound, naming
    both ranks and the statement."""
    env = {"MDFUSER_TIMEOUT_S": "3"}
    device = '"cuda", comm.local_rank()'
    message = run_absent_peer_job(
        device, "cuda", env, options=("fused_matmul_communication",), pair=pair
    )
    assert f"[mdfuser] rank 0 in {statement} " in message, message
    assert f"with team (0 1) on the CUDA backend: {waited}" in message, message
    assert "(more than 3 s)" in message, message
