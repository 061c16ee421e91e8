# SPDX-License-Identifier: MIT
"""Agreement check benchmark: what a run costs when its inputs' signature
differs from the previous run's, so that the ranks compare what they run
through the rendezvous store first (doc/errors.md#ranks-that-disagree).

A row-parallel linear of tiny shapes (the host's cost, not the kernels')
runs `--iters` times with the same inputs (`same`: no comparison), then
with two row counts taking turns (`alternating`: a comparison at every
run). Prints the median µs per call of each, their difference (the
comparison's cost) and how many keys the rendezvous store gained per
compared run.

    mpirun -np 2 python3 benchmarks/agreement.py --device cpu
    torchrun --nproc-per-node 2 benchmarks/agreement.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from common import RunInfo, init_distributed, print_table, run_info, write_json  # noqa: E402
from row_parallel_linear import define  # noqa: E402

from mdfuser.multidevice import Communicator, shard_tensor  # noqa: E402

COLUMNS = ["variant", "us_per_call", "min_us", "store_keys_per_call"]
WIDTHS = [12, 12, 10, 20]


@dataclass
class Result(RunInfo):
    benchmark: str
    variant: str  # same, alternating
    world_size: int
    median_us: float
    min_us: float
    store_keys_per_call: float  # keys the rendezvous store gained per call
    iters: int


def timed(run, iters: int, device: torch.device) -> list[float]:
    """µs of each of `iters` calls of run(), the ranks started together."""
    dist.barrier()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        run()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e6)
    dist.barrier()
    return times


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iters", type=int, default=400)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--json", metavar="PATH")
    p.add_argument(
        "--device",
        choices=("cuda", "cpu"),
        default="cuda" if torch.cuda.is_available() else "cpu",
    )
    args = p.parse_args()
    device = init_distributed(args.device)
    comm = Communicator.instance()
    d, rank = comm.size(), comm.rank()
    h = args.hidden
    fd = define(d, 1, h)
    inputs = {}
    for rows in (8, 16):
        x = torch.randn(rows, 4 * h).to(torch.bfloat16)
        w = torch.randn(h, 4 * h).to(torch.bfloat16)
        inputs[rows] = [shard_tensor(t, tv).to(device) for t, tv in zip((x, w), fd.fusion.inputs())]
    for _ in range(5):  # compiles both programs
        fd.execute(inputs[8])
        fd.execute(inputs[16])
    store = comm._store()

    results = []
    turn = [0]

    def alternating():
        turn[0] += 1
        fd.execute(inputs[8 if turn[0] % 2 else 16])

    for variant, run in (("same", lambda: fd.execute(inputs[8])), ("alternating", alternating)):
        keys = store.num_keys()
        times = timed(run, args.iters, device)
        grown = (store.num_keys() - keys) / args.iters
        results.append(
            Result(
                benchmark="agreement",
                variant=variant,
                world_size=d,
                median_us=statistics.median(times),
                min_us=min(times),
                store_keys_per_call=grown,
                iters=args.iters,
                **run_info(device),
            )
        )
    if rank == 0:
        rows = [
            [r.variant, f"{r.median_us:.1f}", f"{r.min_us:.1f}", f"{r.store_keys_per_call:.2f}"]
            for r in results
        ]
        title = (
            f"agreement: d={d} on {results[0].device}, row-parallel linear h={h}, "
            f"median of {args.iters} calls"
        )
        print_table(title, COLUMNS, WIDTHS, rows)
        cost = results[1].median_us - results[0].median_us
        print(f"the comparison costs {cost:.1f} us per call that changes the signature")
        if args.json:
            write_json(args.json, results)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
