# SPDX-License-Identifier: MIT
"""Transformer block benchmark: mdfuser's TP and SP fusions against PyTorch.

The MLP, the attention block and the whole pre-norm layer of
examples/transformer_blocks.py, forward, tensor-parallel (tp) and
sequence-parallel (sp), on d ranks. Variants: mdfuser (s stream chunks),
torch_no_overlap (the same decomposition by hand: torch ops and
torch.distributed collectives), torch_streams (that reference with the
tokens, or the batch, split into s chunks on s CUDA streams), and the host
overhead of mdfuser per host-IR statement on a tiny shape. See
benchmarks/README.md. The cases and the PyTorch reference are in
blocks_reference.py, the records and tables in blocks_report.py.

    torchrun --nproc-per-node 2 benchmarks/transformer_blocks.py --json blocks.json
    mpirun -np 2 python3 benchmarks/transformer_blocks.py --device cpu --iters 3
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections.abc import Callable

import torch
import torch.distributed as dist
from blocks_reference import (
    Attention,
    Case,
    chunk_axis,
    communication_only,
    float64_reference,
    gather,
    global_inputs,
    local_tokens,
    local_weights,
    reference,
    torch_no_overlap,
    torch_streams,
)
from blocks_report import Result, add_ratios, print_host_overhead, print_results
from common import (
    DTYPES,
    TOLERANCE,
    Timer,
    backend_variants,
    chosen_chunks,
    init_distributed,
    max_rel_err,
    print_statements,
    run_info,
    statements,
    write_json,
)

from mdfuser import PythonProfiler
from mdfuser.multidevice import Communicator, shard_tensor

BLOCKS = ("mlp", "attention", "layer")
MODES = ("tp", "sp")
# The default schedule with its host-IR statements run one by one, as the
# profiler sees them, in place of a replayed CUDA graph.
STATEMENT_BY_STATEMENT = {"_disable_options": ["cuda_graph"]}


# --- running, checking and timing -----------------------------------------


class Run:
    """One rank's state: the group, the timer and the records."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.device = init_distributed(args.device)
        comm = Communicator.instance()
        self.rank, self.d = comm.rank(), comm.size()
        if (self.rank, self.d) != (dist.get_rank(), dist.get_world_size()):
            raise SystemExit(
                f"mdfuser says rank {self.rank} of {self.d}, torch.distributed differs"
            )
        self.cuda = self.device.type == "cuda"
        self.torch_dtype, self.md_dtype = DTYPES[args.dtype]
        self.timer = Timer(self.device, args.warmup, args.iters)
        self.streams = [torch.cuda.Stream() for _ in range(max(args.chunks))] if self.cuda else []
        self.info = run_info(self.device)
        self.results: list[Result] = []
        self.failures: list[str] = []

    def log(self, message: str) -> None:
        if self.rank == 0:
            print(message, flush=True)

    def attempt(self, name: str, fn: Callable):
        """fn()'s value, or None when it raised on any rank (all ranks agree)."""
        value, error = None, ""
        try:
            value = fn()
        except Exception as e:  # noqa: BLE001 - reported, and the run goes on
            error = f"{type(e).__name__}: {e}".splitlines()[0][:400]
            print(f"rank {self.rank}: {name} failed: {error}", flush=True)
        ok = torch.tensor([0 if error else 1], device=self.device)
        dist.all_reduce(ok, op=dist.ReduceOp.MIN)
        if not ok.item():
            self.failures.append(f"{name}: {error or 'failed on another rank'}")
            return None, error or "failed on another rank"
        return value, None

    def ring_variants(self) -> dict[str, dict]:
        """With --rings (d > 1): the other backends' programs beside the
        default (common.backend_variants); execute's keyword arguments by
        variant."""
        if not self.args.rings:
            return {}
        # Every block's rings are its only communications: its CUDA-backend
        # programs replay as graphs.
        return backend_variants(self.cuda, self.d, graphs=True, exchange=True)

    def record(self, case: Case, variant: str, s: int, times, **extra) -> Result:
        a = case.attention
        median = statistics.median(times) if times else None
        flops = None if variant.startswith(("host_overhead", "comm_only")) else case.flops(self.d)
        result = Result(
            benchmark=f"transformer_{case.block}",
            mode=case.mode,
            device=self.info["device"],
            world_size=self.d,
            variant=variant,
            num_chunks=s,
            h=case.h,
            t=case.t,
            seq=None if a is None else a.seq,
            batch=None if a is None else a.batch,
            heads=None if a is None else a.heads,
            dtype=self.args.dtype,
            median_ms=median,
            min_ms=min(times) if times else None,
            max_ms=max(times) if times else None,
            tflops=flops / median / 1e9 if median and flops else None,
            date=self.info["date"],
            command=self.info["command"],
            torch_version=self.info["torch_version"],
            nccl_env=self.info["nccl_env"],
            **extra,
        )
        self.results.append(result)
        return result

    def shard_inputs(self, block, full: dict) -> list[torch.Tensor]:
        return [shard_tensor(full[k], tv).contiguous() for k, tv in block.inputs.items()]

    def bench(self, case: Case) -> None:
        """Checks every variant against torch_no_overlap, then times them."""
        d, rank, args = self.d, self.rank, self.args
        full = global_inputs(case, self.device, self.torch_dtype, seed=1234)
        w = local_weights(full, d, rank)
        fn = reference(case, w, d)
        sp = case.mode == "sp"
        x_ref = local_tokens(full["x"], d, rank) if sp else full["x"]
        name = f"{case.block} {case.mode}"

        ref, error = self.attempt(f"{name} torch_no_overlap", torch_no_overlap(fn, x_ref))
        if error:
            self.record(case, "torch_no_overlap", 1, [], error=error)
            return
        global_ref = gather(ref, d) if sp else ref
        want, part = float64_reference(case, full)
        err = max_rel_err(global_ref[:, part], want)
        self.log(f"check: {name}: torch_no_overlap vs float64: max relative error {err:.2e}")
        if not err <= TOLERANCE:
            self.failures.append(
                f"{name}: torch_no_overlap is off the float64 reference ({err:.2e})"
            )
        del want

        variants = [("torch_no_overlap", 1, torch_no_overlap(fn, x_ref), None)]
        profiled = {}  # s -> (block, inputs) for --profile
        for s in args.chunks:
            block, error = self.attempt(
                f"{name} mdfuser s={s} definition", lambda s=s: case.define(d, s, self.md_dtype)
            )
            if error:
                self.record(case, "mdfuser", s, [], error=error)
            else:
                inputs = self.shard_inputs(block, full)
                outputs, error = self.attempt(
                    f"{name} mdfuser s={s}", lambda b=block, i=inputs: b.fd.execute(i)
                )
                if error:
                    self.record(case, "mdfuser", s, [], error=error)
                else:
                    expected = shard_tensor(global_ref, block.fd.output_tensors()[0])
                    run = lambda b=block, i=inputs: b.fd.execute(i)  # noqa: E731
                    variants.append(("mdfuser", s, run, (outputs[0], expected)))
                    profiled[s] = block, inputs
                    for variant, kwargs in self.ring_variants().items():
                        # A fusion of its own: variants taking turns on one
                        # fusion would change its options every call, and
                        # every such change costs the ranks an agreement
                        # check (doc/errors.md).
                        other = case.define(d, s, self.md_dtype)
                        other_inputs = self.shard_inputs(other, full)
                        ring = lambda b=other, i=other_inputs, kw=kwargs: b.fd.execute(i, **kw)  # noqa: E731
                        got, error = self.attempt(f"{name} {variant} s={s}", ring)
                        if error:
                            self.record(case, variant, s, [], error=error)
                        else:
                            variants.append((variant, s, ring, (got[0], expected)))
            # SP's MLP rows follow mdfuser's layout for s chunks; attention
            # and layer split the batch, which SP leaves whole.
            x = local_tokens(full["x"], d, rank, s) if sp and case.block == "mlp" else x_ref
            streams = torch_streams(fn, x, chunk_axis(case), s, self.streams)
            got, error = self.attempt(f"{name} torch_streams s={s}", streams)
            if error:
                self.record(case, "torch_streams", s, [], error=error)
                continue
            if sp and case.block == "mlp":
                expected = local_tokens(global_ref, d, rank, s)
            else:
                expected = ref
            variants.append(("torch_streams", s, streams, (got, expected)))

        self.add_auto(case, name, full, global_ref, variants)
        errors = {}
        for variant, s, _, pair in variants[1:]:
            err = max_rel_err(*pair)
            self.log(f"check: {name}: {variant} s={s} vs torch_no_overlap: {err:.2e}")
            errors[(variant, s)] = err
        timed = [(variant, s, run) for variant, s, run, _ in variants]
        del full, global_ref, variants  # the checked outputs
        # The parts alone, unchecked (compute_only's SP output is not the block's).
        timed.append(("compute_only", 1, torch_no_overlap(reference(case, w, d, False), x_ref)))
        timed.append(("comm_only", 1, communication_only(case, x_ref, d)))

        rows = []
        checked = []
        for variant, s, run in timed:
            err = errors.get((variant, s))
            if err is not None and not err <= TOLERANCE:  # NaN fails too
                message = f"max relative error {err:.2e} > {TOLERANCE:g} against torch_no_overlap"
                self.failures.append(f"{name} {variant} s={s}: {message}")
                rows.append(self.record(case, variant, s, [], max_rel_err=err, error=message))
                continue
            checked.append((variant, s, run, err))
        # Timed taking turns, so that clock drift does not favour the
        # variants timed first.
        times, error = self.attempt(
            f"{name} timing", lambda: self.timer.interleaved([c[2] for c in checked]).ms
        )
        for k, (variant, s, _, err) in enumerate(checked):
            measured = times[k] if times else []
            rows.append(self.record(case, variant, s, measured, max_rel_err=err, error=error))
        add_ratios(rows)
        if rank == 0:
            print_results(rows, "CUDA events" if self.cuda else "time.perf_counter (CPU, Gloo)")
        if args.profile:
            self.profile(case, profiled, torch_no_overlap(fn, x_ref))

    def add_auto(self, case: Case, name: str, full: dict, global_ref, variants: list) -> None:
        """mdfuser_auto: the default schedule with the stream chunk count
        mdfuser chooses. TP only: SP splits each chunk's tokens across the
        devices, so the count would decide the inputs' layout."""
        if case.mode == "sp":
            self.log(f"skip: {name} mdfuser_auto: SP lays its tokens out by the chunk count")
            return
        block, error = self.attempt(
            f"{name} mdfuser_auto", lambda: case.define(self.d, None, self.md_dtype)
        )
        inputs = None if error else self.shard_inputs(block, full)
        outputs, error = (
            (None, error)
            if error
            else self.attempt(f"{name} mdfuser_auto", lambda: block.fd.execute(inputs))
        )
        if error:
            self.record(case, "mdfuser_auto", 0, [], error=error)
            return
        s = chosen_chunks(block.fd)
        expected = shard_tensor(global_ref, block.fd.output_tensors()[0])
        run = lambda: block.fd.execute(inputs)  # noqa: E731
        variants.append(("mdfuser_auto", s, run, (outputs[0], expected)))

    def profile(self, case: Case, profiled: dict, reference_run: Callable) -> None:
        """--profile: where one mdfuser run per s spends its time, per kind
        of host-IR statement, and the CUDA kernels of torch_no_overlap.
        Statements are seen only when they run one by one, so the profiled
        run does not replay a CUDA graph."""
        for s, (block, inputs) in profiled.items():
            self.timer.sync()
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", ".*Profiler clears events")
                with PythonProfiler() as prof:
                    block.fd.execute(inputs, **STATEMENT_BY_STATEMENT)
                    self.timer.sync()
            if self.rank == 0:
                print_statements(f"{case.block} {case.mode} mdfuser s={s}", prof.profile)
        if not self.cuda:
            return
        # The kernels of torch's run and of mdfuser's first s, side by side.
        s, (block, inputs) = next(iter(profiled.items()))
        runs = [
            ("torch_no_overlap", reference_run),
            (f"mdfuser s={s}", lambda: block.fd.execute(inputs)),
        ]
        for name, run in runs:
            self.timer.sync()
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                run()
                self.timer.sync()
            if self.rank == 0:
                print(f"\n{case.block} {case.mode} {name}: CUDA kernels, rank 0")
                print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=14))

    def host_overhead(self, case: Case, s: int) -> None:
        """execute()'s host time per host-IR statement on a tiny shape: each
        call runs on an idle GPU, so the host is never held up by a full
        launch queue; statements counted by PythonProfiler, run one by one
        (a replayed CUDA graph has none: graph_host_overhead times it)."""
        name = f"{case.block} {case.mode} host overhead"
        block, error = self.attempt(name, lambda: case.define(self.d, s, self.md_dtype))
        if error:
            self.record(case, "host_overhead", s, [], error=error)
            return
        full = global_inputs(case, self.device, self.torch_dtype, seed=99)
        inputs = self.shard_inputs(block, full)

        def run():
            return block.fd.execute(inputs, **STATEMENT_BY_STATEMENT)

        def measure():
            for _ in range(5):
                run()
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", ".*Profiler clears events")
                with PythonProfiler() as prof:
                    run()
            ops = len(statements(prof.profile))
            if self.args.profile and self.rank == 0:
                print_statements(f"{case.block} {case.mode} host overhead s={s}", prof.profile)
            return (ops, *self.host_times(run))

        measured, error = self.attempt(name, measure)
        if not error and not measured[0]:
            error = "the profiler saw no host-IR statement"
        if error:
            self.record(case, "host_overhead", s, [], error=error)
            return
        self.record_host(case, "host_overhead", s, *measured)
        if self.cuda and self.d == 1:
            self.graph_host_overhead(case, s, block, inputs, measured[0])
        if self.cuda:
            self.torch_host_overhead(case, full)

    def graph_host_overhead(self, case: Case, s: int, block, inputs: list, ops: int) -> None:
        """The same calls replayed as CUDA graphs (the cuda_graph option, at
        d = 1, where the programs have no collective): the host time of one
        launch in place of the `ops` statements, per statement replaced."""

        def run():
            return block.fd.execute(inputs, _enable_options=["cuda_graph"])

        def measure():
            for _ in range(5):
                run()
            return (ops, *self.host_times(run))

        measured, error = self.attempt(f"{case.block} {case.mode} graph host overhead", measure)
        if error:
            self.record(case, "host_overhead_graph", s, [], error=error)
            return
        self.record_host(case, "host_overhead_graph", s, *measured)

    def torch_host_overhead(self, case: Case, full: dict) -> None:
        """The reference's host time per CUDA kernel it launches, on the same
        tiny shape: what one ATen call costs the host on this machine, the
        floor of a host-IR statement that runs one."""
        d, rank = self.d, self.rank
        w = local_weights(full, d, rank)
        x = local_tokens(full["x"], d, rank) if case.mode == "sp" else full["x"]
        run = torch_no_overlap(reference(case, w, d), x)

        def measure():
            for _ in range(5):
                run()
            self.timer.sync()
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                run()
                self.timer.sync()
            kernels = sum(e.count for e in prof.key_averages() if e.device_type.name == "CUDA")
            return (kernels, *self.host_times(run))

        measured, error = self.attempt(f"{case.block} {case.mode} torch host overhead", measure)
        if error or not measured[0]:
            self.record(case, "host_overhead_torch", 1, [], error=error or "no kernels seen")
            return
        self.record_host(case, "host_overhead_torch", 1, *measured)

    def host_times(self, run: Callable) -> tuple[list[float], list[float]]:
        """Wall and calling-thread CPU µs of --host-iters calls of run(),
        each started on an idle GPU."""
        wall, cpu = [], []
        for _ in range(self.args.host_iters):
            self.timer.sync()
            start, start_cpu = time.perf_counter(), time.thread_time()
            run()
            cpu.append((time.thread_time() - start_cpu) * 1e6)
            wall.append((time.perf_counter() - start) * 1e6)
        return wall, cpu

    def record_host(
        self, case: Case, variant: str, s: int, ops: int, wall: list, cpu: list
    ) -> None:
        self.record(
            case,
            variant,
            s,
            [t / 1e3 for t in wall],
            host_ir_ops=ops,
            host_us_per_op=statistics.median(wall) / ops,
            host_cpu_us_per_op=statistics.median(cpu) / ops,
        )


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--blocks", default=",".join(BLOCKS), help="comma list of mlp,attention,layer")
    p.add_argument("--modes", default=",".join(MODES), help="comma list of tp,sp")
    p.add_argument("--hidden", "-H", type=int, help="h, e of attention (default 8192; 64 on cpu)")
    p.add_argument("--tokens", "-t", type=int, help="MLP rows (default 8192; 128 on cpu)")
    p.add_argument("--seq", type=int, help="attention sequence (default 2048; 32 on cpu)")
    p.add_argument("--batch", type=int, help="attention batch (default 4 = max chunks)")
    p.add_argument("--heads", type=int, help="attention heads (default 64; 8 on cpu)")
    p.add_argument("--chunks", default="1,2,4", help="stream chunk counts s, comma list")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=30, help="timed iterations")
    p.add_argument("--host-iters", type=int, default=200, help="host overhead calls; 0 skips")
    p.add_argument("--host-chunks", type=int, default=4, help="s of the host overhead runs")
    p.add_argument("--dtype", choices=DTYPES, default="bfloat16")
    p.add_argument("--json", metavar="PATH", help="write the results here (rank 0)")
    p.add_argument(
        "--rings",
        action="store_true",
        help="also time mdfuser_ring (ring_decomposition) and, on GPUs, mdfuser_cuda "
        "(the CUDA backend), mdfuser_cuda_graph (the same as CUDA graphs) and "
        "mdfuser_cuda_pipeline (compute_on_main_stream) at d > 1",
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="print where mdfuser's runs and torch_no_overlap spend their time",
    )
    p.add_argument(
        "--device",
        choices=("cuda", "cpu"),
        default="cuda" if torch.cuda.is_available() else "cpu",
    )
    args = p.parse_args()
    args.blocks = args.blocks.split(",")
    args.modes = args.modes.split(",")
    args.chunks = [int(c) for c in args.chunks.split(",")]
    if not set(args.blocks) <= set(BLOCKS) or not set(args.modes) <= set(MODES):
        p.error(f"--blocks takes {','.join(BLOCKS)}; --modes takes {','.join(MODES)}")
    small = args.device == "cpu"
    args.hidden = args.hidden or (64 if small else 8192)
    args.tokens = args.tokens or (128 if small else 8192)
    args.seq = args.seq or (32 if small else 2048)
    args.batch = args.batch or max(4, max(args.chunks))
    args.heads = args.heads or (8 if small else 64)
    if min(args.chunks) < 1 or args.iters < 1 or args.warmup < 0 or args.host_iters < 0:
        p.error("--chunks must be positive, --iters >= 1, --warmup and --host-iters >= 0")
    return args


def check_sizes(case: Case, args: argparse.Namespace, d: int) -> str | None:
    """Why this case cannot run on d ranks with the chunk counts asked, or None."""
    need = []
    if 4 * case.h % d:
        need.append(f"4h = {4 * case.h} to split across {d} ranks")
    for s in args.chunks:
        if case.block == "mlp" and case.tokens % (s * d):
            need.append(f"tokens = {case.tokens} to split into {s} chunks of {d} parts")
        if case.attention is not None and case.attention.batch % s:
            need.append(f"batch = {case.attention.batch} to split into {s} chunks")
    a = case.attention
    if a is not None and (a.heads % d or a.e % a.heads or a.seq % d):
        need.append(f"heads = {a.heads} and seq = {a.seq} to split across {d} ranks")
    return "; ".join(need) or None


def main() -> None:
    args = parse_args()
    run = Run(args)
    cases = [
        Case(block, mode, args.hidden, args.tokens, None if block == "mlp" else attention)
        for block in args.blocks
        for mode in args.modes
        for attention in [Attention(args.seq, args.batch, args.hidden, args.heads)]
    ]
    for case in cases:
        problem = check_sizes(case, args, run.d)
        if problem:
            raise SystemExit(f"{case.block} {case.mode}: needs {problem}")
    for case in cases:
        run.bench(case)
        if run.cuda:
            torch.cuda.empty_cache()

    if args.host_iters:
        s = args.host_chunks
        # h = 64, 64 tokens where they split into s chunks of d parts.
        tokens = 64 if 64 % (s * run.d) == 0 else 8 * s * run.d
        tiny = Attention(seq=8 * run.d, batch=s, e=64, heads=max(4, run.d))
        for block in args.blocks:
            for mode in args.modes:
                case = Case(block, mode, 64, tokens, None if block == "mlp" else tiny)
                run.host_overhead(case, s)
        if run.rank == 0:
            print_host_overhead([r for r in run.results if r.variant.startswith("host_overhead")])

    if run.rank == 0 and args.json:
        write_json(args.json, run.results)
    if run.failures:
        run.log("\nfailures:\n  " + "\n  ".join(run.failures))
    run.timer.sync()
    dist.destroy_process_group()
    if run.failures:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
