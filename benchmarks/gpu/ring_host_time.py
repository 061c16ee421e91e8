# SPDX-License-Identifier: MIT
"""Host time per call of the CUDA backend's rings, with and without CUDA
graphs, on a machine of one GPU: two processes share it
(MDFUSER_SHARE_DEVICES=1), so the GPU times mean little (both ranks' GEMMs
take turns on one GPU, and NCCL's references cannot run), but the host
time of a call, what bounds the k = 2048 ring pairs on two H200s
(doc/benchmarks.md), is the calling thread's own.

For each pair of ring_pairs.py at h = t = 8192 and --k (default 2048), and
the row-parallel linear + allreduce at the balanced shape of
row_parallel_linear.py (h = 1024, t = 65536), and each s: `mdfuser_cuda`
(the statements one by one, cuda_graph disabled) and `mdfuser_cuda_graph`
(the cuda_graph option); on Hopper also `linear_rs_fused`, the linear +
reduce-scatter as the fused kernel that pulls the partial sums (s = 1, the
one statement, fused_matmul_communication), the same two ways; checked
equal bit for bit, then --iters calls of each taking
turns, each call started on an idle GPU, the ranks issuing theirs one
after the other (a rank's host time is taken while the other's host is
idle; its GPU work waits for the peer's meanwhile), and --iters replays
queued back to back on both ranks at once, as a training loop issues
them (`graph_queued_us`: the host time per call of the steady state, the
median of three rounds); prints rank 0's median host µs per call and the
statements a call runs, and with --json writes them.
With --breakdown, rank 0 also prints the host time per kind of statement
of profiled calls (torch.profiler on the CPU only, so that no kernel
tracing adds to the launches; the profiler's own ranges still cost a few
µs each).

    MDFUSER_SHARE_DEVICES=1 torchrun --nproc-per-node 2 benchmarks/gpu/ring_host_time.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from dataclasses import dataclass

import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from common import (  # noqa: E402
    RunInfo,
    print_table,
    run_info,
    statements,
    write_json,
)
from ring_decomposition import allgather_linear, linear_reduce_scatter  # noqa: E402
from row_parallel_linear import define as row_parallel_linear  # noqa: E402

from mdfuser import CommunicatorBackend, DataType, PythonProfiler  # noqa: E402
from mdfuser.multidevice import Communicator, shard_tensor  # noqa: E402

CUDA = CommunicatorBackend.cuda
FUSED = ["fused_matmul_communication"]
COLUMNS = ["pair", "s", "statements", "cuda_us", "cuda_graph_us", "ratio", "graph_queued_us"]
WIDTHS = [20, 3, 11, 10, 14, 7, 16]


@dataclass
class Result(RunInfo):
    benchmark: str  # ag_linear, linear_rs, row_parallel_linear, linear_rs_fused
    num_chunks: int
    statements: int  # host-IR statements one call runs
    mdfuser_cuda_host_us: float  # median host µs per call
    mdfuser_cuda_graph_host_us: float
    # Median host µs per call of the replays with --iters calls queued back
    # to back on both ranks at once (a training loop's steady state).
    mdfuser_cuda_graph_queued_host_us: float
    world_size: int
    h: int
    t: int
    k: int
    iters: int


def pair_inputs(name: str, d: int, s: int, h: int, t: int, k: int, device):
    g = torch.Generator().manual_seed(5)
    if name == "row_parallel_linear":
        make = lambda: row_parallel_linear(d, s, h, DataType.BFloat16)  # noqa: E731
        full = [torch.randn(t, 4 * h, generator=g), torch.randn(h, 4 * h, generator=g)]
    elif name == "ag_linear":
        make = lambda: allgather_linear(d, s, k, 4 * h, dtype=DataType.BFloat16)  # noqa: E731
        full = [torch.randn(t, k, generator=g), torch.randn(4 * h, k, generator=g)]
    else:  # linear_rs, linear_rs_fused
        make = lambda: linear_reduce_scatter(d, s, d * k, h, dtype=DataType.BFloat16)  # noqa: E731
        full = [torch.randn(t, d * k, generator=g), torch.randn(h, d * k, generator=g)]
    fds = make(), make()  # one fusion per variant
    inputs = [
        shard_tensor(x.to(torch.bfloat16), tv).to(device).contiguous()
        for x, tv in zip(full, fds[0].fusion.inputs())
    ]
    return fds, inputs


def variants(name: str) -> tuple[dict, dict]:
    """execute's options of `name`'s two variants: its statements one by
    one, and replayed as CUDA graphs."""
    if name == "linear_rs_fused":
        return (
            {"backend": CUDA, "_enable_options": FUSED, "_disable_options": ["cuda_graph"]},
            {"backend": CUDA, "_enable_options": [*FUSED, "cuda_graph"]},
        )
    return (
        {"backend": CUDA, "_disable_options": ["cuda_graph"]},
        {"backend": CUDA, "_enable_options": ["cuda_graph"]},
    )


def host_breakdown(run, calls: int) -> list[list[str]]:
    """Rows (statement, per call, host µs per call, µs each) of `calls`
    profiled calls of `run`, each started on an idle GPU; loops are left
    out (their bodies' statements are counted)."""
    kinds: dict[str, list[float]] = {}
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            torch.cuda.synchronize()
            Communicator.instance().barrier()
            run()
        torch.cuda.synchronize()
    for event in prof.events():
        name = event.name.removeprefix("mdfuser::")
        if name == event.name or name == "ForLoop":
            continue
        count_us = kinds.setdefault(name, [0, 0.0])
        count_us[0] += 1
        count_us[1] += event.cpu_time_total
    ordered = sorted(kinds.items(), key=lambda kv: -kv[1][1])
    return [
        [name, f"{c / calls:g}", f"{us / calls:.1f}", f"{us / c:.2f}"] for name, (c, us) in ordered
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--k", type=int, default=2048)
    p.add_argument("--chunks", default="1,2,4")
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--json", metavar="PATH", help="write the results here (rank 0)")
    p.add_argument(
        "--breakdown", action="store_true", help="host time per kind of statement (rank 0)"
    )
    args = p.parse_args()
    comm = Communicator.instance()
    d, rank = comm.size(), comm.rank()
    device = torch.device("cuda", comm.local_rank() % torch.cuda.device_count())
    torch.cuda.set_device(device)
    rows, results = [], []
    info = run_info(device)
    names = ["ag_linear", "linear_rs", "row_parallel_linear"]
    if torch.cuda.get_device_capability(device) == (9, 0):
        names.append("linear_rs_fused")
    for name in names:
        # The row-parallel linear at its balanced shape (doc/benchmarks.md).
        h, t = (1024, 65536) if name == "row_parallel_linear" else (8192, 8192)
        # The fused statement is made outside Stream loops only.
        chunks = [1] if name == "linear_rs_fused" else args.chunks.split(",")
        for s in (int(c) for c in chunks):
            (eager_fd, graph_fd), inputs = pair_inputs(name, d, s, h, t, args.k, device)
            statements_options, graph_options = variants(name)

            def eager(fd=eager_fd, i=inputs, o=statements_options):
                return fd.execute(i, **o)

            def graphed(fd=graph_fd, i=inputs, o=graph_options):
                return fd.execute(i, **o)

            for _ in range(3):
                expected, got = eager()[0], graphed()[0]
            assert torch.equal(got, expected), f"{name} s={s}: the replay differs"
            del expected, got
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", ".*Profiler clears events")
                with PythonProfiler() as prof:
                    eager()
                    torch.cuda.synchronize()
            ops = len(statements(prof.profile))
            if args.breakdown:
                breakdown = host_breakdown(eager, calls=10)
                if rank == 0:
                    print_table(
                        f"{name} mdfuser_cuda s={s}: host time per kind of statement, "
                        "10 calls profiled on the CPU",
                        ["statement", "per_call", "host_us", "us_each"],
                        [18, 9, 9, 8],
                        breakdown,
                    )
            host = {eager: [], graphed: []}
            for i in range(args.iters):
                for run in (eager, graphed) if i % 2 == 0 else (graphed, eager):
                    torch.cuda.synchronize()
                    comm.barrier()
                    # The ranks take turns: a rank's call is timed while
                    # the others' hosts are idle and its GPU waits for
                    # theirs (the host never waits for a peer), so that
                    # neither the other process's launches nor its kernels
                    # on the shared GPU land in this rank's host time.
                    for turn in range(d):
                        if turn == rank:
                            start = time.perf_counter()
                            run()
                            host[run].append((time.perf_counter() - start) * 1e6)
                        comm.barrier()
            torch.cuda.synchronize()
            comm.barrier()
            cuda_us, graph_us = (statistics.median(host[run]) for run in (eager, graphed))
            # The replays queued: every rank issues its calls back to back,
            # as a training loop does, the GPU behind. Three rounds, the
            # median's per-call time; each round starts on an idle GPU.
            rounds = []
            for _ in range(3):
                torch.cuda.synchronize()
                comm.barrier()
                start = time.perf_counter()
                for _ in range(args.iters):
                    graphed()
                rounds.append((time.perf_counter() - start) / args.iters * 1e6)
                torch.cuda.synchronize()
                comm.barrier()
            queued_us = statistics.median(rounds)
            ratio = f"{cuda_us / graph_us:.1f}"
            rows.append(
                [
                    name,
                    str(s),
                    str(ops),
                    f"{cuda_us:.1f}",
                    f"{graph_us:.1f}",
                    ratio,
                    f"{queued_us:.1f}",
                ]
            )
            results.append(
                Result(
                    benchmark=name,
                    num_chunks=s,
                    statements=ops,
                    mdfuser_cuda_host_us=cuda_us,
                    mdfuser_cuda_graph_host_us=graph_us,
                    mdfuser_cuda_graph_queued_host_us=queued_us,
                    world_size=d,
                    h=h,
                    t=t,
                    # The local GEMM's k (the row-parallel linear's 4h / d).
                    k=4 * h // d if name == "row_parallel_linear" else args.k,
                    iters=args.iters,
                    **info,
                )
            )
    if rank == 0:
        title = (
            f"host us per call, d={d} processes sharing {torch.cuda.get_device_name(device)}, "
            f"pairs at h=t=8192 k={args.k}, row_parallel_linear at h=1024 t=65536, "
            f"median of {args.iters} calls each started on an idle GPU, the ranks in turn"
        )
        print_table(title, COLUMNS, WIDTHS, rows)
        if args.json:
            write_json(args.json, results)


if __name__ == "__main__":
    main()
