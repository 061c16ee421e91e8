# SPDX-License-Identifier: MIT
"""The records of benchmarks/transformer_blocks.py, one per variant run, and
the tables it prints from them: the timings with their ratios, and the host
overhead."""

from __future__ import annotations

from dataclasses import dataclass

from common import RunInfo, fmt, print_table

COLUMNS = ["variant", "s", "median_ms", "min_ms", "TFLOP/s", "x_streams", "x_no_ovl", "max_err"]
WIDTHS = [17, 3, 11, 9, 9, 11, 10, 10]
HOST_COLUMNS = ["block", "mode", "variant", "s", "ops", "execute_us", "us/op", "cpu_us/op"]
HOST_WIDTHS = [10, 5, 8, 3, 6, 12, 8, 10]


@dataclass
class Result(RunInfo):
    benchmark: str  # transformer_mlp, transformer_attention or transformer_layer
    mode: str  # tp or sp
    world_size: int
    variant: str
    num_chunks: int
    h: int  # hidden size (e of attention and layer)
    t: int  # tokens: the MLP's rows, seq * batch for attention and layer
    seq: int | None
    batch: int | None
    heads: int | None
    dtype: str
    median_ms: float | None  # None when the variant failed
    min_ms: float | None
    max_ms: float | None
    tflops: float | None  # GEMM and attention flops per rank / median
    vs_torch_streams: float | None = None
    vs_torch_no_overlap: float | None = None
    max_rel_err: float | None = None  # against torch_no_overlap
    host_ir_ops: int | None = None  # host_overhead: statements run per execute
    host_us_per_op: float | None = None  # host_overhead: execute's wall time / host_ir_ops
    host_cpu_us_per_op: float | None = None  # the same with the thread's CPU time
    error: str | None = None


def add_ratios(rows: list[Result]) -> None:
    median = {(r.variant, r.num_chunks): r.median_ms for r in rows if r.median_ms}
    base = median.get(("torch_no_overlap", 1))
    for r in rows:
        if r.median_ms is None:
            continue
        streams_ms = median.get(("torch_streams", r.num_chunks))
        r.vs_torch_streams = r.median_ms / streams_ms if streams_ms else None
        r.vs_torch_no_overlap = r.median_ms / base if base else None


def print_results(rows: list[Result], timing: str) -> None:
    r0 = rows[0]
    shape = f"t={r0.t} h={r0.h}"
    if r0.seq is not None:
        shape = f"seq={r0.seq} batch={r0.batch} e={r0.h} heads={r0.heads}"
    title = (
        f"{r0.benchmark} {r0.mode}: d={r0.world_size} {shape} {r0.dtype} on {r0.device}; "
        f"times by {timing}, median of the timed iterations"
    )
    table = []
    for r in rows:
        if r.median_ms is None:
            table.append([r.variant, str(r.num_chunks), "FAILED"] + [""] * 5)
            continue
        table.append(
            [
                r.variant,
                str(r.num_chunks),
                f"{r.median_ms:.3f}",
                f"{r.min_ms:.3f}",
                fmt(r.tflops, ".4g"),
                fmt(r.vs_torch_streams, ".3f"),
                fmt(r.vs_torch_no_overlap, ".3f"),
                fmt(r.max_rel_err, ".1e"),
            ]
        )
    print_table(title, COLUMNS, WIDTHS, table)


def print_host_overhead(rows: list[Result]) -> None:
    table = []
    for r in rows:
        block = r.benchmark.removeprefix("transformer_")
        variant = {"host_overhead_torch": "torch", "host_overhead_graph": "mdfuser_graph"}.get(
            r.variant, "mdfuser"
        )
        if r.median_ms is None:
            table.append([block, r.mode, variant, str(r.num_chunks), "FAILED", "", "", ""])
            continue
        table.append(
            [
                block,
                r.mode,
                variant,
                str(r.num_chunks),
                str(r.host_ir_ops),
                f"{r.median_ms * 1e3:.1f}",
                f"{r.host_us_per_op:.2f}",
                f"{r.host_cpu_us_per_op:.2f}",
            ]
        )
    title = (
        f"host overhead: fd.execute's host time per host-IR statement run (torch: the "
        f"reference's per CUDA kernel launched), tiny shapes, "
        f"d={rows[0].world_size}, median of rank 0's calls on {rows[0].device}"
    )
    print_table(title, HOST_COLUMNS, HOST_WIDTHS, table)
