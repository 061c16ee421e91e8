# SPDX-License-Identifier: MIT
"""The ring decompositions (``_enable_options=["ring_decomposition"]``)
against the collective-based programs and plain torch.

Run under ``mpirun -np N`` (N = 1 to 4). Every process builds the same
global inputs with entries in {-1, 0, 1}: every partial and full sum is an
integer that bf16 holds exactly, so the rings, the collectives and torch must
agree exactly.
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter, defaultdict

import pytest
import torch
from helpers import row_parallel_linear, run_python
from ring_helpers import (
    UNEXCHANGED,
    allgather_linear,
    batched_allgather_linear,
    global_inputs,
    integers,
    linear_reduce_scatter,
    ring_pair,
    row_parallel_hidden,
    torch_linear,
)
from transformer_blocks import mlp_forward, mlp_reference

from mdfuser.multidevice import shard_tensor

RING = ["ring_decomposition"]


def run_both(test, fd, full: list[torch.Tensor], disable: tuple[str, ...] = ()):
    """(collective result, ring result, ring program) on the same shards."""
    args = [test.shard(tensor, tv) for tensor, tv in zip(full, fd.fusion.inputs())]
    (ring,) = fd.execute(args, _enable_options=RING, _disable_options=list(disable))
    ring_program = fd.last_host_ir()
    if test.device.type == "cuda" and not test.nccl_usable:
        # GPUs shared by processes: the rings alone, against torch.
        return ring, ring, ring_program
    (collective,) = fd.execute(args, backend=test.collective_backend)
    collective_program = fd.last_host_ir()
    assert fd._cache.num_programs == 2, "the option compiles a program of its own"
    assert "CollectivePermute" not in collective_program, "collectives are the default"
    return collective, ring, ring_program


def count(program: str, communication: str) -> int:
    return len(re.findall(rf"Communication \d+ \(type={communication},", program))


def expect_ring(test, program: str, permutes: int, collective: str) -> None:
    """The ring program holds `permutes` CollectivePermutes over the whole
    team, each issued on a communication stream, and no `collective`; on one
    device the collective program is kept (it communicates nothing)."""
    if test.size == 1:
        assert count(program, "CollectivePermute") == 0
        return
    assert count(program, "CollectivePermute") == permutes, program
    assert count(program, collective) == 0, program
    team = " ".join(str(r) for r in range(test.size))
    lines = [line.strip() for line in program.splitlines()]
    for i, line in enumerate(lines):
        if "type=CollectivePermute" in line:
            assert f"team=({team})" in line
            switch = lines[i - 2] if lines[i - 1].startswith("Synchronize(") else lines[i - 1]
            assert switch.startswith("SetCurrentStream(CommunicationStream "), program
            assert lines[i + 1].startswith("SetCurrentStream(Stream "), program


def linear_operands(program: str) -> list[int]:
    """How many operands each linear of the program has."""
    lines = [line.strip() for line in program.splitlines()]
    counts = []
    for i, line in enumerate(lines):
        if line.startswith("= linear("):
            end = next(j for j in range(i, len(lines)) if lines[j].endswith("))"))
            counts.append(end - i + 1)
    return counts


# (s stream chunks, m tokens per device and chunk): t = d * s * m. m = 1 is
# a single token per ring part; s = 1 a single stream chunk; m = 0 no
# tokens at all (every split of the empty axis is empty).
SHAPES = [(1, 1), (1, 3), (2, 2), (3, 1), (2, 0)]


@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
@pytest.mark.parametrize("s, m", SHAPES, ids=lambda v: str(v))
def test_allgather_linear(multidevice_test, s, m, bias):
    test = multidevice_test
    d = test.size
    k, n = 8, 4 * d
    full = global_inputs(d * s * m, k, n, seed=100 * s + 10 * m + bias)
    fd = allgather_linear(d, s, k, n, bias)
    collective, ring, program = run_both(
        test, fd, [full["x"], full["w"], full["b"]][: 3 if bias else 2]
    )
    expected = shard_tensor(torch_linear(full, bias), fd.output_tensors()[0])
    assert torch.equal(collective.cpu(), expected)
    assert torch.equal(ring.cpu(), expected)
    # One permute per step but the last, in the (stream) loop body.
    expect_ring(test, program, 1, "Allgather")


def shifts(program: str) -> list[int]:
    """The shift of each CollectivePermute of the program, in order."""
    found = []
    for line in program.splitlines():
        if "type=CollectivePermute" in line:
            shift = re.search(r", shift=(\d+),", line)
            found.append(int(shift.group(1)) if shift else 1)
    return found


@pytest.mark.parametrize("schedule", ["direct", "ring"])
@pytest.mark.parametrize("s, m", SHAPES, ids=lambda v: str(v))
def test_linear_reduce_scatter(multidevice_test, s, m, schedule):
    test = multidevice_test
    d = test.size
    k, n = 8 * d, 4
    full = global_inputs(d * s * m, k, n, seed=200 + 10 * s + m)
    fd = linear_reduce_scatter(d, s, k, n)
    disable = ("direct_reduce_scatter",) if schedule == "ring" else ()
    collective, ring, program = run_both(test, fd, [full["x"], full["w"]], disable)
    expected = shard_tensor(torch_linear(full, False), fd.output_tensors()[0])
    assert torch.equal(collective.cpu(), expected)
    assert torch.equal(ring.cpu(), expected)
    if schedule == "direct" and d > 2:
        # Step j sends device me + j's partial sum straight to it (shift j),
        # the d - 1 steps unrolled; the own partial sum adds the first
        # arrival as the GEMM's C operand, each later arrival an add.
        expect_ring(test, program, d - 1, "ReduceScatter")
        assert shifts(program) == list(range(1, d)), program
        assert linear_operands(program) == [2] * (d - 1) + [3], program
        assert program.count("= add(") == d - 2, program
        return
    if schedule == "direct" and d == 2 and s == 1:
        # One chunk: the own GEMM runs beside the one move, before its Wait,
        # and the arrival is added after it.
        expect_ring(test, program, 1, "ReduceScatter")
        assert linear_operands(program) == [2, 2], program
        assert program.count("= add(") == 1, program
        assert program.index("Wait(") > program.rindex("= linear("), program
        return
    expect_ring(test, program, 1, "ReduceScatter")
    if d > 1:
        # Step 0 computes a partial sum; each later step adds the received
        # one as the GEMM's C operand: a linear of three operands, no add.
        assert shifts(program) == [1], program
        assert linear_operands(program) == [2, 3], program
        assert "= add(" not in program


# (s, t): t need not divide by d (trailing ring parts short or empty) nor
# by s (trailing stream chunks short or empty).
@pytest.mark.parametrize(
    "s, t", [(1, 8), (1, 1), (1, 7), (2, 12), (3, 7), (3, 2), (2, 0)], ids=lambda v: str(v)
)
def test_linear_allreduce(multidevice_test, s, t):
    test = multidevice_test
    d = test.size
    h = row_parallel_hidden(d)
    fd = row_parallel_linear(d, s, h)
    full = global_inputs(t, 4 * h, h, seed=300 + 10 * s + t)
    collective, ring, program = run_both(test, fd, [full["x"], full["w"]], UNEXCHANGED)
    expected = torch_linear(full, False)
    assert torch.equal(collective.cpu(), expected)
    assert torch.equal(ring.cpu(), expected)
    if d > 2 or (d == 2 and s == 1):
        # Direct: each partial sum sent straight to its part's device, then
        # each reduced part to every other device (shifts 1 .. d - 1 twice).
        expect_ring(test, program, 2 * (d - 1), "Allreduce")
        assert shifts(program) == [*range(1, d), *range(1, d)], program
        return
    # The reduce-scatter ring, then the allgather ring.
    expect_ring(test, program, 2, "Allreduce")


@pytest.mark.parametrize("t", [8, 7, 1], ids=lambda v: f"t{v}")
def test_linear_allreduce_as_rings(multidevice_test, t):
    """The allreduce kept as its two rings (`direct_reduce_scatter`
    disabled): the same values as the collective and as torch."""
    test = multidevice_test
    d = test.size
    h = row_parallel_hidden(d)
    fd = row_parallel_linear(d, 1, h)
    full = global_inputs(t, 4 * h, h, seed=350 + t)
    collective, ring, program = run_both(
        test, fd, [full["x"], full["w"]], ("direct_reduce_scatter", *UNEXCHANGED)
    )
    expected = torch_linear(full, False)
    assert torch.equal(collective.cpu(), expected)
    assert torch.equal(ring.cpu(), expected)
    expect_ring(test, program, 2, "Allreduce")


PROLOGUES_FIRST = [*RING, "ring_prologues_first"]


@pytest.mark.parametrize(
    "pair, s, t",
    [
        ("linear_reduce_scatter", 3, 6),
        ("linear_reduce_scatter", 1, 2),
        ("linear_allreduce", 3, 7),
        ("linear_allreduce", 2, 12),
        ("linear_allreduce", 3, 2),
    ],
    ids=lambda v: str(v),
)
def test_ring_prologues_first(multidevice_test, pair, s, t):
    """Every stream chunk's step-0 GEMM first, in chunk order, then the
    rings: the same values as the rings in one loop and the collectives.
    (The reduce-scatter as a ring: its direct form, the default over three
    devices or more, allocates its receive buffers before its first move,
    and the pass leaves such loops as they are.)"""
    test = multidevice_test
    d = test.size
    if pair == "linear_reduce_scatter":
        k, n = 8 * d, 4
        fd = linear_reduce_scatter(d, s, k, n)
        full = global_inputs(d * t, k, n, seed=500 + 10 * s + t)
    else:
        h = row_parallel_hidden(d)
        fd = row_parallel_linear(d, s, h)
        full = global_inputs(t, 4 * h, h, seed=600 + 10 * s + t)
    args = [test.shard(full[name], tv) for name, tv in zip("xw", fd.fusion.inputs())]
    ring = ["direct_reduce_scatter", *UNEXCHANGED]
    (rings,) = fd.execute(args, _enable_options=RING, _disable_options=ring)
    (first,) = fd.execute(args, _enable_options=PROLOGUES_FIRST, _disable_options=ring)
    expected = shard_tensor(torch_linear(full, False), fd.output_tensors()[0])
    assert torch.equal(first.cpu(), expected)
    assert torch.equal(rings, first)
    programs = 2
    if test.device.type != "cuda" or test.nccl_usable:
        (collective,) = fd.execute(args, backend=test.collective_backend)
        assert torch.equal(collective, first)
        programs = 3
    assert fd._cache.num_programs == programs
    fd.execute(args, _enable_options=PROLOGUES_FIRST, _disable_options=ring)
    program = fd.last_host_ir()
    split = s > 1 and d > 1
    assert ("Synchronize(Stream max(" in program) == split, program
    if s > 1:
        # The stream loop (two when split) and the loop joining the streams.
        loops = re.findall(r"^  FOR i\d+ from 0 to", program, flags=re.M)
        assert len(loops) == (3 if split else 2), program


def gemms_then_worker(program: str) -> tuple[list[int], int]:
    """The lines of the Stream loop's linears and the line at which its
    iteration moves to its worker stream (the worker made current, then
    waiting for the main stream)."""
    lines = [line.strip() for line in program.splitlines()]
    loop = next(i for i, line in enumerate(lines) if line.startswith("FOR "))
    switch = next(
        i
        for i in range(loop, len(lines) - 1)
        if re.fullmatch(r"SetCurrentStream\(Stream i\d+\)", lines[i])
        and lines[i + 1].startswith("Synchronize(Stream ")
    )
    body_end = next(
        (i for i in range(switch, len(lines)) if lines[i].startswith("FOR ")), len(lines)
    )
    gemms = [i for i in range(loop, body_end) if lines[i].startswith("= linear(")]
    return gemms, switch


@pytest.mark.parametrize("schedule", ["direct", "ring"])
@pytest.mark.parametrize("pair", ["allgather_linear", "linear_reduce_scatter", "linear_allreduce"])
def test_compute_on_main_stream_keeps_the_gemms_in_order(multidevice_test, pair, schedule):
    """compute_on_main_stream with rings or direct moves: every GEMM of a
    stream chunk on the main stream, before the iteration moves to its
    worker, and the reductions direct unless refused; the same values as
    torch."""
    test = multidevice_test
    fd, args, full_output = ring_pair(test, pair)
    disable = ["direct_reduce_scatter"] if schedule == "ring" else []
    options = {"_enable_options": [*RING, "compute_on_main_stream"], "_disable_options": disable}
    for i in range(2):
        (out,) = fd.execute(args, **options)
        expected = shard_tensor(full_output, fd.output_tensors()[0])
        assert torch.equal(out.cpu(), expected if i == 0 else expected.neg())
        args[0].neg_()
    if test.size == 1:
        return  # nothing moves: the iterations run on their workers whole
    program = fd.last_host_ir()
    gemms, switch = gemms_then_worker(program)
    assert gemms and max(gemms) < switch, program
    if pair != "allgather_linear":
        # The reduction is direct at every team size, also at d = 2 with
        # several chunks (a ring's last GEMM would wait for its move): the
        # own partial sum adds an arrival.
        assert ("= add(" in program) == (schedule == "direct"), program


@pytest.mark.parametrize("pair", ["linear_reduce_scatter", "linear_allreduce"])
def test_concurrent_moves(multidevice_test, pair):
    """concurrent_moves: a direct form's moves to its d - 1 peers, issued
    before any is waited for, each on a communication stream of its own;
    the same values as torch."""
    test = multidevice_test
    fd, args, full_output = ring_pair(test, pair)
    options = {"_enable_options": [*RING, "concurrent_moves"]}
    for i in range(2):
        (out,) = fd.execute(args, **options)
        expected = shard_tensor(full_output, fd.output_tensors()[0])
        assert torch.equal(out.cpu(), expected if i == 0 else expected.neg())
        args[0].neg_()
    program = fd.last_host_ir()
    lanes = set(re.findall(r"SetCurrentStream\(CommunicationStream i\d+ lane (\d+)\)", program))
    # At d = 2 with two chunks the reductions are rings: one move at a time.
    expected_lanes = {str(lane) for lane in range(1, min(test.size - 1, 4))}
    assert lanes == (expected_lanes if test.size > 2 else set()), program
    # The allreduce's allgather sends one reduced part to every peer: that
    # fan-out keeps to one stream.
    moves = re.findall(
        r"SetCurrentStream\((CommunicationStream [^)]*)\)\n(?:\s*Synchronize\([^)]*\)\n)?"
        r"\s*Communication \d+ \(type=CollectivePermute[^\n]*?input=(T\d+)",
        program,
    )
    streams_by_input = defaultdict(set)
    for stream, source in moves:
        streams_by_input[source].add(stream)
    assert all(len(streams) == 1 for streams in streams_by_input.values()), program
    moves_by_input = Counter(source for _, source in moves)
    fan_out = test.size - 1 if pair == "linear_allreduce" else min(test.size - 1, 1)
    assert max(moves_by_input.values(), default=0) == fan_out, program


@pytest.mark.parametrize("s, t", [(1, 8), (3, 7), (2, 12), (2, 0)], ids=lambda v: str(v))
def test_exchanged_allreduce(multidevice_test, s, t):
    """exchange_allreduce: at two devices each chunk's whole partial sum
    moves to the other device, which adds it (one move a chunk, no parts);
    elsewhere the option changes nothing. The same values as torch."""
    test = multidevice_test
    d = test.size
    h = row_parallel_hidden(d)
    fd = row_parallel_linear(d, s, h)
    full = global_inputs(t, 4 * h, h, seed=700 + 10 * s + t)
    args = [test.shard(full[name], tv) for name, tv in zip("xw", fd.fusion.inputs())]
    (out,) = fd.execute(args, _enable_options=[*RING, "exchange_allreduce"])
    assert torch.equal(out.cpu(), torch_linear(full, False))
    program = fd.last_host_ir()
    if d == 2:
        expect_ring(test, program, 1, "Allreduce")
        assert "RingChunk" not in program, program
        assert program.count("= add(") == 1, program


def test_rings_repeat_bit_identically(multidevice_test):
    test = multidevice_test
    d = test.size
    fd = allgather_linear(d, 2, 8, 4 * d, bias=True)
    full = global_inputs(4 * d, 8, 4 * d, seed=5)
    args = [test.shard(full[k], tv) for k, tv in zip("xwb", fd.fusion.inputs())]
    (first,) = fd.execute(args, _enable_options=RING)
    for _ in range(3):
        (again,) = fd.execute(args, _enable_options=RING)
        assert torch.equal(again, first)
    assert fd._cache.num_programs == 1


def test_uneven_reduce_scatter_is_a_value_error(multidevice_test):
    """The reduce-scattered tokens must divide among the devices, with the
    ring as with the collective; the ranks stay in step afterwards."""
    test = multidevice_test
    d = test.size
    test.require(2)
    k, n = 8 * d, 4
    fd = linear_reduce_scatter(d, 1, k, n)
    full = global_inputs(2 * d + 1, k, n, seed=6)
    args = [test.shard(full[name], tv) for name, tv in zip("xw", fd.fusion.inputs())]
    for options in ([], RING):
        with pytest.raises(ValueError, match=rf"extent {2 * d + 1}, which does not divide"):
            fd.execute(args, _enable_options=options)
    full = global_inputs(2 * d, k, n, seed=6)
    args = [test.shard(full[name], tv) for name, tv in zip("xw", fd.fusion.inputs())]
    (out,) = fd.execute(args, _enable_options=RING)
    expected = shard_tensor(torch_linear(full, False), fd.output_tensors()[0])
    assert torch.equal(out.cpu(), expected)


def test_allgather_linear_with_a_batch_axis(multidevice_test):
    """x [b, t, k] with the tokens (axis 1) across the devices: the ring
    cuts axis 1, whose parts are not contiguous."""
    test = multidevice_test
    d = test.size
    fd = batched_allgather_linear(d, 2)
    g = torch.Generator().manual_seed(8)
    full = [integers((2, 3 * d, 8), g), integers((4 * d, 8), g)]
    collective, ring, program = run_both(test, fd, full)
    expected = shard_tensor(
        torch.nn.functional.linear(full[0].double(), full[1].double()).to(torch.bfloat16),
        fd.output_tensors()[0],
    )
    assert torch.equal(collective.cpu(), expected)
    assert torch.equal(ring.cpu(), expected)
    expect_ring(test, program, 1, "Allgather")
    if d > 1:
        assert "RingChunk(T" in program and "axis = 1, index = " in program


@pytest.mark.parametrize("streams", [1, 2])
def test_sequence_parallel_mlp(multidevice_test, streams):
    """Both rings in one program: the allgather ring into the first linear
    and the reduce-scatter ring out of the second, with gelu and the bias
    between. Floating-point inputs: the rings sum in another order than the
    collectives, so both are compared with torch's tolerance."""
    test = multidevice_test
    d = test.size
    h = 16 if 64 % d == 0 else 4 * d  # 4h splits over the devices
    block = mlp_forward(h, d, "sp", streams, test.mdfuser_dtype)
    g = torch.Generator().manual_seed(12)
    full = dict(
        x=torch.randn(4 * d * streams, h, generator=g),
        w1=torch.randn(4 * h, h, generator=g) / 4,
        b1=torch.randn(4 * h, generator=g),
        w2=torch.randn(h, 4 * h, generator=g) / 8,
        b2=torch.randn(h, generator=g),
    )
    args = [test.shard(full[name].to(test.dtype), tv) for name, tv in block.inputs.items()]
    (ring,) = block.fd.execute(args, _enable_options=RING)
    program = block.fd.last_host_ir()
    collective = None
    if test.device.type != "cuda" or test.nccl_usable:
        (collective,) = block.fd.execute(args, backend=test.collective_backend)
    want, torch_result = test.references(lambda **t: mlp_reference(**t)[0], full)
    want = shard_tensor(want.cpu(), block.fd.output_tensors()[0])
    torch_result = shard_tensor(torch_result.cpu(), block.fd.output_tensors()[0])
    tolerance = test.tolerance(want, torch_result)
    if collective is not None:
        test.assert_close(collective, want, tolerance, msg="collective")
    test.assert_close(ring, want, tolerance, msg="ring")
    if d > 1:
        # The allgather ring's permute, and the reduce-scatter's: one in a
        # ring's loop at d = 2, the d - 1 direct moves beyond.
        permutes = 1 + (1 if d == 2 else d - 1)
        assert count(program, "CollectivePermute") == permutes, program
        assert count(program, "Allgather") + count(program, "ReduceScatter") == 0


def test_a_neighbour_that_never_joins_is_a_bounded_error(multidevice_test):
    """A child job of the same size whose last rank, after a first
    execution of the ring (in which the ranks agree on the program), never
    runs it again: the others fail within MDFUSER_TIMEOUT_S, naming their
    rank and the CollectivePermute, instead of hanging."""
    test = multidevice_test
    test.require(2)
    base = int(os.environ.get("MDFUSER_PORT", os.environ.get("MASTER_PORT", "29500")))
    tests_dir = os.path.dirname(os.path.dirname(__file__))
    code = f"""
import sys, time, torch
sys.path.insert(0, {tests_dir!r})
from helpers import row_parallel_linear
from mdfuser.multidevice import Communicator, shard_tensor
comm = Communicator.instance()
h = {row_parallel_hidden(test.size)}
fd = row_parallel_linear(comm.size(), 1, h)
full = [torch.ones(rows, 4 * h, dtype=torch.bfloat16) for rows in (4, h)]
args = [shard_tensor(t, tv) for t, tv in zip(full, fd.fusion.inputs())]
ring = ["ring_decomposition"]
fd.execute(args, _enable_options=ring)  # every rank joins and agrees
if comm.rank() == comm.size() - 1:
    time.sleep(5)
    sys.exit(0)
try:
    fd.execute(args, _enable_options=ring)
except Exception as e:
    print(type(e).__name__, e)
    sys.exit(3)
"""
    start = time.monotonic()
    child = run_python(
        code,
        {
            "RANK": str(test.rank),
            "WORLD_SIZE": str(test.size),
            "LOCAL_RANK": str(test.local_rank),
            "LOCAL_WORLD_SIZE": str(test.comm.local_size()),
            "MDFUSER_PORT": str(base + 7),
            "MDFUSER_TIMEOUT_S": "2",
            # The children of four ranks on two cores can start seconds
            # apart (2 s was seen to be too short to join).
            "MDFUSER_RENDEZVOUS_TIMEOUT_S": "60",
        },
    )
    assert time.monotonic() - start < 60, "bounded by the timeout, not by a hang"
    if test.rank == test.size - 1:
        assert child.returncode == 0, child.stderr
        return
    assert child.returncode == 3, child.stderr
    # Its own wait timed out, or a rank whose wait timed out first reported
    # that failure, which ended this rank's wait.
    assert f"rank {test.rank} failed waiting" in child.stdout or (
        f"rank {test.rank} stopped waiting in CollectivePermute" in child.stdout
        and " failed: rank " in child.stdout
    ), child.stdout
    assert "CollectivePermute" in child.stdout and "(timed out)" in child.stdout
