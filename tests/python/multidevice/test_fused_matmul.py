# SPDX-License-Identifier: MIT
"""The fused allgather + GEMM and GEMM + reduce-scatter kernels
(``_enable_options=["fused_matmul_communication"]``, Hopper only) against
plain torch and the copy-engine ring on the same global inputs.

Run under ``torchrun``/``mpirun`` on GPUs of compute capability 9.0 with
the CUDA backend; skipped elsewhere (the CPU tests of the statement's choice
and program are in tests/cpp/host_ir and test_fused_matmul_option.py).
Integer entries in {-1, 0, 1} keep every sum exact in bf16 and fp16 for
k <= 256 (of each member, for the reduce-scatter's partial sums), so the
kernels must match torch bit for bit there.
"""

from __future__ import annotations

import pytest
import torch
from ring_helpers import allgather_linear, integers, linear_reduce_scatter

from mdfuser import CommunicatorBackend, DataType

FUSED_OPTION = "fused_matmul_communication"
FUSED = {"backend": CommunicatorBackend.cuda, "_enable_options": [FUSED_OPTION]}
STATEMENTS = {**FUSED, "_disable_options": ["cuda_graph"]}
DTYPES = {"bfloat16": (torch.bfloat16, DataType.BFloat16), "float16": (torch.half, DataType.Half)}
# The GEMM + reduce-scatter kernel, whose owners pull the partial sums, as
# its statement names it in the host program.
RS_KERNEL = "kernel=sm90_pulls)"


@pytest.fixture
def test(multidevice_test):
    t = multidevice_test
    if t.device.type != "cuda":
        pytest.skip("the fused kernels run on CUDA tensors")
    if torch.cuda.get_device_capability(t.device) != (9, 0):
        pytest.skip("the fused kernels are built for sm_90a (Hopper)")
    t.require(2)
    return t


def run(test, fd, x: torch.Tensor, w: torch.Tensor, **options) -> torch.Tensor:
    inputs = [test.shard(x, fd.fusion.inputs()[0]), test.shard(w, fd.fusion.inputs()[1])]
    (out,) = fd.execute(inputs, **options)
    return out


def expected_shard(test, fd, x: torch.Tensor, w: torch.Tensor, dtype) -> torch.Tensor:
    from mdfuser.multidevice import shard_tensor

    full = torch.nn.functional.linear(x.double(), w.double()).to(dtype)
    return shard_tensor(full, fd.output_tensors()[0]).to(test.device)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "rows,k,n_local",
    [
        (128, 64, 128),
        (200, 128, 24),
        (8, 64, 16),
        (300, 256, 136),
        (1100, 64, 16),
        (4096, 64, 512),
    ],
    ids=["tile_rows", "uneven_rows", "single_tile", "uneven_n", "blocks", "tiles_a_cta"],
)
def test_allgather_linear_exact(test, dtype, rows, k, n_local):
    """Rows per member a multiple of the tile, not one (a tile reading two
    members' rows), a single tile; N not a multiple of the tile; eight
    blocks of 138 rows and the last of 134, pushed side by side (blocks
    sharing tiles): these GEMMs fill less than a wave of the GPU, and the
    kernel's own CTAs push the rows. More tiles than the GPU has SMs, so
    that each CTA computes two or more in turn: the copy engines move the
    rows."""
    torch_dtype, md_dtype = DTYPES[dtype]
    d = test.size
    g = torch.Generator().manual_seed(7)
    x = integers((rows * d, k), g).to(torch_dtype)
    w = integers((n_local * d, k), g).to(torch_dtype)
    fd = allgather_linear(d, 1, k, n_local * d, dtype=md_dtype)
    out = run(test, fd, x, w, **STATEMENTS)
    program = fd.last_host_ir()
    assert "AllgatherLinear(" in program, program
    assert "CollectivePermute" not in program, program
    expected = expected_shard(test, fd, x, w, torch_dtype)
    assert torch.equal(out, expected), (out - expected).abs().max()
    # Repeated calls: the same bits, the flags back where they were.
    for _ in range(3):
        assert torch.equal(run(test, fd, x, w, **STATEMENTS), out)


def test_allgather_linear_matches_the_ring(test):
    """The reference's shape, M = N = K = 1024 (fp16, random entries; M
    the multiple of d below 1024 over three devices): within the ring's
    distance of float64, and close to the ring itself."""
    d = test.size
    g = torch.Generator().manual_seed(11)
    x = torch.randn(1024 // d * d, 1024, generator=g).half()
    w = torch.randn(1024 * d, 1024, generator=g).half()
    fd = allgather_linear(d, 1, 1024, 1024 * d, dtype=DataType.Half)
    fused = run(test, fd, x, w, **STATEMENTS)
    ring = run(test, fd, x, w, backend=CommunicatorBackend.cuda)
    assert "CollectivePermute" in fd.last_host_ir()
    exact = expected_shard(test, fd, x.double(), w.double(), torch.float64)
    ring_error = (ring.double() - exact).abs().max().item()
    fused_error = (fused.double() - exact).abs().max().item()
    assert fused_error <= max(1.5 * ring_error, 1e-2), (fused_error, ring_error)


def test_short_allgather_linear_is_fused_by_default(test):
    """Left to mdfuser, an allgather + linear too short for a ring's steps
    whose GEMM leaves SMs free (the reference's M = N = K = 1024, fp16)
    runs the kernel whose CTAs push the rows, where the collective would
    otherwise go to NCCL (no GPU shared by processes); the dump says why.
    Disabled, the collective then the GEMM. A pair as short whose GEMM
    fills the GPU (M = N = 4096 d, K = 256) keeps its collective."""
    test.require_nccl()
    d = test.size
    g = torch.Generator().manual_seed(13)
    x = torch.randn(1024 // d * d, 1024, generator=g).half()
    w = torch.randn(1024 * d, 1024, generator=g).half()
    fd = allgather_linear(d, 1, 1024, 1024 * d, dtype=DataType.Half)
    fused = run(test, fd, x, w)
    assert "AllgatherLinear(" in fd.last_host_ir(), fd.last_host_ir()
    collective = run(test, fd, x, w, _disable_options=[FUSED_OPTION])
    program = fd.last_host_ir()
    assert "AllgatherLinear(" not in program and "type=Allgather" in program, program
    exact = expected_shard(test, fd, x.double(), w.double(), torch.float64)
    collective_error = (collective.double() - exact).abs().max().item()
    fused_error = (fused.double() - exact).abs().max().item()
    assert fused_error <= max(1.5 * collective_error, 1e-2), (fused_error, collective_error)
    for _ in range(3):
        assert torch.equal(run(test, fd, x, w), fused)

    big = allgather_linear(d, 1, 256, 4096 * d)
    xb = integers((4096 * d, 256), g)
    wb = integers((4096 * d, 256), g)
    out = run(test, big, xb, wb)
    program = big.last_host_ir()
    assert "AllgatherLinear(" not in program and "type=Allgather" in program, program
    assert torch.equal(out, expected_shard(test, big, xb, wb, torch.bfloat16))


def test_allgather_linear_stream_chunks_keep_the_ring(test):
    """Inside a Stream loop the ring stays, also with the kernel asked for:
    the kernel computes the whole GEMM while the rows arrive, and the ring
    pipelines the chunks."""
    d = test.size
    g = torch.Generator().manual_seed(3)
    x = integers((256 * d, 64), g)
    w = integers((32 * d, 64), g)
    fd = allgather_linear(d, 2, 64, 32 * d)
    out = run(test, fd, x, w, **STATEMENTS)
    program = fd.last_host_ir()
    assert "AllgatherLinear(" not in program and "CollectivePermute" in program, program
    assert torch.equal(out, expected_shard(test, fd, x, w, torch.bfloat16))


def negated_calls(test, fd, inputs, options, calls: int, mark: str, x, w) -> torch.Tensor:
    """Runs `fd` `calls` times with `options`, its first input negated in
    place after each call: each program holds `mark`, and each output is
    the product of the input it was given (the even calls' `x`, the odd
    ones' -x). Returns the even calls' expected output."""
    for i in range(calls):
        (out,) = fd.execute(inputs, **options)
        assert mark in fd.last_host_ir()
        if i == 0:
            expected = expected_shard(test, fd, x, w, torch.bfloat16)
        assert torch.equal(out, expected if i % 2 == 0 else expected.neg())
        inputs[0].neg_()
    return expected


def test_allgather_linear_replays_as_a_graph(test):
    """By default a program of the fused allgather + linear is replayed as
    CUDA graphs (the first call runs its statements, the next two capture
    one each, as the caller holds the previous output; then they replay);
    asked for, too. The input is negated in place between calls, so that a
    kernel reading rows before they arrived (a flag left raised) would
    return the previous call's product."""
    d = test.size
    g = torch.Generator().manual_seed(5)
    x = integers((128 * d, 64), g)
    w = integers((64 * d, 64), g)
    for options in (FUSED, {**FUSED, "_enable_options": [FUSED_OPTION, "cuda_graph"]}):
        fd = allgather_linear(d, 1, 64, 64 * d)
        inputs = [test.shard(x, fd.fusion.inputs()[0]), test.shard(w, fd.fusion.inputs()[1])]
        negated_calls(test, fd, inputs, options, 5, "AllgatherLinear(", x, w)
        stats = fd._cache.graph_stats
        # The output each call keeps holds its graph: two take turns.
        assert (stats["eager"], stats["captures"], stats["replays"]) == (1, 2, 4), stats


def test_linear_reduce_scatter_replays_as_a_graph(test):
    """The kernel keeps its call's number in device memory: by default its
    program is replayed as CUDA graphs (one eager call, two captures, then
    replays), and asked for, too. The input is negated in place between
    calls, so that a replay whose pulls read the previous call's partial
    sums (a count or a half of the partial sums taken from the capture
    rather than the call) returns the previous product. Its statements and
    its replays then take turns on one fd: the calls' count stays the same
    on every member."""
    d = test.size
    g = torch.Generator().manual_seed(8)
    x = integers((128 * d, 64 * d), g)
    w = integers((128, 64 * d), g)
    for options in (FUSED, {**FUSED, "_enable_options": [FUSED_OPTION, "cuda_graph"]}):
        fd = linear_reduce_scatter(d, 1, 64 * d, 128)
        inputs = [test.shard(x, fd.fusion.inputs()[0]), test.shard(w, fd.fusion.inputs()[1])]
        expected = negated_calls(test, fd, inputs, options, 6, RS_KERNEL, x, w)
        stats = fd._cache.graph_stats
        assert (stats["eager"], stats["captures"], stats["replays"]) == (1, 2, 5), stats
    # The statements of the same program between replays (cuda_graph
    # disabled compiles it again; the statement and its count are shared).
    for _ in range(2):
        (out,) = fd.execute(inputs, **STATEMENTS)
        assert torch.equal(out, expected)
        inputs[0].neg_()
        (out,) = fd.execute(inputs, **FUSED)
        assert torch.equal(out, expected.neg())
        inputs[0].neg_()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "rows,k_local,n",
    [
        (128, 64, 128),
        (200, 128, 24),
        (8, 64, 16),
        (300, 256, 136),
        (256, 32, 1024),
        (1300, 64, 64),
        (4104, 32, 128),
        (4096, 32, 1024),
    ],
    ids=[
        "tile_rows",
        "uneven_rows",
        "single_tile",
        "uneven_n",
        "wide",
        "blocks",
        "many_blocks",
        "tiles_a_cta",
    ],
)
def test_linear_reduce_scatter_exact(test, dtype, rows, k_local, n):
    """Rows per member a multiple of the tile, not one (a tile holding two
    members' rows), fewer than a tile; N not a multiple of the tile; rows
    that go in 2 and 8 blocks of 650 and 513 rows (the kernel pulls blocks
    of at least 512 rows, at most 8 of them; blocks sharing tiles); more
    tiles than the GPU has SMs (128 x 256 tiles in pairs), so that each CTA
    computes two or more in turn: the cases above have at most one a
    CTA. With two devices the cases above run in one wave, and the
    partial sums go into their owner's memory, whose epilogue adds them;
    the last, and every case at d > 2, keeps them in the sender's memory,
    whence the owner's CTAs pull them."""
    torch_dtype, md_dtype = DTYPES[dtype]
    d = test.size
    g = torch.Generator().manual_seed(17)
    x = integers((rows * d, k_local * d), g).to(torch_dtype)
    w = integers((n, k_local * d), g).to(torch_dtype)
    fd = linear_reduce_scatter(d, 1, k_local * d, n, dtype=md_dtype)
    out = run(test, fd, x, w, **STATEMENTS)
    program = fd.last_host_ir()
    assert "LinearReduceScatter(" in program and RS_KERNEL in program, program
    assert "CollectivePermute" not in program, program
    expected = expected_shard(test, fd, x, w, torch_dtype)
    assert torch.equal(out, expected), (out - expected).abs().max()
    # Repeated calls: the same bits, the counters past the last call's
    # counts.
    for _ in range(3):
        assert torch.equal(run(test, fd, x, w, **STATEMENTS), out)


def test_linear_reduce_scatter_matches_the_ring(test):
    """M = N = 1024 (M the multiple of d below it over three devices), K =
    1024 per member (fp16, random entries): within the ring's distance of
    float64."""
    d = test.size
    g = torch.Generator().manual_seed(19)
    x = torch.randn(1024 // d * d, 1024 * d, generator=g).half()
    w = torch.randn(1024, 1024 * d, generator=g).half()
    fd = linear_reduce_scatter(d, 1, 1024 * d, 1024, dtype=DataType.Half)
    fused = run(test, fd, x, w, **STATEMENTS)
    assert "LinearReduceScatter(" in fd.last_host_ir() and RS_KERNEL in fd.last_host_ir()
    ring = run(test, fd, x, w, backend=CommunicatorBackend.cuda)
    assert "CollectivePermute" in fd.last_host_ir()
    exact = expected_shard(test, fd, x.double(), w.double(), torch.float64)
    ring_error = (ring.double() - exact).abs().max().item()
    fused_error = (fused.double() - exact).abs().max().item()
    assert fused_error <= max(1.5 * ring_error, 5e-2), (fused_error, ring_error)


def test_linear_reduce_scatter_stream_chunks_keep_the_ring(test):
    """Inside a Stream loop the ring (or the direct reduce-scatter) stays."""
    d = test.size
    g = torch.Generator().manual_seed(23)
    x = integers((256 * d, 32 * d), g)
    w = integers((64, 32 * d), g)
    fd = linear_reduce_scatter(d, 2, 32 * d, 64)
    out = run(test, fd, x, w, **STATEMENTS)
    program = fd.last_host_ir()
    assert "LinearReduceScatter(" not in program and "CollectivePermute" in program, program
    assert torch.equal(out, expected_shard(test, fd, x, w, torch.bfloat16))


def test_both_kernels_in_turn(test):
    """An allgather + linear and a linear + reduce-scatter of the same team,
    called in turn: their statements keep channels of their own."""
    d = test.size
    g = torch.Generator().manual_seed(29)
    x = integers((128 * d, 64), g)
    w = integers((64 * d, 64), g)
    ag = allgather_linear(d, 1, 64, 64 * d)
    xr = integers((128 * d, 64 * d), g)
    wr = integers((128, 64 * d), g)
    rs = linear_reduce_scatter(d, 1, 64 * d, 128)
    for _ in range(3):
        assert torch.equal(
            run(test, ag, x, w, **STATEMENTS), expected_shard(test, ag, x, w, torch.bfloat16)
        )
        assert torch.equal(
            run(test, rs, xr, wr, **STATEMENTS),
            expected_shard(test, rs, xr, wr, torch.bfloat16),
        )
