# SPDX-License-Identifier: MIT
"""The CUDA communication backend (``backend=CommunicatorBackend.cuda``):
the ring decompositions with copy-engine moves into peers' symmetric
buffers, ordered by stream memory operations.

On GPUs, under ``mpirun -np N`` or torchrun with one GPU per process, or
with ``MDFUSER_SHARE_DEVICES=1`` several processes on one GPU (how a machine
of one GPU tests it; NCCL cannot run then). Integer-valued inputs: the CUDA
rings, the collectives and torch agree exactly. On CPU tensors the backend
is refused with a ValueError, which CI checks.
"""

from __future__ import annotations

import re

import pytest
import torch
from helpers import row_parallel_hidden_near, row_parallel_linear
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

from mdfuser import CommunicatorBackend
from mdfuser.multidevice import shard_tensor

CUDA = CommunicatorBackend.cuda


def needs_gpus(test) -> None:
    if test.device.type != "cuda":
        pytest.skip("the CUDA backend runs on CUDA tensors")


def expect_cuda_rings(test, program: str, permutes: int) -> None:
    """`permutes` CollectivePermutes on the CUDA backend, landing in
    symmetric buffers, and no other communication; on one device no ring
    (the collective of a team of one stays, a local copy)."""
    found = re.findall(r"Communication \d+ \(type=(\w+),.*backend=(\w+)\)", program)
    if test.size == 1:
        assert "CollectivePermute" not in program and "symmetric" not in program, program
        return
    assert found == [("CollectivePermute", "CUDA")] * permutes, program
    team = " ".join(str(r) for r in range(test.size))
    assert f"mem_type=symmetric, team=({team})" in program, program
    assert "lands_at=" in program


SHAPES = [(1, 1), (1, 3), (2, 2), (3, 1)]


@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
@pytest.mark.parametrize("s, m", SHAPES, ids=lambda v: str(v))
def test_allgather_linear(multidevice_test, s, m, bias):
    test = multidevice_test
    needs_gpus(test)
    d = test.size
    k, n = 8, 4 * d
    full = global_inputs(d * s * m, k, n, seed=100 * s + 10 * m + bias)
    fd = allgather_linear(d, s, k, n, bias)
    names = "xwb"[: 3 if bias else 2]
    args = [test.shard(full[name], tv) for name, tv in zip(names, fd.fusion.inputs())]
    (out,) = fd.execute(args, backend=CUDA)
    expected = shard_tensor(torch_linear(full, bias), fd.output_tensors()[0])
    assert torch.equal(out.cpu(), expected)
    expect_cuda_rings(test, fd.last_host_ir(), 1)


@pytest.mark.parametrize("s, m", SHAPES, ids=lambda v: str(v))
def test_linear_reduce_scatter(multidevice_test, s, m):
    test = multidevice_test
    needs_gpus(test)
    d = test.size
    k, n = 8 * d, 4
    full = global_inputs(d * s * m, k, n, seed=200 + 10 * s + m)
    fd = linear_reduce_scatter(d, s, k, n)
    args = [test.shard(full[name], tv) for name, tv in zip("xw", fd.fusion.inputs())]
    (out,) = fd.execute(args, backend=CUDA)
    expected = shard_tensor(torch_linear(full, False), fd.output_tensors()[0])
    assert torch.equal(out.cpu(), expected)
    # The direct reduce-scatter's d - 1 moves, each shifted by its step,
    # landing in a symmetric buffer each (at d = 2 of several chunks, a
    # ring's one permute).
    program = fd.last_host_ir()
    expect_cuda_rings(test, program, 1 if d <= 2 else d - 1)
    if d > 2 or (d == 2 and s == 1):
        assert [f"shift={j}," in program for j in range(2, d)] == [True] * (d - 2)
        (ring,) = fd.execute(args, backend=CUDA, _disable_options=["direct_reduce_scatter"])
        assert torch.equal(ring.cpu(), expected)
        expect_cuda_rings(test, fd.last_host_ir(), 1)


@pytest.mark.parametrize(
    "s, t", [(1, 8), (1, 1), (1, 7), (2, 12), (3, 7), (3, 2)], ids=lambda v: str(v)
)
def test_linear_allreduce(multidevice_test, s, t):
    test = multidevice_test
    needs_gpus(test)
    d = test.size
    h = row_parallel_hidden(d)
    fd = row_parallel_linear(d, s, h)
    full = global_inputs(t, 4 * h, h, seed=300 + 10 * s + t)
    args = [test.shard(full[name], tv) for name, tv in zip("xw", fd.fusion.inputs())]
    (out,) = fd.execute(args, backend=CUDA, _disable_options=list(UNEXCHANGED))
    assert torch.equal(out.cpu(), torch_linear(full, False))
    # Receiving into symmetric buffers of their own (the output cannot be
    # one): the direct form's 2 (d - 1) moves over three devices or more
    # and at d = 2 in one chunk, else the reduce-scatter ring, then the
    # allgather ring.
    direct = d > 2 or (d == 2 and s == 1)
    expect_cuda_rings(test, fd.last_host_ir(), 2 * (d - 1) if direct else 2)
    if direct:
        (ring,) = fd.execute(
            args, backend=CUDA, _disable_options=["direct_reduce_scatter", *UNEXCHANGED]
        )
        assert torch.equal(ring, out)
        expect_cuda_rings(test, fd.last_host_ir(), 2)


@pytest.mark.parametrize("streams", [1, 2])
def test_a_chunk_cut_from_a_middle_axis_moves_in_rows(multidevice_test, streams):
    """x [b, t, k] with the tokens (axis 1) across the devices: each ring
    step moves a part of axis 1, b rows of contiguous memory apart."""
    test = multidevice_test
    needs_gpus(test)
    d = test.size
    fd = batched_allgather_linear(d, 3, streams)
    g = torch.Generator().manual_seed(31)
    full = [integers((3, 4 * d, 8), g), integers((4 * d, 8), g)]
    args = [test.shard(t, tv) for t, tv in zip(full, fd.fusion.inputs())]
    (got,) = fd.execute(args, backend=CUDA)
    expected = torch.nn.functional.linear(full[0].double(), full[1].double())
    assert torch.equal(got.cpu(), shard_tensor(expected.to(torch.bfloat16), fd.output_tensors()[0]))
    program = fd.last_host_ir()
    expect_cuda_rings(test, program, 1)
    if d > 1:
        assert "axis = 1, index = " in program, program


def test_the_first_run_spares_memory_the_callers_pending_kernels_read(multidevice_test):
    """A program's first run sets its symmetric buffers up where it reaches
    them, while the caller's stream may still have kernels pending. torch
    writes the members' addresses into bytes of the caching allocator with
    copies that wait for no stream: taken for the caller's stream, they
    would be bytes the caller freed a moment before, which its pending
    kernels still read. Here the stream sleeps before copying small
    tensors that the caller then frees, and the program (its ring at the
    top level, on the caller's stream) runs its first time meanwhile: the
    copies still hold the freed tensors' values."""
    test = multidevice_test
    needs_gpus(test)
    d = test.size
    fd = batched_allgather_linear(d, 2)
    g = torch.Generator().manual_seed(5)
    full = [integers((2, 4 * d, 8), g), integers((4 * d, 8), g)]
    args = [test.shard(t, tv) for t, tv in zip(full, fd.fusion.inputs())]
    # A stream of its own: the allocator's blocks for it are only these.
    # Freed, the first 16 make one free block between the start of the
    # segment and the 16 kept, whose first bytes the next small allocation
    # for this stream takes.
    stream = torch.cuda.Stream(test.device)
    with torch.cuda.stream(stream):
        freed = [torch.full((128,), float(i + 1), device=test.device) for i in range(16)]
        kept = [torch.empty(128, device=test.device) for _ in range(16)]
        stream.synchronize()
        # About two seconds at an H200's clock: past the first run's
        # compile and buffer exchange.
        torch.cuda._sleep(4_000_000_000)
        copies = [t.clone() for t in freed]
        del freed
        (got,) = fd.execute(args, backend=CUDA)
        if stream.query():
            pytest.fail("the copies ran before the first run ended: sleep longer")
    stream.synchronize()
    del kept  # alive until here, so that the freed block stays apart
    for i, copy in enumerate(copies):
        value = torch.full((128,), float(i + 1))
        assert torch.equal(copy.cpu(), value), f"copy {i}: {copy.cpu()[:8]}"
    expected = torch.nn.functional.linear(full[0].double(), full[1].double())
    assert torch.equal(got.cpu(), shard_tensor(expected.to(torch.bfloat16), fd.output_tensors()[0]))
    expect_cuda_rings(test, fd.last_host_ir(), 1)
    assert "ShardByStream" not in fd.last_host_ir(), "the ring runs on the caller's stream"


def test_steady_state_repeats_bit_identically_without_host_syncs(multidevice_test):
    """After the first run (which allocates and exchanges the symmetric
    buffers), runs issue no synchronizing CUDA call through torch, return
    fresh outputs and equal the first bit for bit, also with different
    data in between."""
    test = multidevice_test
    needs_gpus(test)
    d = test.size
    h = row_parallel_hidden_near(64, d)
    fd = row_parallel_linear(d, 2, h)
    g = torch.Generator().manual_seed(7)
    x = torch.randn(96, 4 * h, generator=g).to(torch.bfloat16)
    w = torch.randn(h, 4 * h, generator=g).to(torch.bfloat16)
    args = [test.shard(t, tv) for t, tv in zip((x, w), fd.fusion.inputs())]
    other = [args[0].neg(), args[1]]
    (first,) = fd.execute(args, backend=CUDA)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        outs = []
        for _ in range(3):
            outs.append(fd.execute(args, backend=CUDA)[0])
            outs.append(fd.execute(other, backend=CUDA)[0])
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert fd._cache.num_programs == 1
    for again, negated in zip(outs[0::2], outs[1::2]):
        assert again.data_ptr() != first.data_ptr()
        assert torch.equal(again, first)
        assert torch.equal(negated, first.neg())
    reference = torch.nn.functional.linear(x.double(), w.double())
    torch.testing.assert_close(first.cpu().double(), reference, rtol=1.6e-2, atol=0.5)


def test_a_rank_that_alone_passes_other_strides_runs_with_its_peers(multidevice_test):
    """Strides are no part of what the ranks compare: a rank whose input
    is laid out differently compiles a program of its own while its peers
    run theirs. Their rings still meet (same counters, same symmetric
    buffers) and give the same values."""
    test = multidevice_test
    needs_gpus(test)
    d = test.size
    h = row_parallel_hidden(d)
    fd = row_parallel_linear(d, 2, h)
    full = global_inputs(8, 4 * h, h, seed=13)
    args = [test.shard(full[name], tv) for name, tv in zip("xw", fd.fusion.inputs())]
    (first,) = fd.execute(args, backend=CUDA)
    if test.rank == d - 1:
        args[0] = args[0].t().contiguous().t()  # the same values, column-major
    for _ in range(2):
        (again,) = fd.execute(args, backend=CUDA)
        assert torch.equal(again, first)
    assert fd._cache.num_programs == (2 if test.rank == d - 1 else 1)


def test_a_pair_rings_then_the_whole_world_rings(multidevice_test):
    """Ranks 0 and 1 ring on a mesh of their own while the others sit it
    out, then every rank rings on the whole world. torch's symmetric memory
    numbers the store exchanges of its rendezvous per process, so the pair's
    buffers put ranks 0 and 1 ahead of the others: the world's rendezvous
    must still meet (it waited out the store's timeout on four GPUs)."""
    test = multidevice_test
    needs_gpus(test)
    test.require(3)
    d = test.size
    if test.rank < 2:
        for seed in (21, 22):  # two programs, two rendezvous of the pair
            fd = allgather_linear(2, 1, 8, 8, False)
            full = global_inputs(2 * 3, 8, 8, seed=seed)
            args = [test.shard(full[name], tv) for name, tv in zip("xw", fd.fusion.inputs())]
            (out,) = fd.execute(args, backend=CUDA)
            expected = shard_tensor(torch_linear(full, False), fd.output_tensors()[0])
            assert torch.equal(out.cpu(), expected)
    fd = allgather_linear(d, 1, 8, 4 * d, False)
    full = global_inputs(d * 3, 8, 4 * d, seed=23)
    args = [test.shard(full[name], tv) for name, tv in zip("xw", fd.fusion.inputs())]
    (out,) = fd.execute(args, backend=CUDA)
    expected = shard_tensor(torch_linear(full, False), fd.output_tensors()[0])
    assert torch.equal(out.cpu(), expected)
    expect_cuda_rings(test, fd.last_host_ir(), 1)


def test_cuda_and_nccl_programs_are_compiled_apart(multidevice_test):
    """The backend is part of a program's signature: NCCL and CUDA programs
    of one fusion run side by side and agree."""
    test = multidevice_test
    needs_gpus(test)
    if test.comm.local_size() > torch.cuda.device_count():
        pytest.skip("NCCL needs a GPU per process")
    d = test.size
    h = row_parallel_hidden(d)
    fd = row_parallel_linear(d, 1, h)
    full = global_inputs(8, 4 * h, h, seed=9)
    args = [test.shard(full[name], tv) for name, tv in zip("xw", fd.fusion.inputs())]
    (nccl,) = fd.execute(args, backend=CommunicatorBackend.nccl)
    (cuda,) = fd.execute(args, backend=CUDA)
    assert torch.equal(nccl, cuda)
    assert fd._cache.num_programs == 2


def test_the_default_where_the_gpus_map_each_other_is_the_cuda_backend(multidevice_test):
    """Every rank on one host, each GPU reaching the others: execute's
    default carries the rings on copy engines; NCCL stays a choice."""
    test = multidevice_test
    needs_gpus(test)
    if test.size == 1 or test.comm.local_size() != test.size:
        pytest.skip("needs two processes or more on one host")
    h = row_parallel_hidden(test.size)
    fd = row_parallel_linear(test.size, 1, h)
    full = global_inputs(8, 4 * h, h, seed=11)
    args = [test.shard(full[name], tv) for name, tv in zip("xw", fd.fusion.inputs())]
    (default,) = fd.execute(args)
    program = fd.last_host_ir()
    assert "type=CollectivePermute" in program and "backend=CUDA" in program, program
    assert "backend=NCCL" not in program, program
    if test.comm.local_size() <= torch.cuda.device_count():
        (nccl,) = fd.execute(args, backend=CommunicatorBackend.nccl)
        assert "type=Allreduce" in fd.last_host_ir()
        assert torch.equal(default, nccl)


def test_nccl_on_shared_gpus_is_a_value_error_on_every_rank(multidevice_test):
    """Processes sharing GPUs (MDFUSER_SHARE_DEVICES=1): NCCL would fail in
    the middle of the program, so a program that needs it is refused on
    every rank before any communication; the rings run on afterwards."""
    test = multidevice_test
    needs_gpus(test)
    if test.nccl_usable or test.size == 1:
        pytest.skip("needs processes sharing GPUs")
    h = row_parallel_hidden(test.size)
    fd = row_parallel_linear(test.size, 1, h)
    full = global_inputs(8, 4 * h, h, seed=13)
    args = [test.shard(full[name], tv) for name, tv in zip("xw", fd.fusion.inputs())]
    with pytest.raises(ValueError) as error:
        fd.execute(args, backend=CommunicatorBackend.nccl)
    message = str(error.value)
    assert "Allreduce (Communication " in message, message
    assert "runs on NCCL, which refuses two processes on one GPU" in message, message
    assert f"puts {test.comm.local_size()} processes on fewer GPUs" in message, message
    (ring,) = fd.execute(args)
    assert torch.equal(ring.cpu(), torch_linear(full, False))


def test_cpu_tensors_are_refused(multidevice_test):
    """The CUDA backend carries CUDA tensors only: a ValueError before any
    communication, on every rank alike."""
    test = multidevice_test
    h = row_parallel_hidden(test.size)
    fd = row_parallel_linear(test.size, 1, h)
    full = global_inputs(8, 4 * h, h, seed=10)
    args = [shard_tensor(full[name], tv) for name, tv in zip("xw", fd.fusion.inputs())]
    with pytest.raises(ValueError, match="CPU tensors, which only the Gloo backend carries"):
        fd.execute(args, backend=CUDA)


@pytest.mark.parametrize("pair", ["allgather_linear", "linear_reduce_scatter", "linear_allreduce"])
def test_rings_replay_as_cuda_graphs(multidevice_test, pair):
    """With the cuda_graph option a ring's moves run inside CUDA graphs:
    each replay counts on from the permutes posted before it, those of the
    same fusion's program without graphs included, so that graphs and
    runs of single statements meet in the same counters, run after run."""
    test = multidevice_test
    needs_gpus(test)
    fd, args, full_output = ring_pair(test, pair)
    for i in range(6):
        (graphed,) = fd.execute(args, backend=CUDA, _enable_options=["cuda_graph"])
        (eager,) = fd.execute(args, backend=CUDA, _disable_options=["cuda_graph"])
        expected = shard_tensor(full_output, fd.output_tensors()[0])
        assert torch.equal(graphed, eager)
        assert torch.equal(graphed.cpu(), expected if i % 2 == 0 else expected.neg())
        args[0].neg_()  # new values at the same address
    stats = fd._cache.graph_stats
    assert (stats["eager"], stats["captures"], stats["replays"]) == (1, 2, 5)
    assert fd._cache.num_programs == 2
    # Replays alone: no synchronizing call, and each equal to the last.
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        replays = [
            fd.execute(args, backend=CUDA, _enable_options=["cuda_graph"])[0].clone()
            for _ in range(4)
        ]
    finally:
        torch.cuda.set_sync_debug_mode("default")
    for replay in replays:
        assert torch.equal(replay, graphed.neg())
    assert fd._cache.graph_stats["replays"] == 9


@pytest.mark.parametrize("pair", ["allgather_linear", "linear_reduce_scatter", "linear_allreduce"])
def test_rings_replay_as_cuda_graphs_by_default(multidevice_test, pair):
    """Without options a program whose every move is the CUDA backend's is
    replayed as CUDA graphs (the second call with the same inputs captures
    it); `_disable_options=["cuda_graph"]` runs its statements. Both agree
    with torch, call after call."""
    test = multidevice_test
    needs_gpus(test)
    fd, args, full_output = ring_pair(test, pair)
    statements, _, _ = ring_pair(test, pair)
    for i in range(4):
        (default,) = fd.execute(args, backend=CUDA)
        (eager,) = statements.execute(args, backend=CUDA, _disable_options=["cuda_graph"])
        expected = shard_tensor(full_output, fd.output_tensors()[0])
        assert torch.equal(default.cpu(), expected if i % 2 == 0 else expected.neg())
        assert torch.equal(default, eager)
        args[0].neg_()
    if test.size == 1:
        # A team of one moves nothing: the program is left as it is.
        assert fd._cache.graph_stats["captures"] == 0
        return
    stats = fd._cache.graph_stats
    assert (stats["eager"], stats["captures"], stats["failed_captures"]) == (1, 2, 0), stats
    assert stats["replays"] == 3, stats
    assert statements._cache.graph_stats["captures"] == 0


@pytest.mark.parametrize("graphs", [False, True], ids=["statements", "graphs"])
@pytest.mark.parametrize("pair", ["linear_reduce_scatter", "linear_allreduce"])
def test_ring_prologues_first(multidevice_test, pair, graphs):
    """The step-0 GEMMs of every stream chunk first, chained, then the
    rings: the same values as the rings in one loop, run by run, with and
    without CUDA graphs, and no synchronizing call in the steady state."""
    test = multidevice_test
    needs_gpus(test)
    fd, args, full_output = ring_pair(test, pair)
    first = ["ring_prologues_first", *(["cuda_graph"] if graphs else [])]
    # The reduce-scatter as a ring: the pass leaves its direct form as it is.
    off = ["direct_reduce_scatter", *UNEXCHANGED, *([] if graphs else ["cuda_graph"])]
    ring = {"backend": CUDA, "_disable_options": off}
    for i in range(4):
        (split,) = fd.execute(args, _enable_options=first, **ring)
        (whole,) = fd.execute(args, backend=CUDA, _disable_options=[*off, "ring_prologues_first"])
        expected = shard_tensor(full_output, fd.output_tensors()[0])
        assert torch.equal(split, whole)
        assert torch.equal(split.cpu(), expected if i % 2 == 0 else expected.neg())
        args[0].neg_()
    (split,) = fd.execute(args, _enable_options=first, **ring)
    assert ("Synchronize(Stream max(" in fd.last_host_ir()) == (test.size > 1)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        again = [fd.execute(args, _enable_options=first, **ring)[0].clone() for _ in range(3)]
    finally:
        torch.cuda.set_sync_debug_mode("default")
    for out in again:
        assert torch.equal(out, split)


def agrees_with_the_default(test, pair: str, option: str):
    """Six calls of `pair`'s fusion with `option` enabled on the CUDA
    backend, each against the default's call (and torch) on the same
    input, negated in place between calls; replayed as CUDA graphs by
    default, statement by statement every third call. Returns the fusion
    and its arguments."""
    fd, args, full_output = ring_pair(test, pair)
    for i in range(6):
        statements = ["cuda_graph"] if i % 3 == 2 else []
        (asked,) = fd.execute(
            args, backend=CUDA, _enable_options=[option], _disable_options=statements
        )
        (default,) = fd.execute(args, backend=CUDA)
        expected = shard_tensor(full_output, fd.output_tensors()[0])
        assert torch.equal(asked, default)
        assert torch.equal(asked.cpu(), expected if i % 2 == 0 else expected.neg())
        args[0].neg_()
    return fd, args


@pytest.mark.parametrize("pair", ["allgather_linear", "linear_reduce_scatter", "linear_allreduce"])
def test_compute_on_main_stream(multidevice_test, pair):
    """The GEMMs of every stream chunk on the caller's stream, in order, the
    moves after the last one on the chunk's worker: the same values as each
    chunk on its worker whole."""
    needs_gpus(multidevice_test)
    agrees_with_the_default(multidevice_test, pair, "compute_on_main_stream")


@pytest.mark.parametrize("pair", ["linear_reduce_scatter", "linear_allreduce"])
def test_concurrent_moves(multidevice_test, pair):
    """A direct form's moves each on a communication stream (and flag
    channel) of its own: the same values as on one stream."""
    test = multidevice_test
    needs_gpus(test)
    fd, args = agrees_with_the_default(test, pair, "concurrent_moves")
    fd.execute(args, backend=CUDA, _enable_options=["concurrent_moves"])
    assert ("lane 1" in fd.last_host_ir()) == (test.size > 2)


def test_exchanged_allreduce(multidevice_test):
    """At two devices, the whole partial sums exchanged and added: the same
    values as the default, run by run, graphs and statements."""
    needs_gpus(multidevice_test)
    fd, args = agrees_with_the_default(multidevice_test, "linear_allreduce", "exchange_allreduce")
    fd.execute(args, backend=CUDA, _enable_options=["exchange_allreduce"])
    assert ("RingChunk" in fd.last_host_ir()) == (multidevice_test.size != 2)


@pytest.fixture
def cuda_machine_model(multidevice_test):
    """Sets fields of this job's CUDA machine model for one test (the same on
    every rank), the job's own model restored afterwards."""
    from mdfuser import calibration

    needs_gpus(multidevice_test)
    own = dict(calibration.ensure_machine_model(multidevice_test.device))
    yield lambda **fields: calibration.set_machine_model("cuda", {**own, **fields})
    calibration.set_machine_model("cuda", own)


def test_link_bound_allreduces_are_exchanged_by_default(multidevice_test, cuda_machine_model):
    """Left to mdfuser, the CUDA backend exchanges the partial sums of a
    stream loop's allreduce at two devices, with the GEMMs in order, where
    the machine model says the loop waits for the link: one move a chunk,
    no ring. Where the GEMM bounds the loop, with the exchange disabled, or
    over other team sizes, the direct form or the ring stays. The values
    are torch's every time."""
    test = multidevice_test
    needs_gpus(test)
    if test.size == 1:
        pytest.skip("a team of one has no allreduce")
    # A link of one byte a second, then one without cost: a new definition
    # each time, since the model is read when a program is compiled.
    for link, waits in (({"link_bytes": 1.0}, True), (FREE_LINK, False)):
        cuda_machine_model(**link)
        fd, args, full_output = ring_pair(test, "linear_allreduce")
        for options in ({}, {"_disable_options": list(UNEXCHANGED)}):
            (out,) = fd.execute(args, backend=CUDA, **options)
            assert torch.equal(out.cpu(), shard_tensor(full_output, fd.output_tensors()[0]))
            program = fd.last_host_ir()
            exchanged = waits and not options and test.size == 2
            assert ("RingChunk" not in program) == exchanged, program
            if exchanged:
                assert program.count("type=CollectivePermute") == 1, program
                # Each chunk's receive buffer is its own: posted once the
                # previous run is done, the copy waiting for the chunk's sum.
                assert "Synchronize(previous run)" in program, program
                assert "sends_after=Stream i" in program, program


# A link that moves every byte at once, with steps and statements free.
FREE_LINK = {"link_bytes": 1e30, "move_seconds": 0.0, "statement_seconds": 0.0}


@pytest.mark.parametrize("pair", ["allgather_linear", "linear_reduce_scatter"])
def test_pairs_too_short_for_a_ring_keep_their_collective(
    multidevice_test, cuda_machine_model, pair
):
    """execute's default on GPUs that reach each other rings a matmul
    collective pair outside Stream loops only where the machine model says
    the overlap pays for the ring's steps; a pair too short for them keeps
    NCCL's collective. Asking for the CUDA backend or for rings keeps the
    ring; the values are torch's either way."""
    test = multidevice_test
    if test.size == 1 or not test.nccl_usable:
        pytest.skip("needs two processes or more, each with a GPU of its own")
    d = test.size
    if pair == "allgather_linear":
        fd = allgather_linear(d, 1, 8, 4 * d)
        full = global_inputs(d * 3, 8, 4 * d, seed=410)
        collective = "Allgather"
    else:
        fd = linear_reduce_scatter(d, 1, 8 * d, 4)
        full = global_inputs(d * 2, 8 * d, 4, seed=411)
        collective = "ReduceScatter"
    expected = torch_linear(full, False)
    args = [test.shard(full[name], tv) for name, tv in zip("xw", fd.fusion.inputs())]

    def run(**options) -> str:
        (out,) = fd.execute(args, **options)
        assert torch.equal(out.cpu(), shard_tensor(expected, fd.output_tensors()[0]))
        return fd.last_host_ir()

    # Steps of a second: no overlap of these few rows pays for them.
    cuda_machine_model(move_seconds=1.0)
    program = run()
    assert "CollectivePermute" not in program, program
    assert f"type={collective}" in program and "backend=NCCL" in program, program
    assert "CollectivePermute" in run(backend=CUDA)
    assert "CollectivePermute" in run(_enable_options=["ring_decomposition"])
    # Free steps: every ring pays. A new definition: the model is read when
    # a program is compiled, once per input shape.
    cuda_machine_model(move_seconds=1e-12)
    if pair == "allgather_linear":
        fd = allgather_linear(d, 1, 8, 4 * d)
    else:
        fd = linear_reduce_scatter(d, 1, 8 * d, 4)
    program = run()
    assert "type=CollectivePermute" in program and "backend=NCCL" not in program, program
