# SPDX-License-Identifier: MIT
"""Where a traced call's device time goes: a summary of a chrome trace that
torch's profiler wrote (row_parallel_linear.py --trace, transformer_blocks.py
--profile's traces), for reading the traces of a GPU run without a viewer.

The traced call is the device work between the first and the last NCCL
kernel of the trace (the benchmarks meet the other ranks with a collective
before and after it), or the whole trace where there are fewer than two.
Its events are put in kinds: GEMMs (cuBLAS's and CUTLASS's kernels), peer
copies (copy engines, "Memcpy PtoP"), local copies (copy engines within
the GPU, and the driver's SM copy kernels "memcpy*"), NCCL's kernels and
other kernels. For each kind: how many, their summed duration, and the
time at least one of them runs (their union; the sum over the union is
how many run at once on average). Then what the overlap question needs:
the call's length, the GEMMs' union against it, the peer copies' union,
how long the call runs before its first GEMM and after its last, and, of
that tail, how long copies to a peer run. With --timeline, every event of
the call in order: its kind, stream, start and end (microseconds from the
call's start) and the gap since the link (peer copies) last ran.

    python3 benchmarks/trace_summary.py traces/d4/trace_rank0.json [...]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass

GEMM_MARKS = ("gemm", "nvjet", "xmma", "cutlass", "sm90_", "GemmUniversal", "device_kernel")


@dataclass
class Event:
    kind: str
    name: str
    start: float  # microseconds
    end: float
    stream: int


def kind_of(name: str, category: str) -> str:
    if category == "gpu_memcpy":
        return "peer copy" if "PtoP" in name else "local copy"
    if category == "gpu_memset":
        return "memset"
    if name.startswith("nccl"):
        return "nccl"
    if name.startswith("memcpy"):
        return "local copy"
    if any(mark in name for mark in GEMM_MARKS):
        return "gemm"
    return "other kernel"


def device_events(trace: dict) -> list[Event]:
    events = []
    for e in trace.get("traceEvents", []):
        category = e.get("cat", "")
        if e.get("ph") != "X" or category not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        start = float(e["ts"])
        events.append(
            Event(
                kind_of(e["name"], category),
                e["name"],
                start,
                start + float(e.get("dur", 0.0)),
                int(e.get("args", {}).get("stream", -1)),
            )
        )
    return sorted(events, key=lambda e: e.start)


def traced_call(events: list[Event]) -> list[Event]:
    """The events between the first NCCL kernel's end and the last one's
    start: the call the ranks met around, without the fills of the tensors
    the meetings reduce."""
    nccl = [e for e in events if e.kind == "nccl"]
    if len(nccl) >= 2:
        lo, hi = nccl[0].end, nccl[-1].start
        events = [e for e in events if e.start >= lo and e.end <= hi]
    return [e for e in events if "FillFunc" not in e.name]


def union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def summarize(path: str) -> list[str]:
    with open(path) as f:
        trace = json.load(f)
    events = traced_call(device_events(trace))
    if not events:
        return [f"{path}: no device events"]
    lo = min(e.start for e in events)
    hi = max(e.end for e in events)
    lines = [f"{path}: the call {(hi - lo) / 1e3:.3f} ms of device time, {len(events)} events"]
    lines.append(f"  {'kind':<13} {'count':>6} {'sum ms':>9} {'union ms':>9} {'at once':>8}")
    by_kind: dict[str, list[Event]] = {}
    for e in events:
        by_kind.setdefault(e.kind, []).append(e)
    for kind, group in sorted(by_kind.items()):
        total = sum(e.end - e.start for e in group)
        covered = union([(e.start, e.end) for e in group])
        lines.append(
            f"  {kind:<13} {len(group):>6} {total / 1e3:>9.3f} {covered / 1e3:>9.3f} "
            f"{total / covered if covered else 0:>8.2f}"
        )
    gemms = by_kind.get("gemm", [])
    if gemms:
        first = min(e.start for e in gemms)
        last = max(e.end for e in gemms)
        tail_copies = union(
            [(max(e.start, last), e.end) for e in by_kind.get("peer copy", []) if e.end > last]
        )
        lines.append(
            f"  before the first GEMM {(first - lo) / 1e3:.3f} ms; after the last "
            f"{(hi - last) / 1e3:.3f} ms, peer copies running {tail_copies / 1e3:.3f} ms of it"
        )
    return lines


def timeline(path: str) -> list[str]:
    with open(path) as f:
        events = traced_call(device_events(json.load(f)))
    if not events:
        return []
    lo = min(e.start for e in events)
    lines = [f"  {'kind':<13} {'stream':>6} {'start':>8} {'end':>8} {'link idle':>9}  name"]
    link_free = None
    for e in events:
        idle = ""
        if e.kind == "peer copy":
            if link_free is not None and e.start > link_free:
                idle = f"{e.start - link_free:.1f}"
            link_free = max(e.end, link_free or e.end)
        lines.append(
            f"  {e.kind:<13} {e.stream:>6} {e.start - lo:>8.1f} {e.end - lo:>8.1f} "
            f"{idle:>9}  {e.name[:60]}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="+", help="chrome trace JSON files")
    parser.add_argument("--timeline", action="store_true", help="every event of the call")
    args = parser.parse_args(argv)
    for path in args.traces:
        print("\n".join(summarize(path)))
        if args.timeline:
            print("\n".join(timeline(path)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
