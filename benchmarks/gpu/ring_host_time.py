# SPDX-License-Identifier: MIT
"""Host time per call of the CUDA backend's rings, with and without CUDA
graphs, on a machine of one GPU: two processes share it
(MDFUSER_SHARE_DEVICES=1), so the GPU times mean little (both ranks' GEMMs
take turns on one GPU, and NCCL's references cannot run), but the host
time of a call, what bounds the k = 2048 ring pairs on two H200s
(doc/benchmarks.md), is the calling thread's own.

For each pair of ring_pairs.py at h = t = 8192 and --k (default 2048) and
each s: `mdfuser_cuda` (the statements one by one) and
`mdfuser_cuda_graph` (the cuda_graph option), checked equal bit for bit,
then --iters calls of each taking turns, each call started on an idle GPU;
prints the median host µs per call and the statements a call runs, and
with --json writes them (rank 0).

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
from common import RunInfo, print_table, run_info, statements, write_json  # noqa: E402
from ring_decomposition import allgather_linear, linear_reduce_scatter  # noqa: E402

from mdfuser import CommunicatorBackend, DataType, PythonProfiler  # noqa: E402
from mdfuser.multidevice import Communicator, shard_tensor  # noqa: E402

CUDA = CommunicatorBackend.cuda
COLUMNS = ["pair", "s", "statements", "cuda_us", "cuda_graph_us", "ratio"]
WIDTHS = [10, 3, 11, 10, 14, 7]


@dataclass
class Result(RunInfo):
    benchmark: str  # ag_linear, linear_rs
    num_chunks: int
    statements: int  # host-IR statements one call runs
    mdfuser_cuda_host_us: float  # median host µs per call
    mdfuser_cuda_graph_host_us: float
    world_size: int
    h: int
    t: int
    k: int
    iters: int


def pair_inputs(name: str, d: int, s: int, h: int, t: int, k: int, device):
    g = torch.Generator().manual_seed(5)
    if name == "ag_linear":
        make = lambda: allgather_linear(d, s, k, 4 * h, dtype=DataType.BFloat16)  # noqa: E731
        full = [torch.randn(t, k, generator=g), torch.randn(4 * h, k, generator=g)]
    else:
        make = lambda: linear_reduce_scatter(d, s, d * k, h, dtype=DataType.BFloat16)  # noqa: E731
        full = [torch.randn(t, d * k, generator=g), torch.randn(h, d * k, generator=g)]
    fds = make(), make()  # one fusion per variant
    inputs = [
        shard_tensor(x.to(torch.bfloat16), tv).to(device).contiguous()
        for x, tv in zip(full, fds[0].fusion.inputs())
    ]
    return fds, inputs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--k", type=int, default=2048)
    p.add_argument("--chunks", default="1,2,4")
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--json", metavar="PATH", help="write the results here (rank 0)")
    args = p.parse_args()
    comm = Communicator.instance()
    d, rank = comm.size(), comm.rank()
    device = torch.device("cuda", comm.local_rank() % torch.cuda.device_count())
    torch.cuda.set_device(device)
    h = t = 8192
    rows, results = [], []
    info = run_info(device)
    for name in ("ag_linear", "linear_rs"):
        for s in (int(c) for c in args.chunks.split(",")):
            (eager_fd, graph_fd), inputs = pair_inputs(name, d, s, h, t, args.k, device)

            def eager(fd=eager_fd, i=inputs):
                return fd.execute(i, backend=CUDA)

            def graphed(fd=graph_fd, i=inputs):
                return fd.execute(i, backend=CUDA, _enable_options=["cuda_graph"])

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
            host = {eager: [], graphed: []}
            for i in range(args.iters):
                for run in (eager, graphed) if i % 2 == 0 else (graphed, eager):
                    torch.cuda.synchronize()
                    comm.barrier()
                    start = time.perf_counter()
                    run()
                    host[run].append((time.perf_counter() - start) * 1e6)
            torch.cuda.synchronize()
            comm.barrier()
            cuda_us, graph_us = (statistics.median(host[run]) for run in (eager, graphed))
            ratio = f"{cuda_us / graph_us:.1f}"
            rows.append([name, str(s), str(ops), f"{cuda_us:.1f}", f"{graph_us:.1f}", ratio])
            results.append(
                Result(
                    benchmark=name,
                    num_chunks=s,
                    statements=ops,
                    mdfuser_cuda_host_us=cuda_us,
                    mdfuser_cuda_graph_host_us=graph_us,
                    world_size=d,
                    h=h,
                    t=t,
                    k=args.k,
                    iters=args.iters,
                    **info,
                )
            )
    if rank == 0:
        title = (
            f"host us per call, d={d} processes sharing {torch.cuda.get_device_name(device)}, "
            f"h=t=8192 k={args.k}, median of {args.iters} calls each started on an idle GPU"
        )
        print_table(title, COLUMNS, WIDTHS, rows)
        if args.json:
            write_json(args.json, results)


if __name__ == "__main__":
    main()
