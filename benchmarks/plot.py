# SPDX-License-Identifier: MIT
"""Plots for the results of benchmarks/row_parallel_linear.py and
benchmarks/ring_pairs.py.

    python3 benchmarks/plot.py times results/*.json --out times.png
    python3 benchmarks/plot.py timeline trace_rank0.json --out timeline.png

``times`` draws, per benchmark, world size and shape, the median time
against the number of stream chunks s for every variant (the single-call
variants as horizontal lines, with the floor max(GEMM, communication)).
``timeline`` draws the CUDA kernels and copies of a torch.profiler trace,
one lane per CUDA stream, GEMMs, NCCL kernels and copies in different
colours, so that overlap (or its absence) is visible.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LINE_STYLES = {
    "mdfuser": dict(color="tab:blue", marker="o"),
    "mdfuser_copy": dict(color="tab:cyan", marker="^", linestyle="--"),
    "mdfuser_pipeline": dict(color="tab:brown", marker="v"),
    "torch_streams": dict(color="tab:orange", marker="s"),
    "torch_pipeline": dict(color="tab:olive", marker="D", linestyle="--"),
    "mdfuser_ring": dict(color="tab:pink", marker="x"),
    "mdfuser_cuda": dict(color="tab:green", marker="*"),
}
FLAT_STYLES = {
    "torch_no_overlap": dict(color="tab:red", linestyle="--"),
    "gemm_only": dict(color="tab:green", linestyle=":"),
    "allreduce_only": dict(color="tab:purple", linestyle=":"),
    "comm_only": dict(color="tab:purple", linestyle=":"),
    "torch_fused": dict(color="tab:gray", linestyle="-."),
}


def plot_times(paths: list[str], out: str) -> None:
    records = [r for path in paths for r in json.load(open(path))]
    panels = defaultdict(list)
    for r in records:
        key = (r["benchmark"], r["world_size"], r["h"], r["t"], r.get("k"))
        panels[key].append(r)
    keys = sorted(panels, key=str)
    columns = min(3, len(keys))
    rows_of_panels = -(-len(keys) // columns)
    fig, axes = plt.subplots(
        rows_of_panels, columns, figsize=(6 * columns, 4.5 * rows_of_panels), squeeze=False
    )
    for ax in axes.flat[len(keys) :]:
        ax.set_visible(False)
    for ax, key in zip(axes.flat, keys):
        rows = panels[key]
        benchmark, d = key[0], key[1]
        median = {(r["variant"], r["num_chunks"]): r["median_ms"] for r in rows}
        for variant, style in LINE_STYLES.items():
            points = sorted(
                (r["num_chunks"], r["median_ms"]) for r in rows if r["variant"] == variant
            )
            if points:
                ax.plot(*zip(*points), label=variant, **style)
        for variant, style in FLAT_STYLES.items():
            if (variant, 1) in median:
                ax.axhline(median[(variant, 1)], label=variant, **style)
        comm = median.get(("allreduce_only", 1), median.get(("comm_only", 1)))
        if ("gemm_only", 1) in median and comm is not None:
            floor = max(median[("gemm_only", 1)], comm)
            ax.axhline(floor, color="black", linewidth=0.8, label="floor max(GEMM, comm)")
        r0 = rows[0]
        shape = f"h={r0['h']}, t={r0['t']}" + (f", k={r0['k']}" if r0.get("k") else "")
        ax.set_title(f"{benchmark}, d={d}, {shape}, {r0['dtype']}", fontsize=10)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("stream chunks s")
        ax.set_ylabel("median time (ms)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"time against stream chunks on {records[0]['device']}")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def kernel_kind(name: str) -> str:
    lowered = name.lower()
    if "nccl" in lowered:
        return "NCCL"
    if any(k in lowered for k in ("gemm", "nvjet", "cutlass", "sm90_xmma", "matmul")):
        return "GEMM"
    return "other"


KIND_COLORS = {"GEMM": "tab:blue", "NCCL": "tab:red", "copy": "tab:green", "other": "tab:gray"}


def plot_timeline(path: str, out: str) -> None:
    trace = json.load(open(path))
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    kernels = [
        e
        for e in events
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    ]
    if not kernels:
        raise SystemExit(f"{path} has no CUDA kernels")
    start = min(e["ts"] for e in kernels)
    lanes = sorted({e["args"].get("stream", e.get("tid")) for e in kernels})
    # What each lane ran, e.g. "stream 7: GEMM 4, copy 4": the trace's
    # stream numbers alone do not say which is a worker or a copy stream.
    counts: dict = {lane: {} for lane in lanes}
    fig, ax = plt.subplots(figsize=(12, 1 + 0.6 * len(lanes)))
    seen = set()
    for e in kernels:
        lane = lanes.index(e["args"].get("stream", e.get("tid")))
        kind = "copy" if e.get("cat") == "gpu_memcpy" else kernel_kind(e["name"])
        counts[lanes[lane]][kind] = counts[lanes[lane]].get(kind, 0) + 1
        label = None if kind in seen else kind
        seen.add(kind)
        ax.broken_barh(
            [((e["ts"] - start) / 1e3, e["dur"] / 1e3)],
            (lane - 0.4, 0.8),
            color=KIND_COLORS[kind],
            label=label,
        )
    names = [
        f"stream {s}: " + ", ".join(f"{kind} {n}" for kind, n in sorted(counts[s].items()))
        for s in lanes
    ]
    ax.set_yticks(range(len(lanes)), names, fontsize=8)
    ax.set_xlabel("time (ms)")
    ax.set_title(f"CUDA kernels per stream: {path.split('/')[-1]}")
    ax.legend(loc="upper right", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    times = sub.add_parser("times")
    times.add_argument("json", nargs="+")
    times.add_argument("--out", required=True)
    timeline = sub.add_parser("timeline")
    timeline.add_argument("trace")
    timeline.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.command == "times":
        plot_times(args.json, args.out)
    else:
        plot_timeline(args.trace, args.out)


if __name__ == "__main__":
    main()
