# SPDX-License-Identifier: MIT
"""Ring pairs benchmark: the two matmul-collective pairs mdfuser lowers into rings.

ag_linear: sequence-parallel x [t, k] (tokens across d ranks) feeding a
column-parallel linear, w [4h, k] split on out_features; every rank computes
allgather(x) @ w_local^T, [t, 4h/d]. linear_rs: a row-parallel linear, x
[t, d*k] and w [h, d*k] split on in_features, its partial sums
reduce-scattered along t; every rank gets [t/d, h]. Variants: mdfuser (the
default: where the GPUs map each other's memory the CUDA backend's rings
replayed as CUDA graphs, else a collective per stream chunk), mdfuser_ring
(rings of point-to-point moves on NCCL or Gloo), mdfuser_cuda (the rings on
copy engines, statement by statement), mdfuser_graph and mdfuser_cuda_graph
(NCCL's collectives and the CUDA backend's rings replayed as CUDA graphs),
mdfuser_fused (the allgather + GEMM kernel and the GEMM + reduce-scatter
kernel whose owners pull the partial sums, of sm_90a,
_enable_options=["fused_matmul_communication"]), torch_fused (PyTorch's
async-TP ops), torch_no_overlap, gemm_only and comm_only. See
benchmarks/README.md.

    torchrun --nproc-per-node 8 benchmarks/ring_pairs.py --json rings.json
    torchrun --nproc-per-node 2 benchmarks/ring_pairs.py --benchmarks linear_rs --k 2048
    mpirun -np 2 python3 benchmarks/ring_pairs.py --device cpu --iters 3 --warmup 1
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import warnings
from dataclasses import dataclass
from typing import Callable

import torch
import torch.distributed as dist
from common import (
    DTYPES,
    QUEUE_HOLD_CYCLES,
    RunInfo,
    Timer,
    add_ratios,
    backend_variants,
    check,
    fmt,
    init_distributed,
    max_rel_err,
    print_statements,
    print_table,
    run_info,
    write_json,
)

from mdfuser import CommunicatorBackend, FusionDefinition, PythonProfiler
from mdfuser.multidevice import Communicator, shard_tensor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from ring_decomposition import allgather_linear, linear_reduce_scatter  # noqa: E402

BENCHMARKS = ("ag_linear", "linear_rs")
FUSED = "fused_matmul_communication"
COLUMNS = ["variant", "s", "median_ms", "min_ms", "TFLOP/s", "algbw_GB/s"]
COLUMNS += ["busbw_GB/s", "x_gemm", "x_no_ovl", "overlap_eff", "floor", "host_ms"]
WIDTHS = [17, 3, 11, 9, 9, 12, 12, 8, 10, 13, 7, 8]


@dataclass
class Result(RunInfo):
    benchmark: str
    world_size: int
    variant: str
    num_chunks: int
    h: int
    t: int
    m: int  # the local GEMM: [m, k] @ [k, n]
    n: int
    k: int
    dtype: str
    median_ms: float
    min_ms: float
    max_ms: float
    tflops: float | None  # 2*m*n*k / median; None without a GEMM
    algbw_gbps: float | None  # the collective's full buffer / median; None without one
    busbw_gbps: float | None  # algbw * (d-1)/d
    vs_gemm_only: float | None = None
    vs_torch_no_overlap: float | None = None
    overlap_efficiency: float | None = None
    floor_ratio: float | None = None
    max_rel_err: float | None = None
    # The calling thread's median time per call: launching, on CUDA. A call
    # whose host time exceeds its GPU time leaves the GPU idle.
    host_ms: float | None = None
    # Variants replayed as CUDA graphs: the fusion's counts after the run
    # ({"eager", "captures", "replays"}), which say whether the timed calls
    # were replays.
    graph_stats: dict | None = None


@dataclass
class Pair:
    """One benchmark's inputs, its mdfuser fusions and its torch variants."""

    name: str
    m: int
    n: int
    k: int
    comm_bytes: int  # the collective's full buffer: gathered x, or the partial sums
    out_gather_dim: int  # the axis along which the ranks' torch outputs form the global one
    fds: dict[int, FusionDefinition]
    # Another fusion like fds[s]: each mdfuser variant runs one of its own,
    # since variants taking turns on one fusion would change its options
    # every call, and every such change costs the ranks an agreement check.
    define: Callable[[int], FusionDefinition]
    inputs: dict[int, list[torch.Tensor]]  # mdfuser's local shards, per s
    x: torch.Tensor  # torch's local shards
    w: torch.Tensor
    no_overlap: Callable[[], torch.Tensor]
    fused: Callable[[str], Callable[[], torch.Tensor]]  # torch_fused, given the group's name
    parts: dict[str, Callable[[], object]]  # gemm_only and comm_only


def make_ag_linear(args, d: int, rank: int, device, chunks: list[int]) -> Pair:
    h, t, k = args.hidden, args.tokens, args.k or args.hidden
    n = 4 * h // d
    dtype, md_dtype = DTYPES[args.dtype]
    # The same global x on every rank (mdfuser's shards of it depend on s);
    # each rank draws its own weight rows.
    x_full = torch.randn(t, k, device=device, generator=generator(device, 1234)).to(dtype)
    w = torch.randn(n, k, device=device, generator=generator(device, 1235 + rank)).to(dtype)
    x = x_full.tensor_split(d)[rank].contiguous()

    def define(s: int) -> FusionDefinition:
        return allgather_linear(d, s, k, 4 * h, dtype=md_dtype)

    fds = {s: define(s) for s in chunks}
    inputs = {}
    for s, fd in fds.items():
        inputs[s] = [shard_tensor(x_full, fd.fusion.inputs()[0]).contiguous(), w]
    gathered = torch.empty_like(x_full)
    del x_full

    def no_overlap() -> torch.Tensor:
        full = torch.empty(t, k, dtype=dtype, device=device)
        dist.all_gather_into_tensor(full, x)
        return torch.mm(full, w.t())

    def fused(group: str) -> Callable[[], torch.Tensor]:
        op = torch.ops.symm_mem.fused_all_gather_matmul
        # return_A=True: the gathered x comes back (it is built anyway), and
        # torch never takes its multicast path, which needs return_A=False.
        return lambda: op(x, [w.t()], 0, group, return_A=True)[1][0]

    return Pair(
        name="ag_linear",
        m=t,
        n=n,
        k=k,
        comm_bytes=t * k * x.element_size(),
        out_gather_dim=1,
        fds=fds,
        define=define,
        inputs=inputs,
        x=x,
        w=w,
        no_overlap=no_overlap,
        fused=fused,
        parts={
            "gemm_only": lambda: torch.mm(gathered, w.t()),
            "comm_only": lambda: dist.all_gather_into_tensor(gathered, x),
        },
    )


def make_linear_rs(args, d: int, rank: int, device, chunks: list[int]) -> Pair:
    h, t = args.hidden, args.tokens
    k = args.k or 4 * h // d
    dtype, md_dtype = DTYPES[args.dtype]
    # x and w are split on k only, so mdfuser's shards are the same for every
    # s and each rank draws its own.
    x = torch.randn(t, k, device=device, generator=generator(device, 2234 + rank)).to(dtype)
    w = torch.randn(h, k, device=device, generator=generator(device, 3234 + rank)).to(dtype)

    def define(s: int) -> FusionDefinition:
        return linear_reduce_scatter(d, s, d * k, h, dtype=md_dtype)

    fds = {s: define(s) for s in chunks}
    inputs = {s: [x, w] for s in chunks}
    partial = torch.mm(x, w.t())
    scattered = torch.empty(t // d, h, dtype=dtype, device=device)

    def no_overlap() -> torch.Tensor:
        out = torch.empty(t // d, h, dtype=dtype, device=device)
        dist.reduce_scatter_tensor(out, torch.mm(x, w.t()))
        return out

    def fused(group: str) -> Callable[[], torch.Tensor]:
        op = torch.ops.symm_mem.fused_matmul_reduce_scatter
        return lambda: op(x, w.t(), "sum", 0, group)

    return Pair(
        name="linear_rs",
        m=t,
        n=h,
        k=k,
        comm_bytes=t * h * x.element_size(),
        out_gather_dim=0,
        fds=fds,
        define=define,
        inputs=inputs,
        x=x,
        w=w,
        no_overlap=no_overlap,
        fused=fused,
        parts={
            "gemm_only": lambda: torch.mm(x, w.t()),
            "comm_only": lambda: dist.reduce_scatter_tensor(scattered, partial),
        },
    )


def generator(device, seed: int) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)


def symmetric_memory_group() -> str:
    """The default group's name, registered for torch's symmetric memory
    (torch 2.11 no longer needs the registration and warns about it)."""
    # Importing it defines torch.ops.symm_mem.
    from torch.distributed import _symmetric_memory

    name = dist.group.WORLD.group_name
    register = getattr(_symmetric_memory, "enable_symm_mem_for_group", None)
    if register is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            register(name)
    return name


def mdfuser_variants(cuda: bool, d: int) -> tuple[dict[str, dict], dict[str, str]]:
    """execute's keyword arguments by mdfuser variant this run can time,
    and the reasons for those it cannot."""
    runnable = {"mdfuser": {}} | backend_variants(
        cuda, d, graphs=True, prologues_first=True, ring_reduce_scatter=True
    )
    skipped = {}
    if cuda and d > 1 and torch.cuda.get_device_capability() == (9, 0):
        # The allgather + GEMM and GEMM + reduce-scatter kernels (sm_90a),
        # replayed as CUDA graphs by default.
        runnable["mdfuser_fused"] = {
            "backend": CommunicatorBackend.cuda,
            "_enable_options": [FUSED],
        }
    elif cuda and d > 1:
        skipped["mdfuser_fused"] = "the fused kernel is built for sm_90a (Hopper)"
    if d == 1:
        reason = "d = 1: a team of one has no ring (the same program as mdfuser)"
        for variant in ("mdfuser_ring", "mdfuser_cuda", "mdfuser_graph", "mdfuser_cuda_graph"):
            skipped[variant] = reason
    elif not cuda:
        skipped["mdfuser_cuda"] = "the CUDA backend needs CUDA tensors"
        skipped["mdfuser_graph"] = skipped["mdfuser_cuda_graph"] = "CUDA graphs need CUDA tensors"
    return runnable, skipped


class Bench:
    def __init__(self, args, device: torch.device, rank: int, d: int) -> None:
        self.args, self.device, self.rank, self.d = args, device, rank, d
        self.cuda = device.type == "cuda"
        self.timer = Timer(device, args.warmup, args.iters, queued=args.queued)
        self.info = run_info(device)
        self.skipped: list[str] = []
        # The fusions of the variants replayed as CUDA graphs, by (pair,
        # variant, s).
        self.graphed: dict[tuple[str, str, int], object] = {}

    def log(self, message: str) -> None:
        if self.rank == 0:
            print(message, flush=True)

    def skip(self, name: str, reason: str) -> None:
        self.skipped.append(f"{name}: {reason}")
        self.log(f"skip: {name}: {reason}")

    def attempt(self, name: str, fn: Callable):
        """fn()'s value, or None when it raised on any rank (all ranks
        agree): for torch's fused ops, which a machine may not support."""
        value, error = None, ""
        try:
            value = fn()
        except Exception as e:  # noqa: BLE001 - the variant is skipped with the reason
            error = f"{type(e).__name__}: {e}".splitlines()[0][:300]
            print(f"rank {self.rank}: {name} failed: {error}", flush=True)
        ok = torch.tensor([0 if error else 1], device=self.device)
        dist.all_reduce(ok, op=dist.ReduceOp.MIN)
        if not ok.item():
            self.skip(name, error or "failed on another rank")
            return None
        return value

    def graph_stats(self, name: str, variant: str, s: int) -> dict | None:
        fd = self.graphed.get((name, variant, s))
        return None if fd is None else dict(fd._cache.graph_stats)

    def chunks(self, name: str) -> list[int]:
        """The --chunks whose chunks split t evenly across the devices."""
        t, d = self.args.tokens, self.d
        fit = [s for s in self.args.chunks if t % (s * d) == 0]
        for s in sorted(set(self.args.chunks) - set(fit)):
            self.skip(f"{name} s={s}", f"t = {t} does not split into {s} chunks across {d} ranks")
        return fit

    def run(self, name: str) -> list[Result]:
        make = make_ag_linear if name == "ag_linear" else make_linear_rs
        pair = make(self.args, self.d, self.rank, self.device, self.chunks(name))
        variants = self.checked(pair)
        variants += [(part, 1, fn, None) for part, fn in pair.parts.items()]
        # Timed taking turns, so that clock drift hits every variant alike.
        timed = self.timer.interleaved([fn for _, _, fn, _ in variants])
        flops = 2 * pair.m * pair.n * pair.k
        results = []
        for (variant, s, _, err), measured, host in zip(variants, timed.ms, timed.host_ms):
            median = statistics.median(measured)
            has_gemm, has_comm = variant != "comm_only", variant != "gemm_only"
            algbw = pair.comm_bytes / median / 1e6 if has_comm else None
            results.append(
                Result(
                    benchmark=name,
                    device=self.info["device"],
                    world_size=self.d,
                    variant=variant,
                    num_chunks=s,
                    h=self.args.hidden,
                    t=self.args.tokens,
                    m=pair.m,
                    n=pair.n,
                    k=pair.k,
                    dtype=self.args.dtype,
                    median_ms=median,
                    min_ms=min(measured),
                    max_ms=max(measured),
                    tflops=flops / median / 1e9 if has_gemm else None,
                    algbw_gbps=algbw,
                    busbw_gbps=algbw * (self.d - 1) / self.d if has_comm else None,
                    date=self.info["date"],
                    command=self.info["command"],
                    torch_version=self.info["torch_version"],
                    nccl_env=self.info["nccl_env"],
                    max_rel_err=err,
                    host_ms=statistics.median(host),
                    graph_stats=self.graph_stats(name, variant, s),
                )
            )
        add_ratios(results, comm="comm_only")
        if self.args.profile:
            self.profile(pair)
        return results

    def profile(self, pair: Pair) -> None:
        """--profile: where one run of each mdfuser variant at the largest s
        spends its host and device time, per kind of host-IR statement
        (rank 0)."""
        s = max(pair.fds)
        runnable, _ = mdfuser_variants(self.cuda, self.d)
        for variant, kwargs in runnable.items():
            fd = pair.define(s)
            fd.execute(pair.inputs[s], **kwargs)
            self.timer.sync()
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", ".*Profiler clears events")
                with PythonProfiler() as prof:
                    fd.execute(pair.inputs[s], **kwargs)
                    self.timer.sync()
            if self.rank == 0:
                print_statements(f"{pair.name} {variant} s={s}", prof.profile)
        if self.cuda:
            self.kernels(pair, runnable)

    def kernels(self, pair: Pair, runnable: dict[str, dict]) -> None:
        """--profile on GPUs: the CUDA kernels and copies of one call (a
        queued batch with --queued) of the GEMM alone, of the default at the
        largest s and at one chunk, and of the fused kernel (one chunk),
        rank 0: what each spends its device time on."""
        s = max(pair.fds)
        default = pair.define(s)
        runs = [
            ("gemm_only", pair.parts["gemm_only"]),
            (f"mdfuser s={s}", lambda: default.execute(pair.inputs[s])),
        ]
        if s != 1 and 1 in pair.fds:
            one = pair.define(1)
            runs.append(("mdfuser s=1", lambda: one.execute(pair.inputs[1])))
        if "mdfuser_fused" in runnable and 1 in pair.fds:
            fused, kwargs = pair.define(1), runnable["mdfuser_fused"]
            runs.append(("mdfuser_fused s=1", lambda: fused.execute(pair.inputs[1], **kwargs)))
        activities = [torch.profiler.ProfilerActivity.CUDA]
        # With --queued, a batch of that many calls enqueued behind a
        # sleeping kernel, as timed: each kernel's time where the calls run
        # back to back.
        calls = max(self.timer.queued, 1)
        for name, run in runs:
            # Set up (and, for the default, captured) outside the profile;
            # the ranks meet before the profiled call.
            for _ in range(3):
                run()
            self.timer.sync()
            with torch.profiler.profile(activities=activities) as prof:
                if self.timer.queued:
                    torch.cuda._sleep(QUEUE_HOLD_CYCLES)
                for _ in range(calls):
                    run()
                self.timer.sync()
            if self.rank == 0:
                print(f"\n{pair.name} {name}: CUDA kernels and copies of {calls} call(s), rank 0")
                print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12))

    def checked(self, pair: Pair) -> list[tuple[str, int, Callable, float | None]]:
        """Every variant that runs here, checked against torch_no_overlap:
        (variant, s, fn, error)."""
        reference = pair.no_overlap()
        exact = self.float64_reference(pair)
        check(f"{pair.name} torch_no_overlap vs float64", max_rel_err(reference, exact), self.rank)
        del exact
        # mdfuser's outputs are laid out by its fusion (by s for linear_rs):
        # compare them with its shard of torch's global output.
        ranks = [torch.empty_like(reference) for _ in range(self.d)]
        dist.all_gather(ranks, reference)
        full = torch.cat(ranks, pair.out_gather_dim)
        del ranks
        checked = []
        runnable, skipped = mdfuser_variants(self.cuda, self.d)
        for variant, reason in skipped.items():
            self.skip(f"{pair.name} {variant}", reason)
        for s, first in pair.fds.items():
            inputs, expected = pair.inputs[s], None
            for variant, kwargs in runnable.items():
                name = f"{pair.name} {variant} s={s}"
                fd = first if variant == "mdfuser" else pair.define(s)
                run = lambda fd=fd, i=inputs, kw=kwargs: fd.execute(i, **kw)[0]  # noqa: E731
                asked = kwargs.get("_enable_options", [])
                # mdfuser failing is a bug: it ends the run, not skips a row.
                out = run()
                # The variants that ask for rings (the default has them only
                # where the CUDA backend is its choice).
                ringed = (
                    kwargs.get("backend") == CommunicatorBackend.cuda
                    or "ring_decomposition" in asked
                )
                mark = "CollectivePermute"
                if FUSED in asked:
                    mark = "AllgatherLinear" if pair.name == "ag_linear" else "LinearReduceScatter"
                if ringed and not self.has_ring(fd.last_host_ir(), mark):
                    self.skip(name, f"the program has no {mark}")
                    continue
                if expected is None:  # the output's layout is known once it ran
                    expected = shard_tensor(full, fd.output_tensors()[0])
                err = max_rel_err(out, expected)
                check(f"{name} vs torch_no_overlap", err, self.rank)
                checked.append((variant, s, run, err))
                if "cuda_graph" in asked:
                    self.graphed[(pair.name, variant, s)] = fd
        del full
        checked.append(("torch_no_overlap", 1, pair.no_overlap, None))
        name = f"{pair.name} torch_fused"
        if not self.cuda:
            self.skip(name, "torch's symmetric memory needs CUDA")
            return checked
        group = self.attempt(f"{name} setup", symmetric_memory_group)
        run = None if group is None else pair.fused(group)
        out = None if run is None else self.attempt(name, run)
        if out is not None:
            err = max_rel_err(out, reference)
            check(f"{name} vs torch_no_overlap", err, self.rank)
            checked.append(("torch_fused", 1, run, err))
        return checked

    def has_ring(self, program: str, mark: str = "CollectivePermute") -> bool:
        """Whether every rank's program moves data in rings, or with `mark`
        the statement it names (all ranks agree)."""
        ring = torch.tensor([int(mark in program)], device=self.device)
        dist.all_reduce(ring, op=dist.ReduceOp.MIN)
        return bool(ring.item())

    def float64_reference(self, pair: Pair) -> torch.Tensor:
        """torch_no_overlap's collective and GEMM in float64."""
        x, w = pair.x.double(), pair.w.double()
        if pair.name == "ag_linear":
            full = torch.empty(pair.m, pair.k, dtype=torch.float64, device=self.device)
            dist.all_gather_into_tensor(full, x)
            return torch.mm(full, w.t())
        out = torch.empty(pair.m // self.d, pair.n, dtype=torch.float64, device=self.device)
        dist.reduce_scatter_tensor(out, torch.mm(x, w.t()))
        return out


def print_results(results: list[Result], timing: str, skipped: list[str]) -> None:
    r0 = results[0]
    title = (
        f"{r0.benchmark}: d={r0.world_size} h={r0.h} t={r0.t}, local GEMM m={r0.m} n={r0.n} "
        f"k={r0.k}, {r0.dtype} on {r0.device}; times by {timing}, median of the timed "
        "iterations, variants timed in turns"
    )
    rows = [
        [
            r.variant,
            str(r.num_chunks),
            f"{r.median_ms:.3f}",
            f"{r.min_ms:.3f}",
            fmt(r.tflops, ".4g"),
            fmt(r.algbw_gbps, ".4g"),
            fmt(r.busbw_gbps, ".4g"),
            fmt(r.vs_gemm_only, ".3f"),
            fmt(r.vs_torch_no_overlap, ".3f"),
            fmt(r.overlap_efficiency, ".3f"),
            fmt(r.floor_ratio, ".3f"),
            fmt(r.host_ms, ".3f"),
        ]
        for r in results
    ]
    print_table(title, COLUMNS, WIDTHS, rows)
    mine = [line for line in skipped if line.startswith(r0.benchmark)]
    if mine:
        print("skipped: " + "; ".join(mine))


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--benchmarks", default=",".join(BENCHMARKS), help="comma list")
    p.add_argument("--hidden", "-H", type=int, help="h (default 8192; 256 on cpu)")
    p.add_argument("--tokens", "-t", type=int, help="t (default 8192; 256 on cpu)")
    p.add_argument(
        "--k",
        type=int,
        help="the local GEMM's reduction size (default: h for ag_linear, 4h/d for linear_rs)",
    )
    p.add_argument("--chunks", default="1,2,4", help="stream chunk counts s, comma list")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=30, help="timed iterations")
    p.add_argument("--dtype", choices=DTYPES, default="bfloat16")
    p.add_argument(
        "--queued",
        type=int,
        default=0,
        metavar="N",
        help="time batches of N calls run back to back from a held stream: the GPU's "
        "time per call where launching takes longer (the reference's 1024^3 shape)",
    )
    p.add_argument("--json", metavar="PATH", help="write the results here (rank 0)")
    p.add_argument(
        "--profile",
        action="store_true",
        help="print each mdfuser variant's host-IR statements at the largest s (rank 0)",
    )
    p.add_argument(
        "--device",
        choices=("cuda", "cpu"),
        default="cuda" if torch.cuda.is_available() else "cpu",
    )
    args = p.parse_args()
    args.benchmarks = args.benchmarks.split(",")
    if not set(args.benchmarks) <= set(BENCHMARKS):
        p.error(f"--benchmarks takes {','.join(BENCHMARKS)}")
    args.chunks = [int(c) for c in args.chunks.split(",")]
    small = args.device == "cpu"
    args.hidden = args.hidden or (256 if small else 8192)
    args.tokens = args.tokens or (256 if small else 8192)
    if min(args.chunks) < 1 or args.iters < 1 or args.warmup < 0:
        p.error("--chunks must be positive, --iters >= 1 and --warmup >= 0")
    if args.k is not None and args.k < 1:
        p.error("--k must be positive")
    return args


def main() -> None:
    args = parse_args()
    # Never multicast objects on the shared machines (torch's symmetric memory).
    os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    device = init_distributed(args.device)
    comm = Communicator.instance()
    rank, d = comm.rank(), comm.size()
    if (rank, d) != (dist.get_rank(), dist.get_world_size()):
        raise SystemExit(f"mdfuser says rank {rank} of {d}, torch.distributed differs")
    if (4 * args.hidden) % d or args.tokens % d:
        raise SystemExit(f"4h = {4 * args.hidden} and t = {args.tokens} must split across {d}")
    bench = Bench(args, device, rank, d)
    timing = "CUDA events" if bench.cuda else "time.perf_counter (CPU, Gloo)"
    records = []
    for name in args.benchmarks:
        results = bench.run(name)
        records += results
        if rank == 0:
            print_results(results, timing, bench.skipped)
    if rank == 0 and args.json:
        write_json(args.json, records)
    bench.timer.sync()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
