# SPDX-License-Identifier: MIT
"""mdfuser's overlap benchmarks as pytest-benchmark tests, run as the users
of nvFuser's multidevice tests run theirs:

    mpirun -np 2 pytest tests/python/multidevice/test_overlap_benchmarks.py --only-mpi -k benchmark

(or torchrun). Each times one call of a program on every rank, after
checking its result against torch on the same global inputs: the
row-parallel linear and its allreduce at each stream chunk count and at the
count mdfuser chooses, and the allgather + linear and linear +
reduce-scatter pairs. They run on GPUs (h = t = 8192, bf16) and skip on
the CPU, where MDFUSER_BENCHMARK_ON_CPU=1 runs them at small sizes to try
the harness. benchmarks/row_parallel_linear.py and benchmarks/ring_pairs.py
remain the measurements doc/benchmarks.md reports, with torch's references
timed in the same run.
"""

from __future__ import annotations

import os

import pytest
import torch
from helpers import row_parallel_linear
from ring_decomposition import allgather_linear, linear_reduce_scatter

from mdfuser import DataType
from mdfuser.multidevice import shard_tensor

pytest.importorskip("pytest_benchmark")

ON_CPU = os.environ.get("MDFUSER_BENCHMARK_ON_CPU") == "1"


@pytest.fixture
def bench(multidevice_test):
    test = multidevice_test
    if test.device.type != "cuda" and not ON_CPU:
        pytest.skip("the benchmarks run on GPUs (MDFUSER_BENCHMARK_ON_CPU=1 runs them here)")
    test.require(2)
    return test


def sizes(test) -> tuple[int, int, torch.dtype, DataType]:
    """(h, t, dtype, mdfuser's dtype): GPT-3's hidden size on GPUs, a small
    one on the CPU."""
    if test.device.type == "cuda":
        return 8192, 8192, torch.bfloat16, DataType.BFloat16
    return 64 * test.size, 64, torch.float32, DataType.Float


def timed(benchmark, test, fn):
    """One call per round, the device drained after it."""

    def call():
        out = fn()
        if test.device.type == "cuda":
            torch.cuda.synchronize(test.device)
        return out

    return benchmark.pedantic(call, rounds=20, warmup_rounds=3, iterations=1)


def global_inputs(test, seed: int, *shapes: tuple[int, ...], dtype: torch.dtype):
    """The same global tensors on every rank, drawn on the rank's device
    (drawing and checking 8192 x 32768 operands on the host would take
    minutes)."""
    g = torch.Generator(test.device).manual_seed(seed)
    return [torch.randn(*shape, generator=g, device=test.device).to(dtype) for shape in shapes]


def reference_linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """torch's linear of the same global inputs, in float64 on the CPU and
    float32 on GPUs."""
    wide = torch.float64 if x.device.type == "cpu" else torch.float32
    return torch.nn.functional.linear(x.to(wide), w.to(wide))


def close(got: torch.Tensor, want: torch.Tensor) -> None:
    tol = 2e-2 if got.dtype == torch.bfloat16 else 1e-4
    torch.testing.assert_close(
        got.float(), want.float(), rtol=tol, atol=tol * want.abs().max().item()
    )


@pytest.mark.mpi
@pytest.mark.parametrize("s", [1, 2, 4, None], ids=["s1", "s2", "s4", "s_auto"])
def test_row_parallel_linear_benchmark(bench, benchmark, s):
    test = bench
    h, t, dtype, md_dtype = sizes(test)
    fd = row_parallel_linear(test.size, s, h, dtype=md_dtype)
    inp, w = global_inputs(test, 1, (t, 4 * h), (h, 4 * h), dtype=dtype)
    inp_tv, w_tv = fd.fusion.inputs()
    args = [test.shard(inp, inp_tv), test.shard(w, w_tv)]
    (out,) = fd.execute(args)
    close(out, reference_linear(inp, w))
    del inp, w
    timed(benchmark, test, lambda: fd.execute(args))
    benchmark.extra_info.update(
        {"tflops_per_call": 2 * t * 4 * h * h / test.size / 1e12, "world_size": test.size}
    )


@pytest.mark.mpi
@pytest.mark.parametrize("pair", ["allgather_linear", "linear_reduce_scatter"])
def test_ring_pair_benchmark(bench, benchmark, pair):
    test = bench
    h, t, dtype, md_dtype = sizes(test)
    d, k, n = test.size, h, 4 * h
    if pair == "allgather_linear":
        fd = allgather_linear(d, 2, k, n, dtype=md_dtype)
        x_shape, w_shape = (t, k), (n, k)
    else:
        fd = linear_reduce_scatter(d, 2, n, k, dtype=md_dtype)
        x_shape, w_shape = (t, n), (k, n)
    x, w = global_inputs(test, 2, x_shape, w_shape, dtype=dtype)
    x_tv, w_tv = fd.fusion.inputs()
    args = [test.shard(x, x_tv), test.shard(w, w_tv)]
    (out,) = fd.execute(args)
    close(out, shard_tensor(reference_linear(x, w), fd.output_tensors()[0]))
    del x, w
    timed(benchmark, test, lambda: fd.execute(args))
    benchmark.extra_info.update({"tflops_per_call": 2 * t * k * n / d / 1e12, "world_size": d})
