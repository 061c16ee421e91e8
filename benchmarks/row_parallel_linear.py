# SPDX-License-Identifier: MIT
"""Row-parallel linear benchmark: mdfuser's stream overlap against PyTorch.

Each of d ranks holds inp [t, 4h/d] and w [h, 4h/d]; out = inp @ w.T is
[t, h] and allreduced. Variants: mdfuser (s stream chunks), torch_streams
(the same decomposition on manual CUDA streams), torch_no_overlap (GEMM then
allreduce), gemm_only and allreduce_only. See benchmarks/README.md.

    torchrun --nproc-per-node 8 benchmarks/row_parallel_linear.py --json r.json
    mpirun -np 8 python3 benchmarks/row_parallel_linear.py -H 8192 --chunks 1,2,4,8
    mpirun -np 2 python3 benchmarks/row_parallel_linear.py --device cpu --iters 3
"""

from __future__ import annotations

import argparse
import os
import statistics
from dataclasses import dataclass

import torch
import torch.distributed as dist
from common import (
    DTYPES,
    RunInfo,
    Timer,
    add_ratios,
    backend_variants,
    check,
    chosen_chunks,
    collective_backend,
    fmt,
    init_distributed,
    max_rel_err,
    print_table,
    run_info,
    write_json,
)

from mdfuser import DataType, FusionDefinition, ParallelType
from mdfuser.multidevice import Communicator, DeviceMesh

# Variants of the collective schedule (NCCL on GPUs, Gloo on the CPU):
# without InplaceAllreduce, the partial sums are copied into the output
# chunk before each allreduce;
COPY = ["inplace_allreduce"]
# and the GEMMs in order on the caller's stream, each chunk's allreduce on
# its worker stream.
PIPELINE = ["compute_on_main_stream"]
# The variants --trace records beside the default.
TRACED = (
    "mdfuser_nccl",
    "mdfuser_cuda",
    "mdfuser_cuda_graph",
    "mdfuser_cuda_graph_first",
    "mdfuser_cuda_pipeline",
    "mdfuser_cuda_concurrent",
    "mdfuser_cuda_exchange",
    "mdfuser_cuda_pipeline_exchange",
    "mdfuser_cuda_no_exchange",
)


COLUMNS = ["variant", "s", "median_ms", "min_ms", "TFLOP/s", "algbw_GB/s"]
COLUMNS += ["busbw_GB/s", "x_streams", "x_no_ovl", "overlap_eff", "floor"]
WIDTHS = [17, 3, 11, 9, 9, 12, 12, 11, 10, 13, 7]


@dataclass
class Result(RunInfo):
    benchmark: str
    world_size: int
    variant: str
    num_chunks: int
    h: int
    t: int
    dtype: str
    median_ms: float
    min_ms: float
    max_ms: float
    tflops: float | None  # GEMM flops per rank / median; None without a GEMM
    algbw_gbps: float | None  # t*h*elem bytes / median; None without an allreduce
    busbw_gbps: float | None  # algbw * 2(d-1)/d
    nccl_high_priority: bool
    sm_carveout: int
    vs_torch_streams: float | None = None
    vs_gemm_only: float | None = None
    vs_torch_no_overlap: float | None = None
    overlap_efficiency: float | None = None
    floor_ratio: float | None = None
    max_rel_err: float | None = None


def define(d: int, s: int | None, h: int, dtype: DataType) -> FusionDefinition:
    """The schedule of examples/row_parallel_linear.py: s stream chunks (None:
    mdfuser chooses), 4h over d."""
    with FusionDefinition() as fd:
        inp = fd.define_tensor(shape=[-1, 4 * h], contiguity=True, dtype=dtype)
        w = fd.define_tensor(shape=[h, 4 * h], contiguity=True, dtype=dtype)
        fd.add_output(fd.ops.linear(inp, w))
        mesh = DeviceMesh(torch.arange(d))
        for tv in (inp, w):
            tv.set_device_mesh(mesh)
        inp.outer_split(0, s)
        inp.axis(0).parallelize(ParallelType.stream)
        inp.outer_split(2, d)
        inp.axis(2).parallelize(ParallelType.mesh_x)
        w.outer_split(1, d)
        w.axis(1).parallelize(ParallelType.mesh_x)
    return fd


def torch_streams(inp, w, s, streams):
    """Chunk i on worker stream i: wait for main, GEMM into its rows, allreduce them."""

    def run() -> torch.Tensor:
        out = torch.empty(inp.size(0), w.size(0), dtype=inp.dtype, device=inp.device)
        chunks = zip(inp.tensor_split(s), out.tensor_split(s))
        if not streams:  # CPU: no streams, chunks run one after another
            for inp_chunk, out_chunk in chunks:
                torch.mm(inp_chunk, w.t(), out=out_chunk)
                dist.all_reduce(out_chunk)
            return out
        main = torch.cuda.current_stream()
        for stream, (inp_chunk, out_chunk) in zip(streams, chunks):
            stream.wait_stream(main)
            with torch.cuda.stream(stream):
                torch.mm(inp_chunk, w.t(), out=out_chunk)
                # Only enqueues: the worker stream, not the host, waits for NCCL.
                dist.all_reduce(out_chunk)
        for stream in streams[:s]:
            main.wait_stream(stream)
        return out

    return run


def torch_pipeline(inp, w, s):
    """GEMMs in order on the current stream; each chunk's allreduce is posted as
    soon as its GEMM is queued and runs on NCCL's stream beside the next GEMMs."""

    def run() -> torch.Tensor:
        out = torch.empty(inp.size(0), w.size(0), dtype=inp.dtype, device=inp.device)
        works = []
        for inp_chunk, out_chunk in zip(inp.tensor_split(s), out.tensor_split(s)):
            torch.mm(inp_chunk, w.t(), out=out_chunk)
            works.append(dist.all_reduce(out_chunk, async_op=True))
        for work in works:
            work.wait()
        return out

    return run


def torch_no_overlap(inp, w):
    def run() -> torch.Tensor:
        out = torch.mm(inp, w.t())
        dist.all_reduce(out)
        return out

    return run


def print_results(results: list[Result], timing: str) -> None:
    r0 = results[0]
    title = (
        f"row_parallel_linear: d={r0.world_size} h={r0.h} t={r0.t} {r0.dtype} "
        f"on {r0.device}; times by {timing}, median of the timed iterations"
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
            fmt(r.vs_torch_streams, ".3f"),
            fmt(r.vs_torch_no_overlap, ".3f"),
            fmt(r.overlap_efficiency, ".3f"),
            fmt(r.floor_ratio, ".3f"),
        ]
        for r in results
    ]
    print_table(title, COLUMNS, WIDTHS, rows)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hidden", "-H", type=int, help="h (default 8192; 256 on cpu)")
    p.add_argument("--tokens", "-t", type=int, help="t (default 8192; 256 on cpu)")
    p.add_argument("--chunks", default="1,2,4,8", help="stream chunk counts s, comma list")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=30, help="timed iterations")
    p.add_argument("--dtype", choices=DTYPES, default="bfloat16")
    p.add_argument("--json", metavar="PATH", help="write the results here (rank 0)")
    p.add_argument("--trace", metavar="DIR", help="write DIR/trace_rank<r>.json")
    p.add_argument(
        "--trace-chunks",
        help="the s of the traces, comma list (default: the largest of --chunks); "
        "with several, the files are named trace_s<s>_rank<r>.json",
    )
    p.add_argument(
        "--sm-carveout",
        type=int,
        default=0,
        help="SMs each GEMM leaves free while it overlaps communication (cuBLASLt)",
    )
    p.add_argument(
        "--nccl-high-priority",
        action="store_true",
        help="NCCL on high-priority streams, for mdfuser and torch alike",
    )
    p.add_argument(
        "--device",
        choices=("cuda", "cpu"),
        default="cuda" if torch.cuda.is_available() else "cpu",
    )
    args = p.parse_args()
    args.chunks = [int(c) for c in args.chunks.split(",")]
    small = args.device == "cpu"
    args.hidden = args.hidden or (256 if small else 8192)
    args.tokens = args.tokens or (256 if small else 8192)
    if min(args.chunks) < 1 or args.iters < 1 or args.warmup < 0:
        p.error("--chunks must be positive, --iters >= 1 and --warmup >= 0")
    args.trace_chunks = (
        [int(c) for c in args.trace_chunks.split(",")] if args.trace_chunks else [max(args.chunks)]
    )
    if not set(args.trace_chunks) <= set(args.chunks):
        p.error(f"--trace-chunks {args.trace_chunks} must be among --chunks {args.chunks}")
    return args


def run_checks(fds, inp, w, streams, rank, mdfuser_variants) -> tuple[torch.Tensor, dict]:
    """torch_no_overlap against float64; mdfuser and torch_streams against it."""
    reference = torch_no_overlap(inp, w)()
    exact = torch.mm(inp.double(), w.double().t())
    dist.all_reduce(exact)
    check("torch_no_overlap vs float64", max_rel_err(reference, exact), rank)
    errors = {}
    collective = collective_backend(inp.is_cuda)
    for s, fd in fds.items():
        errors[s] = max_rel_err(fd.execute([inp, w])[0], reference)
        check(f"mdfuser s={s} vs torch_no_overlap", errors[s], rank)
        err = max_rel_err(fd.execute([inp, w], **collective, _disable_options=COPY)[0], reference)
        check(f"mdfuser_copy s={s} vs torch_no_overlap", err, rank)
        err = max_rel_err(
            fd.execute([inp, w], **collective, _enable_options=PIPELINE)[0], reference
        )
        check(f"mdfuser_pipeline s={s} vs torch_no_overlap", err, rank)
        err = max_rel_err(torch_streams(inp, w, s, streams)(), reference)
        check(f"torch_streams s={s} vs torch_no_overlap", err, rank)
        err = max_rel_err(torch_pipeline(inp, w, s)(), reference)
        check(f"torch_pipeline s={s} vs torch_no_overlap", err, rank)
        for name, kwargs in mdfuser_variants.items():
            err = max_rel_err(fd.execute([inp, w], **kwargs)[0], reference)
            check(f"{name} s={s} vs torch_no_overlap", err, rank)
    return reference, errors


def add_torch_streams_ratio(results: list[Result]) -> None:
    """Each variant's time over torch_streams' with the same s."""
    median = {(r.variant, r.num_chunks): r.median_ms for r in results}
    for r in results:
        streams_ms = median.get(("torch_streams", r.num_chunks))
        r.vs_torch_streams = r.median_ms / streams_ms if streams_ms else None


# Whether this process has run a profile yet (write_trace).
_profiler_started = False


def write_trace(
    fd, inputs, directory: str, rank: int, timer: Timer, variant: str, tag: str = "", **kwargs
) -> None:
    """DIR/trace<tag>_rank<r>.json (the default schedule) or
    DIR/trace_<variant><tag>_rank<r>.json: one execute under torch's
    profiler."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if timer.cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    os.makedirs(directory, exist_ok=True)
    # Set up outside the trace: symmetric buffers at the first call, a CUDA
    # graph's capture at the second.
    for _ in range(2):
        fd.execute(inputs, **kwargs)
    global _profiler_started
    if not _profiler_started:
        # The process's first profile sets the profiler up while it runs,
        # which delays that call's launches on some ranks more than others:
        # the first traced call was no steady state (doc/benchmarks.md).
        with torch.profiler.profile(activities=activities):
            fd.execute(inputs, **kwargs)
            timer.sync()
        _profiler_started = True
    with torch.profiler.profile(activities=activities) as prof:
        # The profiler takes each rank a different time to start: the
        # ranks meet inside it, so that the traced call is the steady state.
        timer.sync()
        fd.execute(inputs, **kwargs)
        timer.sync()
    name = "trace" if variant == "mdfuser" else f"trace_{variant}"
    prof.export_chrome_trace(os.path.join(directory, f"{name}{tag}_rank{rank}.json"))


def main() -> None:
    args = parse_args()
    if args.nccl_high_priority:
        # Read by mdfuser's communicator when it creates its NCCL backend.
        os.environ["MDFUSER_NCCL_HIGH_PRIORITY"] = "1"
    device = init_distributed(args.device, args.nccl_high_priority)
    comm = Communicator.instance()
    rank, d = comm.rank(), comm.size()
    if (rank, d) != (dist.get_rank(), dist.get_world_size()):
        raise SystemExit(f"mdfuser says rank {rank} of {d}, torch.distributed differs")
    h, t, cuda = args.hidden, args.tokens, device.type == "cuda"
    if (4 * h) % d:
        raise SystemExit(f"4h = {4 * h} does not split across {d} ranks")
    torch_dtype, md_dtype = DTYPES[args.dtype]
    torch.manual_seed(1234 + rank)  # each rank draws its own shards
    inp = torch.randn(t, 4 * h // d, device=device).to(torch_dtype)
    w = torch.randn(h, 4 * h // d, device=device).to(torch_dtype)
    streams = [torch.cuda.Stream() for _ in range(max(args.chunks))] if cuda else []
    fds = {s: define(d, s, h, md_dtype) for s in args.chunks}
    mdfuser_variants = backend_variants(
        cuda, d, graphs=True, prologues_first=True, ring_reduce_scatter=True, exchange=True
    )
    reference, errors = run_checks(fds, inp, w, streams, rank, mdfuser_variants)
    # The default schedule with the chunk count mdfuser chooses.
    auto = define(d, None, h, md_dtype)
    check(
        "mdfuser_auto vs torch_no_overlap", max_rel_err(auto.execute([inp, w])[0], reference), rank
    )
    auto_s = chosen_chunks(auto)

    buffer = reference.clone()  # grows d-fold per allreduce; NCCL's speed doesn't care
    variants = []  # (variant, s, fn, has_gemm, has_allreduce)
    collective = collective_backend(cuda)
    for s, fd in fds.items():
        variants.append(("mdfuser", s, lambda fd=fd: fd.execute([inp, w]), 1, 1))
        copy = lambda fd=fd: fd.execute([inp, w], **collective, _disable_options=COPY)  # noqa: E731
        variants.append(("mdfuser_copy", s, copy, 1, 1))
        pipeline = lambda fd=fd: fd.execute(  # noqa: E731
            [inp, w], **collective, _enable_options=PIPELINE
        )
        variants.append(("mdfuser_pipeline", s, pipeline, 1, 1))
        variants.append(("torch_streams", s, torch_streams(inp, w, s, streams), 1, 1))
        variants.append(("torch_pipeline", s, torch_pipeline(inp, w, s), 1, 1))
        for name, kwargs in mdfuser_variants.items():
            ring = lambda fd=fd, kwargs=kwargs: fd.execute([inp, w], **kwargs)  # noqa: E731
            variants.append((name, s, ring, 1, 1))
    variants.append(("mdfuser_auto", auto_s, lambda: auto.execute([inp, w]), 1, 1))
    variants.append(("torch_no_overlap", 1, torch_no_overlap(inp, w), 1, 1))
    variants.append(("gemm_only", 1, lambda: torch.mm(inp, w.t()), 1, 0))
    variants.append(("allreduce_only", 1, lambda: dist.all_reduce(buffer), 0, 1))

    timer = Timer(device, args.warmup, args.iters)
    flops = 2 * t * (4 * h // d) * h
    nbytes = t * h * reference.element_size()
    info = run_info(device)
    common = {
        "benchmark": "row_parallel_linear",
        "device": info["device"],
        "world_size": d,
        "h": h,
        "t": t,
        "dtype": args.dtype,
        "date": info["date"],
        "command": info["command"],
        "torch_version": info["torch_version"],
        "nccl_high_priority": args.nccl_high_priority,
        "sm_carveout": args.sm_carveout,
        "nccl_env": info["nccl_env"],
    }
    results = []
    for variant, s, fn, has_gemm, has_allreduce in variants:
        # The carve-out applies where GEMMs overlap communication; the parts
        # alone and the no-overlap reference keep the whole GPU.
        overlapped = variant.startswith(("mdfuser", "torch_streams", "torch_pipeline"))
        if cuda and args.sm_carveout and overlapped:
            torch._C._set_sm_carveout_experimental(args.sm_carveout)
        times = timer(fn)
        if cuda and args.sm_carveout:
            torch._C._set_sm_carveout_experimental(None)
        median = statistics.median(times)
        algbw = nbytes / median / 1e6 if has_allreduce else None
        results.append(
            Result(
                variant=variant,
                num_chunks=s,
                median_ms=median,
                min_ms=min(times),
                max_ms=max(times),
                tflops=flops / median / 1e9 if has_gemm else None,
                algbw_gbps=algbw,
                busbw_gbps=algbw * 2 * (d - 1) / d if has_allreduce else None,
                max_rel_err=errors[s] if variant == "mdfuser" else None,
                **common,
            )
        )
    add_ratios(results, comm="allreduce_only")
    add_torch_streams_ratio(results)
    if args.trace:
        traced = {"mdfuser": {}} | {k: v for k, v in mdfuser_variants.items() if k in TRACED}
        for s in args.trace_chunks:
            tag = f"_s{s}" if len(args.trace_chunks) > 1 else ""
            for variant, kwargs in traced.items():
                write_trace(fds[s], [inp, w], args.trace, rank, timer, variant, tag, **kwargs)

    if rank == 0:
        print_results(results, "CUDA events" if cuda else "time.perf_counter (CPU, Gloo)")
        if args.json:
            write_json(args.json, results)
        if args.trace:
            print(f"wrote {args.trace}/trace*_rank<r>.json (s = {args.trace_chunks})")
    timer.sync()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
