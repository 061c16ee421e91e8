# SPDX-License-Identifier: MIT
"""Faults of the store and the launcher, in jobs of fresh processes with
bounded wall time: each ends promptly with a message naming the rank, the
operation and what to do."""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest
from helpers import (
    ALLGATHER_FUSION,
    finish_world,
    free_port,
    run_failing_rank_job,
    run_world,
    start_world,
)

# An allgather on every rank of the job. Each rank runs the steps of
# STEPS[rank]: "run" executes it (and exits on an error), "try" executes it
# and goes on after an error, "new" executes it with a new input
# signature, "bad" passes a Double input and "none" passes None (a TypeError
# on this rank, caught, from mdfuser's C++ and Python checks), "recover"
# recovers from failures with the other ranks,
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
    if step == "recover":
        comm.recover()
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
        if step != "try":
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
    # The exit posted in the store, or the connection it closed, whichever
    # rank 0 met first.
    assert (
        last
        == (
            "RuntimeError: rank 0 stopped waiting in Allgather (Communication 0) with team (0 1): "
            "rank 1 exited on an error: RuntimeError: rank 1 gives up"
        )
        or last.startswith("RuntimeError: rank 0 failed waiting")
        and "for Allgather (Communication 0) with team (0 1)" in last
    ), results[0].stdout
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
    and rank 1 goes to its allgather: whichever times out first (rank 0 in
    the check, or rank 1 in Gloo's send) reports its failure, which ends the
    other's wait, instead of either exchanging mismatched data."""
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
    assert one.stdout.splitlines()[:2] == ["ok", "ok"]
    zero_timed_out = "TimeoutError: rank 0 waited 5 s in the agreement check" in zero.stdout
    one_timed_out = "rank 1 failed waiting" in one.stdout and "for Allgather" in one.stdout
    assert zero_timed_out or one_timed_out, (zero.stdout, one.stdout)
    if zero_timed_out:
        assert "but rank 1 did not take part" in zero.stdout
        # Stopped by rank 0's failure, or cut off when rank 0 exited with
        # the store it serves.
        assert (
            "rank 1 stopped waiting in Allgather (Communication 0) with team (0 1): "
            "rank 0 failed: rank 0 waited 5 s in the agreement check"
            in one.stdout
            or "rank 1 failed waiting" in one.stdout
        ), one.stdout
    else:
        assert (
            "rank 0 stopped waiting in the agreement check of execute with team (0 1): "
            "rank 1 failed: rank 1 failed waiting" in zero.stdout
        ), zero.stdout


@pytest.mark.parametrize("failure", ["bad", "none"])
def test_a_rank_that_fails_alone_ends_its_peers_wait_and_both_go_on(failure):
    """Rank 1's second run fails on rank 1 alone (a Double input, or None;
    rank 0's inputs are as before, so rank 0 goes to its allgather). Rank 1
    waits for rank 0 to read its error in the agreement check until rank 0
    says it is stuck in the allgather, then posts the failure: rank 0's wait
    stops within seconds, quoting rank 1's error, long before the timeout;
    both catch their error, recover together and run the last step with
    its values, in the next communication epoch."""
    start = time.monotonic()
    results = run_world(
        SCRIPT.format(steps=[["run", "try", "recover", "run"], ["run", failure, "recover", "run"]]),
        2,
        {"MDFUSER_TIMEOUT_S": "60"},
    )
    assert time.monotonic() - start < 40, "ended by the failure, not the timeout"
    zero, one = results
    assert zero.returncode == 0 and one.returncode == 0, (zero.stdout, one.stdout)
    quoted = {
        "bad": "rank 1 failed: input 0 (T0) has dtype Double",
        "none": "rank 1 failed: TypeError: execute: input 0 must be a torch.Tensor",
    }
    lines = zero.stdout.splitlines()
    assert lines[0] == "ok" and lines[2] == "ok" and len(lines) == 3, zero.stdout
    assert lines[1].startswith(
        "RuntimeError: rank 0 stopped waiting in Allgather (Communication 0) with team (0 1): "
        + quoted[failure]
    ), zero.stdout
    assert one.stdout.splitlines() == ["ok", "TypeError (caught)", "ok"], one.stdout


def test_a_failure_on_one_rank_ends_the_waits_of_the_others_in_rings_and_collectives():
    """Three ranks: rank 2 gives up between two runs (a failure its program
    reports, as a test harness does when a check fails on it), while ranks 0
    and 1 wait for it in the second run's allgather. Both stop within
    seconds, naming rank 2 and its error; then all three recover together
    and run again, cleanly, in the next epoch."""
    script = (
        """
import sys, time
from mdfuser.multidevice import Communicator
comm = Communicator.instance()
mesh = list(range(comm.size()))
"""
        + ALLGATHER_FUSION
        + """
def step(index):
    full = torch.arange(2 * 4.0 * len(mesh)).reshape(-1, 4) + 100 * index
    (out,) = fd.execute([shard_tensor(full, x)])
    assert torch.equal(out, full)
    print("ok", comm.epoch(), flush=True)

step(0)
if comm.rank() == 2:
    comm.report_failure("AssertionError: rank 2's check failed")
else:
    start = time.monotonic()
    try:
        step(1)
    except RuntimeError as e:
        print(f"stopped after {time.monotonic() - start:.1f} s:", e, flush=True)
comm.recover()
step(2)
"""
    )
    start = time.monotonic()
    results = run_world(script, 3, {"MDFUSER_TIMEOUT_S": "60"})
    assert time.monotonic() - start < 45, "ended by the failure, not the timeout"
    for rank, result in enumerate(results):
        assert result.returncode == 0, (rank, result.stdout, result.stderr)
        lines = result.stdout.splitlines()
        assert lines[0] == "ok 0" and lines[-1] == "ok 1", (rank, result.stdout)
        if rank == 2:
            assert len(lines) == 2, result.stdout
            continue
        stopped = lines[1]
        assert stopped.startswith("stopped after "), result.stdout
        assert float(stopped.split()[2]) < 5, stopped
        assert stopped.endswith(
            f"rank {rank} stopped waiting in Allgather (Communication 0) with team (0 1 2): "
            "rank 2 failed: AssertionError: rank 2's check failed"
        ), stopped


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


@pytest.mark.parametrize("options", [(), ("ring_decomposition",)], ids=["allreduce", "ring"])
def test_the_ranks_that_wait_for_a_failed_rank_stop_within_a_second(options):
    """Four ranks on the CPU: the last reports a failure while the others
    wait for it in the row-parallel linear's allreduce (Gloo's collective)
    or in its rings (Gloo's sends and receives). They stop within a second
    or two, naming the rank and its error, and all four then run again in
    the next epoch, with exact results."""
    lines = run_failing_rank_job(4, '"cpu"', options, {})
    for rank, out in enumerate(lines):
        assert out[0] == "ok 0" and out[-1] == "ok 1", (rank, out)
        if rank == 3:
            assert len(out) == 2, out
            continue
        assert out[1].startswith("stopped after "), out
        assert float(out[1].split()[2]) < 5, out
        assert (
            "stopped waiting in " in out[1]
            and "rank 3 failed: AssertionError: rank 3's check failed" in out[1]
        ), out


CHILD_TESTS = (
    """
import torch
from mdfuser import FusionDefinition, ParallelType
from mdfuser.multidevice import DeviceMesh, shard_tensor


def allgather(multidevice_test):
    mesh = list(range(multidevice_test.size))
"""
    + "\n".join("    " + line for line in ALLGATHER_FUSION.strip().splitlines()[3:])
    + """
    full = torch.arange(8.0 * len(mesh)).reshape(-1, 4)
    (out,) = fd.execute([shard_tensor(full, x)])
    assert torch.equal(out, full)


def test_first(multidevice_test):
    allgather(multidevice_test)
    assert multidevice_test.rank != 2, "rank 2's check fails"
    allgather(multidevice_test)


def test_second(multidevice_test):
    allgather(multidevice_test)
"""
)


def test_a_test_that_fails_on_one_rank_leaves_the_next_test_clean(tmp_path):
    """Three ranks run a pytest file under the multidevice suite's hooks:
    the first test fails on rank 2 between two allgathers, while ranks 0
    and 1 wait for it in the second. The hook reports rank 2's failure:
    their wait stops within seconds, naming rank 2 and the test, and the
    second test passes on every rank, in the next epoch."""
    multidevice = os.path.join(os.path.dirname(__file__), "multidevice")
    (tmp_path / "conftest.py").write_text(
        "import importlib.util, os, sys\n"
        "spec = importlib.util.spec_from_file_location(\n"
        f"    'multidevice_conftest', os.path.join({multidevice!r}, 'conftest.py'))\n"
        "suite = sys.modules['multidevice_conftest'] = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(suite)\n"
        "multidevice_test = suite.multidevice_test\n"
        "pytest_runtest_setup = suite.pytest_runtest_setup\n"
        "pytest_runtest_makereport = suite.pytest_runtest_makereport\n"
    )
    (tmp_path / "test_child.py").write_text(CHILD_TESTS)
    code = (
        "import sys, pytest\n"
        f"sys.exit(pytest.main([{str(tmp_path)!r}, '-q', '-p', 'no:cacheprovider', "
        f"'--rootdir', {str(tmp_path)!r}, '-o', 'timeout=100']))\n"
    )
    start = time.monotonic()
    results = run_world(code, 3, {"MDFUSER_TIMEOUT_S": "60"}, timeout=110)
    assert time.monotonic() - start < 50, "ended by the failure, not by the timeout"
    for rank, result in enumerate(results):
        assert "1 failed, 1 passed" in result.stdout, (rank, result.stdout)
        failed = [line for line in result.stdout.splitlines() if line.startswith("FAILED ")]
        # (A wide terminal appends " - <message>" to the summary line.)
        assert len(failed) == 1 and failed[0].split(" - ")[0].endswith(
            "test_child.py::test_first"
        ), (
            rank,
            result.stdout,
        )
        if rank < 2:
            # (In the agreement check of the second allgather's fusion.)
            assert (
                f"rank {rank} stopped waiting in the agreement check of execute with team "
                "(0 1 2): rank 2 failed: test test_child.py::test_first failed: AssertionError: "
                "rank 2's check fails"
            ) in result.stdout, result.stdout


def test_a_machine_model_never_published_ends_the_wait_within_the_timeout():
    """The rank that claims the machine model never publishes it: the
    other's wait for it ends at the timeout with a TimeoutError naming its
    rank and what it waited for."""
    code = (
        "import sys, time\n"
        "from mdfuser.multidevice import Communicator\n"
        "comm = Communicator.instance()\n"
        "if comm._claim_once('machine_model/cpu'):\n"
        "    time.sleep(6)\n"
        "    sys.exit(0)\n"
        "try:\n"
        "    comm._await_published('machine_model/cpu', 'reading the cpu machine model')\n"
        "except TimeoutError as e:\n"
        "    print(e)\n"
        "    sys.exit(3)\n"
    )
    start = time.monotonic()
    results = run_world(code, 2, {"MDFUSER_TIMEOUT_S": "3"}, timeout=60)
    codes = sorted(r.returncode for r in results)
    assert codes == [0, 3], [(r.returncode, r.stdout, r.stderr) for r in results]
    waiter = [r for r in results if r.returncode == 3][0]
    rank = results.index(waiter)
    assert (
        f"rank {rank} waited 3 s in reading the cpu machine model, but the rank that measures "
        "it did not publish it"
    ) in waiter.stdout, waiter.stdout
    assert time.monotonic() - start < 30
