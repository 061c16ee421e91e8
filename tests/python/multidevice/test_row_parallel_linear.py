# SPDX-License-Identifier: MIT
"""The row-parallel linear on every process of the job.

Run with ``mpirun -np 2 pytest tests/python/multidevice`` (d = 2) or with
one process (d = 1). Each test's hidden size h is the nearest to its
nominal one whose 4h splits over the d devices (row_parallel_hidden_near).
CPU tensors communicate over Gloo, CUDA tensors over NCCL (pinned by the
tests of the program's structure); the GPU-only tests skip without CUDA.
"""

from __future__ import annotations

import os
import re

import pytest
import torch
from helpers import row_parallel_hidden_near, row_parallel_linear, run_python
from torch.profiler import ProfilerActivity, profile

from mdfuser import DataType, FusionDefinition, ParallelType
from mdfuser.multidevice import DeviceMesh


def integer_inputs(t: int, h: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Full inputs with entries in {-1, 0, 1}, the same on every rank.

    With 4h <= 256 every partial and full sum is an integer that bf16 holds
    exactly, so mdfuser's result must equal the reference exactly.
    """
    assert 4 * h <= 256
    generator = torch.Generator().manual_seed(seed)
    inp = torch.randint(-1, 2, (t, 4 * h), generator=generator).to(torch.bfloat16)
    w = torch.randint(-1, 2, (h, 4 * h), generator=generator).to(torch.bfloat16)
    return inp, w


def run(multidevice_test, fd, inp, w, **options) -> torch.Tensor:
    inp_tv, w_tv = fd.fusion.inputs()
    shards = [multidevice_test.shard(inp, inp_tv), multidevice_test.shard(w, w_tv)]
    (out,) = fd.execute(shards, **options)
    return out


@pytest.mark.parametrize(
    "h, s, t",
    [(8, 1, 16), (8, 3, 24), (16, 4, 33), (32, 2, 64), (4, 3, 2), (64, 8, 100)],
    ids=lambda v: str(v),
)
def test_result_is_exact(multidevice_test, h, s, t):
    d = multidevice_test.size
    h = row_parallel_hidden_near(h, d)
    fd = row_parallel_linear(d, s, h)
    inp, w = integer_inputs(t, h, seed=h * 1000 + s * 100 + t)
    out = run(multidevice_test, fd, inp, w)
    assert out.shape == (t, h)
    assert out.device == multidevice_test.device
    expected = torch.nn.functional.linear(inp.double(), w.double()).to(torch.bfloat16)
    assert torch.equal(out.cpu(), expected)


def test_runs_exactly_s_matmuls_of_the_chunk_shape(multidevice_test):
    d, s, t = multidevice_test.size, 4, 32
    h = row_parallel_hidden_near(16, d)
    fd = row_parallel_linear(d, s, h)
    inp, w = integer_inputs(t, h, seed=7)
    backend = multidevice_test.collective_backend
    run(multidevice_test, fd, inp, w, backend=backend)  # compile outside the profile
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        run(multidevice_test, fd, inp, w, backend=backend)
    shapes = [e.input_shapes[:2] for e in prof.events() if e.name == "aten::mm"]
    assert shapes == [[[t // s, 4 * h // d], [4 * h // d, h]]] * s


def test_host_program_structure(multidevice_test):
    d, s = multidevice_test.size, 3
    h = row_parallel_hidden_near(8, d)
    fd = row_parallel_linear(d, s, h)
    inp, w = integer_inputs(12, h, seed=3)
    run(multidevice_test, fd, inp, w, backend=multidevice_test.collective_backend)
    lines = [line.strip() for line in fd.last_host_ir().splitlines()]
    backend = "NCCL" if multidevice_test.device.type == "cuda" else "Gloo"
    team = " ".join(str(r) for r in range(d))

    loops = [i for i, line in enumerate(lines) if line.startswith("FOR ")]
    assert len(loops) == 2, "the stream loop and the join loop"
    stream_loop = lines[loops[0]]
    index = re.fullmatch(r"FOR (i\d+) from 0 to 3:", stream_loop).group(1)
    assert lines[loops[0] - 1] == "Stream 0 = GetCurrentStream()"
    assert lines[loops[0] + 1] == f"SetCurrentStream(Stream {index})"
    assert lines[loops[0] + 2] == "Synchronize(Stream 0)"
    body = lines[loops[0] + 1 : loops[1] - 1]
    communication = next(i for i, line in enumerate(body) if line.startswith("Communication 0"))
    assert f"type=Allreduce, team=({team})" in body[communication]
    assert body[communication].endswith(f"backend={backend})")
    # The linear writes the output chunk and the allreduce reduces it in place.
    chunk = re.search(r"output=(T\d+)_l___bfloat", body[communication]).group(1)
    assert f"input={chunk}_l___bfloat" in body[communication]
    assert body[communication - 3].startswith(f"{chunk}_l___bfloat")
    assert body[communication - 2].startswith("= linear(T4_l___bfloat")
    assert body[communication + 1] == "Wait(Communication 0)"
    assert not any("ALLOCATE" in line for line in body), "no temporary per chunk"
    assert lines[loops[1] - 1] == "SetCurrentStream(Stream 0)"
    join_index = re.fullmatch(r"FOR (i\d+) from 0 to 3:", lines[loops[1]]).group(1)
    assert join_index != index
    assert lines[loops[1] + 1] == f"Synchronize(Stream {join_index})"


def test_copy_before_the_allreduce_can_be_kept(multidevice_test):
    """With InplaceAllreduce disabled, the linear writes a temporary that is
    copied into the output chunk: the same result, through another program."""
    d, s, t = multidevice_test.size, 3, 13
    h = row_parallel_hidden_near(8, d)
    fd = row_parallel_linear(d, s, h)
    inp, w = integer_inputs(t, h, seed=9)
    inp_tv, w_tv = fd.fusion.inputs()
    shards = [multidevice_test.shard(inp, inp_tv), multidevice_test.shard(w, w_tv)]
    backend = multidevice_test.collective_backend
    (inplace,) = fd.execute(shards, backend=backend)
    (copied,) = fd.execute(shards, backend=backend, _disable_options=["inplace_allreduce"])
    assert torch.equal(inplace, copied)
    assert "Deallocate(T3_g___bfloat" in fd.last_host_ir()
    assert fd._cache.num_programs == 2


def test_compute_can_stay_on_the_main_stream(multidevice_test):
    """compute_on_main_stream: GEMMs in order on the caller's stream, each
    chunk's allreduce on its worker stream. Same result, other program."""
    d, s, t = multidevice_test.size, 4, 30
    h = row_parallel_hidden_near(16, d)
    fd = row_parallel_linear(d, s, h)
    inp, w = integer_inputs(t, h, seed=4)
    inp_tv, w_tv = fd.fusion.inputs()
    shards = [multidevice_test.shard(inp, inp_tv), multidevice_test.shard(w, w_tv)]
    (out,) = fd.execute(
        shards,
        backend=multidevice_test.collective_backend,
        _enable_options=["compute_on_main_stream"],
    )
    expected = torch.nn.functional.linear(inp.double(), w.double()).to(torch.bfloat16)
    assert torch.equal(out.cpu(), expected)
    lines = [line.strip() for line in fd.last_host_ir().splitlines()]
    loop = next(i for i, line in enumerate(lines) if line.startswith("FOR "))
    switch = next(
        i for i in range(loop, len(lines)) if lines[i].startswith("SetCurrentStream(Stream i")
    )
    assert any(line.startswith("= linear(") for line in lines[loop:switch])
    assert lines[switch + 2].startswith("Communication 0")


def test_bad_input_fails_on_every_rank_before_communicating(multidevice_test):
    d = multidevice_test.size
    h = row_parallel_hidden_near(8, d)
    fd = row_parallel_linear(d, 2, h)
    inp, w = integer_inputs(8, h, seed=1)
    inp_tv, _ = fd.fusion.inputs()
    bad_w = torch.zeros(7, 4 * h // d, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"input 1 \(T1\) axis 0 has local size 7"):
        fd.execute([multidevice_test.shard(inp, inp_tv), bad_w.to(multidevice_test.device)])
    # The ranks are still in step: a correct call works afterwards.
    out = run(multidevice_test, fd, inp, w)
    assert torch.equal(out.cpu(), torch.nn.functional.linear(inp, w))


def test_dump_is_printed_by_rank_zero_only(multidevice_test):
    """NVFUSER_DUMP=host_ir in a child job of the same size: each rank starts
    one child, and the children rendezvous among themselves on a port next
    to the job's."""
    base = os.environ.get("MDFUSER_PORT", os.environ.get("MASTER_PORT", "29500"))
    port = int(base) + 17
    tests_dir = os.path.dirname(os.path.dirname(__file__))
    h = row_parallel_hidden_near(8, multidevice_test.size)
    code = f"""
import sys, torch
sys.path.insert(0, {tests_dir!r})
from helpers import row_parallel_linear
from mdfuser.multidevice import Communicator, shard_tensor
fd = row_parallel_linear(Communicator.instance().size(), 2, {h})
inp_tv, w_tv = fd.fusion.inputs()
inp = torch.ones(4, {4 * h}, dtype=torch.bfloat16)
w = torch.ones({h}, {4 * h}, dtype=torch.bfloat16)
fd.execute([shard_tensor(inp, inp_tv), shard_tensor(w, w_tv)])
"""
    child = run_python(
        code,
        {
            "RANK": str(multidevice_test.rank),
            "WORLD_SIZE": str(multidevice_test.size),
            "LOCAL_RANK": str(multidevice_test.local_rank),
            "LOCAL_WORLD_SIZE": str(multidevice_test.comm.local_size()),
            "MDFUSER_PORT": str(port),
            "MDFUSER_TIMEOUT_S": "60",
            "NVFUSER_DUMP": "host_ir",
        },
    )
    assert child.returncode == 0, child.stderr
    printed = child.stdout.count("%HostIrContainer {")
    assert printed == (1 if multidevice_test.rank == 0 else 0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_caller_stream_is_current_again_after_execute(multidevice_test):
    if multidevice_test.device.type != "cuda":
        pytest.skip("fewer GPUs than local processes")
    h = row_parallel_hidden_near(16, multidevice_test.size)
    fd = row_parallel_linear(multidevice_test.size, 4, h)
    inp, w = integer_inputs(64, h, seed=5)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        out = run(multidevice_test, fd, inp, w)
        assert torch.cuda.current_stream() == side
    side.synchronize()
    expected = torch.nn.functional.linear(inp.double(), w.double()).to(torch.bfloat16)
    assert torch.equal(out.cpu(), expected)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_steady_state_never_synchronizes_the_host(multidevice_test):
    if multidevice_test.device.type != "cuda":
        pytest.skip("fewer GPUs than local processes")
    h = row_parallel_hidden_near(16, multidevice_test.size)
    fd = row_parallel_linear(multidevice_test.size, 4, h)
    inp, w = integer_inputs(64, h, seed=5)
    inp_tv, w_tv = fd.fusion.inputs()
    shards = [multidevice_test.shard(inp, inp_tv), multidevice_test.shard(w, w_tv)]
    fd.execute(shards)  # compiles and creates the communicators
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            fd.execute(shards)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_overlapped_and_one_chunk_results_round_like_bf16_partial_sums(multidevice_test):
    """Random bf16 inputs: every device's partial sum is rounded to bf16 and
    the d partials are added in bf16, in an order that depends on the
    chunking (a ring reduces each part of a chunk starting at another
    device). Both results stay within the bound of that rounding around the
    exact sum, and the overlapped one is the same at every run."""
    if multidevice_test.device.type != "cuda":
        pytest.skip("fewer GPUs than local processes")
    d, t = multidevice_test.size, 512
    h = row_parallel_hidden_near(256, d)
    generator = torch.Generator().manual_seed(11)
    inp = torch.randn(t, 4 * h, generator=generator).to(torch.bfloat16)
    w = torch.randn(h, 4 * h, generator=generator).to(torch.bfloat16)
    partials = [
        torch.nn.functional.linear(x.double(), y.double())
        for x, y in zip(inp.chunk(d, dim=1), w.chunk(d, dim=1))
    ]
    exact = sum(partials)
    # d roundings of the partials and d - 1 of the running sums, each at
    # most half a bf16 unit (2^-8 relative) of a value bounded by the sum
    # of the partials' magnitudes; twice that for cuBLAS's own ordering.
    bound = 2 * (2 * d - 1) * 2.0**-8 * sum(p.abs() for p in partials)
    one_chunk = run(multidevice_test, row_parallel_linear(d, 1, h), inp, w)
    fd = row_parallel_linear(d, 4, h)
    first = run(multidevice_test, fd, inp, w)
    for _ in range(5):
        again = run(multidevice_test, fd, inp, w)
        assert torch.equal(again, first), "a result that moves between runs is a race"
    for name, result in (("one chunk", one_chunk), ("four chunks", first)):
        excess = (result.cpu().double() - exact).abs() - bound
        assert excess.max().item() <= 0, (
            f"{name}: {(excess > 0).sum().item()} entries stray from the exact sum by "
            f"more than bf16 rounding allows (by up to {excess.max().item():.3g})"
        )


def test_column_parallel_linear_with_bias_needs_no_communication(multidevice_test):
    """The weight and bias sharded on out_features: each device computes its
    own columns, and no collective is needed."""
    d = multidevice_test.size
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, 16], dtype=DataType.Float)
        w = fd.define_tensor([4 * d, 16], dtype=DataType.Float)
        b = fd.define_tensor([4 * d], dtype=DataType.Float)
        fd.add_output(fd.ops.linear(x, w, b))
        mesh = DeviceMesh(torch.arange(d))
        for tv in (x, w, b):
            tv.set_device_mesh(mesh)
        for tv in (w, b):
            tv.outer_split(0, d)
            tv.axis(0).parallelize(ParallelType.mesh_x)
    generator = torch.Generator().manual_seed(3)
    full = [torch.randn(shape, generator=generator) for shape in ((5, 16), (4 * d, 16), (4 * d,))]
    (out,) = fd.execute([multidevice_test.shard(t, tv) for t, tv in zip(full, fd.fusion.inputs())])
    expected = torch.nn.functional.linear(*full)
    r = multidevice_test.rank
    torch.testing.assert_close(out.cpu(), expected[:, 4 * r : 4 * (r + 1)])
    assert "Communication" not in fd.last_host_ir()
