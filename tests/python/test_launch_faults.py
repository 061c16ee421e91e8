# SPDX-License-Identifier: MIT
"""Faults of the store and the launcher, in jobs of fresh processes with
bounded wall time: each ends promptly with a message naming the rank, the
operation and what to do."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from helpers import ALLGATHER_FUSION, finish_world, free_port, run_world, start_world

# An allgather on every rank of the job. Each rank runs the steps of
# STEPS[rank]: "run" executes it, "new" executes it with a new input
# signature, "bad" passes a Double input and "none" passes None (a TypeError
# on this rank, caught, from mdfuser's C++ and Python checks),
# "die" exits at once (no shutdown), "raise" raises an error the script
# does not catch, "sleep" waits a second. Each step's
# values differ, so that ranks out of step see wrong values.
SCRIPT = (
    """
import os, sys, time
from mdfuser.multidevice import Communicator
comm = Communicator.instance()
mesh = list(range(comm.size()))
"""
    + ALLGATHER_FUSION
    + """
steps = {steps!r}[comm.rank()]
for index, step in enumerate(steps):
    if step == "die":
        os._exit(3)
    if step == "raise":
        raise RuntimeError(f"rank {{comm.rank()}} gives up")
    if step == "sleep":
        time.sleep(1)
        continue
    rows = 3 if step == "new" else 2
    full = torch.arange(rows * 4.0 * len(mesh)).reshape(-1, 4) + 100 * index
    if step in ("bad", "none"):
        try:
            fd.execute([shard_tensor(full, x).double() if step == "bad" else None])
        except TypeError:
            print("TypeError (caught)", flush=True)
        continue
    try:
        (out,) = fd.execute([shard_tensor(full, x)])
        assert torch.equal(out, full)
        print("ok", flush=True)
    except Exception as e:
        print(type(e).__name__ + ": " + str(e), flush=True)
        sys.exit(1)
"""
)


def test_losing_the_store_host_names_the_rank_and_the_operation():
    port = free_port()
    start = time.monotonic()
    world = start_world(
        SCRIPT.format(steps=[["run", "die"], ["run", "sleep", "new"]]),
        2,
        {"MDFUSER_TIMEOUT_S": "30"},
        port,
    )
    results = finish_world(world)
    assert results[0].returncode == 3
    assert results[1].returncode == 1, results[1].stderr
    last = results[1].stdout.splitlines()[-1]
    assert last.startswith(
        f"RuntimeError: rank 1 lost the rendezvous store at localhost:{port} (served by "
        "rank 0) in the agreement check of execute with team (0 1); rank 0 has probably "
        "exited, see its error:"
    ), results[1].stdout
    # Neither the failure nor the shutdown waits for the timeout.
    assert time.monotonic() - start < 25


def test_a_survivor_of_a_dead_peer_does_not_linger_in_shutdown():
    start = time.monotonic()
    results = finish_world(
        start_world(
            SCRIPT.format(steps=[["run", "sleep", "run"], ["run", "die"]]),
            2,
            {"MDFUSER_TIMEOUT_S": "30"},
        )
    )
    assert results[1].returncode == 3
    assert results[0].returncode == 1
    last = results[0].stdout.splitlines()[-1]
    assert last.startswith("RuntimeError: rank 0 failed waiting"), results[0].stdout
    assert "with team (0 1)" in last
    # Before: the survivor waited the whole timeout for its dead peer in
    # shutdown, after the collective had failed.
    assert time.monotonic() - start < 25


def test_an_uncaught_error_ends_the_rank_at_once_and_its_peers_quote_it():
    start = time.monotonic()
    results = finish_world(
        start_world(
            SCRIPT.format(steps=[["run", "run"], ["run", "raise"]]),
            2,
            {"MDFUSER_TIMEOUT_S": "30"},
        )
    )
    assert results[1].returncode == 1
    assert "RuntimeError: rank 1 gives up" in results[1].stderr
    assert results[0].returncode == 1
    last = results[0].stdout.splitlines()[-1]
    assert last.startswith("RuntimeError: rank 0 failed waiting"), results[0].stdout
    assert last.endswith("; rank 1 reported a failed run: RuntimeError: rank 1 gives up"), last
    # Before: the failing rank's exit waited in shutdown for its peer, which
    # waited in the allgather for it, both until the timeout.
    assert time.monotonic() - start < 25


def test_a_peer_waiting_in_the_store_stops_when_a_rank_exits_on_an_error():
    # Rank 0's new signature makes it compare with rank 1 through the store,
    # where no connection closes when rank 1 goes; no launcher ends rank 0.
    start = time.monotonic()
    results = finish_world(
        start_world(
            SCRIPT.format(steps=[["run", "new"], ["run", "raise"]]),
            2,
            {"MDFUSER_TIMEOUT_S": "30"},
        )
    )
    assert results[1].returncode == 1
    assert results[0].returncode == 1
    last = results[0].stdout.splitlines()[-1]
    assert last == (
        "RuntimeError: rank 0 stopped waiting in the agreement check of execute with team "
        "(0 1): rank 1 exited on an error: RuntimeError: rank 1 gives up"
    ), results[0].stdout
    assert time.monotonic() - start < 25


def test_a_second_job_on_a_running_jobs_port_does_not_join_it():
    port = free_port()
    first = start_world(
        SCRIPT.format(steps=[["run"] + ["sleep"] * 5, ["run"] + ["sleep"] * 5]),
        2,
        {"TORCHELASTIC_RUN_ID": "first"},
        port,
    )
    # The first job is up and holds the port once its ranks ran.
    assert [process.stdout.readline().strip() for process in first] == ["ok", "ok"]
    start = time.monotonic()
    second = finish_world(
        start_world(
            SCRIPT.format(steps=[["run"], ["run"]]), 2, {"TORCHELASTIC_RUN_ID": "second"}, port
        ),
        timeout=60,
    )
    assert time.monotonic() - start < 9  # promptly, not after the 10 s timeout
    if [r.stdout.strip() for r in second] == ["ok", "ok"]:
        # The host let the second job's store bind the port as well (seen
        # once on a GPU machine; another address family, say): the second
        # job ran as a world of its own, each rank's job check passed, so
        # it joined nothing of the first, which must not notice.
        assert [r.returncode for r in finish_world(first)] == [0, 0]
        return
    assert "is the port in use? set MDFUSER_PORT or MASTER_PORT" in second[0].stdout, second[0]
    assert second[1].stdout.strip() == (
        f"RuntimeError: rank 1 (torchrun job second of 2 ranks) reached the rendezvous "
        f"store at localhost:{port}, but it serves another job (torchrun job first of 2 "
        "ranks): another job is running on this port. Give this job a free port with "
        "MDFUSER_PORT (or MASTER_PORT)"
    )
    # The first job did not notice.
    assert [r.returncode for r in finish_world(first)] == [0, 0]


def test_ranks_that_switch_to_different_signatures_they_ran_before_end_bounded():
    """Both ranks ran 2 and then 3 rows per shard; then rank 0 switches back
    to 2 while rank 1 stays at 3. Rank 0 compares (its signature changed)
    and rank 1 goes to its allgather: each ends within the timeout, naming
    the other rank, instead of exchanging mismatched data."""
    start = time.monotonic()
    results = run_world(
        SCRIPT.format(steps=[["run", "new", "run"], ["run", "new", "new"]]),
        2,
        {"MDFUSER_TIMEOUT_S": "5"},
    )
    assert time.monotonic() - start < 60
    zero, one = results
    assert zero.returncode == 1 and one.returncode == 1, (zero.stderr, one.stderr)
    assert zero.stdout.splitlines()[:2] == ["ok", "ok"]
    assert "TimeoutError: rank 0 waited 5 s in the agreement check" in zero.stdout
    assert "but rank 1 did not take part" in zero.stdout
    # Timed out, or cut off when rank 0 exited with the store it serves.
    assert "rank 1 failed waiting" in one.stdout and "for Allgather" in one.stdout


@pytest.mark.parametrize("failure", ["bad", "none"])
def test_a_rank_that_failed_alone_compares_before_its_next_run(failure):
    """Rank 1's second run fails on rank 1 alone (a Double input; rank 0's
    inputs are as before, so rank 0 goes to its allgather). Rank 1 catches
    it and runs again: that run compares with rank 0 first, instead of
    pairing its allgather with rank 0's pending one (which would give both
    the other step's values). Both end within the timeout, with errors."""
    start = time.monotonic()
    results = run_world(
        SCRIPT.format(steps=[["run", "run", "run"], ["run", failure, "run"]]),
        2,
        {"MDFUSER_TIMEOUT_S": "5"},
    )
    assert time.monotonic() - start < 60
    zero, one = results
    assert zero.stdout.splitlines()[0] == "ok", zero.stdout
    assert zero.stdout.count("ok") == 1 and "AssertionError" not in zero.stdout, zero.stdout
    assert "TimeoutError: rank 0 failed waiting" in zero.stdout, zero.stdout
    # Rank 0's error quotes what happened on rank 1.
    quoted = {
        "bad": "rank 1 reported a failed run: input 0 (T0) has dtype Double",
        "none": "rank 1 reported a failed run: TypeError: execute: input 0 must be a torch.Tensor",
    }
    assert quoted[failure] in zero.stdout, zero.stdout
    assert one.stdout.splitlines()[:2] == ["ok", "TypeError (caught)"], one.stdout
    # Rank 1 waits in the check until its timeout, or until rank 0, whose
    # collective timed out first, exits with the store it serves.
    assert (
        "TimeoutError: rank 1 waited 5 s in the agreement check" in one.stdout
        or "RuntimeError: rank 1 lost the rendezvous store" in one.stdout
        and "in the agreement check of execute" in one.stdout
    ), one.stdout


def test_a_port_held_by_a_program_that_never_answers_ends_within_the_timeout():
    """Something that is no rendezvous store accepts connections on the
    port and never answers: rank 0 cannot listen there, and rank 1, which
    connects to it, gives up within the timeout instead of waiting forever
    in the store's handshake."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    accepted = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        start = time.monotonic()
        world = start_world(
            SCRIPT.format(steps=[["run"], ["run"]]), 2, {"MDFUSER_TIMEOUT_S": "5"}, port
        )
        zero, one = finish_world(world, timeout=60)
        assert time.monotonic() - start < 30
    finally:
        stop.set()
        thread.join()
        for connection in accepted:
            connection.close()
        listener.close()
    assert zero.returncode == 1 and "could not start the rendezvous store" in zero.stdout
    assert one.returncode == 1
    assert "TimeoutError: rank 1 of a world of 2 could not reach the rendezvous store" in one.stdout
    assert "no store answered there" in one.stdout
