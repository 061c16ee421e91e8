# SPDX-License-Identifier: MIT
"""What the benchmarks share: launch under mpirun or torchrun, the timer,
the correctness check, the run's metadata, JSON and table output.

The benchmark scripts import it as ``common`` (their own folder is first on
``sys.path`` when they run as scripts).
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shlex
import sys
import time
from dataclasses import asdict, dataclass

import torch
import torch.distributed as dist

from mdfuser import CommunicatorBackend, DataType

DTYPES = {
    "bfloat16": (torch.bfloat16, DataType.BFloat16),
    "float16": (torch.float16, DataType.Half),
    "float32": (torch.float32, DataType.Float),
}
# max |got - ref| / max |ref| allowed between two bf16 computations of the
# same function summed in another order.
TOLERANCE = 2e-2


@dataclass
class RunInfo:
    """The record fields that describe the run rather than one measurement,
    which run_info() fills; every benchmark's records derive from it."""

    device: str
    date: str
    command: str
    torch_version: str
    # The NCCL settings of the run, e.g. "NCCL_MAX_NCHANNELS=8 NCCL_NVLS_ENABLE=0".
    nccl_env: str


@dataclass
class Interleaved:
    """Timer.interleaved's ms per call of each fn: `ms` by CUDA events (or
    perf_counter on the CPU), `host_ms` the time the calling thread spent in
    the call (on CUDA, launching; the same as `ms` on the CPU)."""

    ms: list[list[float]]
    host_ms: list[list[float]]


# How long a queued batch holds the stream: about 20 ms at Hopper's clocks,
# enough to enqueue a few dozen calls.
QUEUE_HOLD_CYCLES = 40_000_000


class Timer:
    """Times fn() per iteration: CUDA events on the current stream, or perf_counter."""

    def __init__(self, device: torch.device, warmup: int, iters: int, queued: int = 0) -> None:
        self.cuda = device.type == "cuda"
        self.device, self.warmup, self.iters = device, warmup, iters
        # With `queued` > 0 (CUDA), interleaved() times batches of that many
        # calls, enqueued while the stream is held by a sleeping kernel and
        # then run back to back: the GPU's time per call, without the gaps
        # that launching leaves when a call's GPU work is shorter than its
        # launch (microsecond-scale problems).
        self.queued = queued if self.cuda else 0

    def sync(self) -> None:
        """Waits for this rank's GPU, then for all ranks, so variants start together."""
        if self.cuda:
            torch.cuda.synchronize()
            dist.barrier(device_ids=[self.device.index])
        else:
            dist.barrier()

    def __call__(self, fn) -> list[float]:
        for _ in range(self.warmup):
            fn()
        self.sync()
        if not self.cuda:
            times = []
            for _ in range(self.iters):
                start = time.perf_counter()
                fn()
                times.append((time.perf_counter() - start) * 1e3)
            self.sync()
            return times
        events = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(self.iters)
        ]
        for start, end in events:
            start.record()
            fn()
            end.record()
        self.sync()
        return [start.elapsed_time(end) for start, end in events]

    def interleaved(self, fns: list) -> Interleaved:
        """Times each of `fns` per iteration, taking turns: iteration i runs
        every fn once, starting at fn i mod n, so that a GPU whose clock
        drifts over the run (power, heat) slows every variant alike rather
        than the ones timed last."""
        for fn in fns:
            for _ in range(self.warmup):
                fn()
        self.sync()
        n = len(fns)
        if not self.cuda:
            times = [[] for _ in fns]
            for i in range(self.iters):
                for k in range(n):
                    j = (i + k) % n
                    start = time.perf_counter()
                    fns[j]()
                    times[j].append((time.perf_counter() - start) * 1e3)
            self.sync()
            return Interleaved(times, times)
        events = [[] for _ in fns]
        host_ms = [[] for _ in fns]
        batch = max(self.queued, 1)
        for i in range(self.iters):
            for k in range(n):
                j = (i + k) % n
                if self.queued:
                    # Every rank's stream waits long enough for its host to
                    # enqueue the batch (the ranks leave the barrier together).
                    self.sync()
                    torch.cuda._sleep(QUEUE_HOLD_CYCLES)
                start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
                start.record()
                host = time.perf_counter()
                for _ in range(batch):
                    fns[j]()
                host_ms[j].append((time.perf_counter() - host) * 1e3 / batch)
                end.record()
                events[j].append((start, end))
        self.sync()
        ms = [[start.elapsed_time(end) / batch for start, end in pairs] for pairs in events]
        return Interleaved(ms, host_ms)


def collective_backend(cuda: bool) -> dict:
    """execute's keyword arguments that keep collectives collectives (NCCL
    on GPUs; the default, Gloo, on the CPU) whatever execute defaults to."""
    return {"backend": CommunicatorBackend.nccl} if cuda else {}


def backend_variants(
    cuda: bool,
    d: int,
    graphs: bool = False,
    prologues_first: bool = False,
    ring_reduce_scatter: bool = False,
    exchange: bool = False,
) -> dict[str, dict]:
    """execute's keyword arguments of the mdfuser variants timed beside the
    default (`mdfuser`: on GPUs that map each other's memory the CUDA
    backend's rings, replayed as CUDA graphs; NCCL's collectives on other
    GPUs, Gloo's on the CPU): `mdfuser_nccl` NCCL's collectives,
    `mdfuser_ring` the rings on NCCL (or Gloo), `mdfuser_cuda` the CUDA
    backend's rings on copy engines run statement by statement
    (`_disable_options=["cuda_graph"]`) and, with `graphs`, `mdfuser_graph`
    and `mdfuser_cuda_graph`: NCCL's collectives and the CUDA backend's rings
    replayed as CUDA graphs (asked for); `mdfuser_cuda` and
    `mdfuser_cuda_graph` without `ring_prologues_first`, which the default
    takes where the model says the link bounds the loops; with
    `prologues_first`,
    `mdfuser_cuda_first` and (with `graphs`) `mdfuser_cuda_graph_first`: the
    CUDA backend's rings with every stream chunk's step-0 GEMM issued first,
    in order (`ring_prologues_first`), statement by statement and replayed;
    with `ring_reduce_scatter`, `mdfuser_cuda_ring_rs` and (with `graphs`)
    `mdfuser_cuda_graph_ring_rs`: the CUDA backend's reduce-scatter and
    allreduce of partial sums as rings rather than the direct moves it makes
    over three devices or more and, at d = 2, for one stream chunk
    (`_disable_options=["direct_reduce_scatter"]`), the same two ways;
    `mdfuser_cuda_pipeline`: the CUDA backend's moves with each stream
    chunk's GEMMs on the caller's stream in chunk order and what follows
    its last GEMM on its worker (`compute_on_main_stream`), replayed as the
    default replays; at d > 2 `mdfuser_cuda_concurrent`: the CUDA
    backend's moves outstanding at once (a direct form's to its d - 1
    peers) each on a communication stream of its own (`concurrent_moves`),
    and `mdfuser_cuda_pipeline_concurrent`, both options; with `exchange`,
    at d = 2, `mdfuser_cuda_exchange`: the allreduce of partial sums as one
    exchange of whole partial sums (`exchange_allreduce`),
    `mdfuser_cuda_pipeline_exchange`, with the GEMMs in order too (what the
    default runs where the model says the stream loops wait for the link),
    and `mdfuser_cuda_no_exchange`, the exchange disabled (the default
    elsewhere).
    None at d = 1, where a team of one has neither collectives nor rings."""
    if d == 1:
        return {}
    variants = {
        "mdfuser_ring": {"_enable_options": ["ring_decomposition"], **collective_backend(cuda)}
    }
    if not cuda:
        return variants
    cuda_backend = {"backend": CommunicatorBackend.cuda}
    statements = ["cuda_graph"]
    variants["mdfuser_nccl"] = collective_backend(cuda)
    in_turn = ["ring_prologues_first"]
    variants["mdfuser_cuda"] = cuda_backend | {"_disable_options": [*statements, *in_turn]}
    pipeline = ["compute_on_main_stream"]
    variants["mdfuser_cuda_pipeline"] = cuda_backend | {"_enable_options": pipeline}
    if exchange and d == 2:
        exchanged = ["exchange_allreduce"]
        variants["mdfuser_cuda_exchange"] = cuda_backend | {"_enable_options": exchanged}
        variants["mdfuser_cuda_no_exchange"] = cuda_backend | {"_disable_options": exchanged}
        variants["mdfuser_cuda_pipeline_exchange"] = cuda_backend | {
            "_enable_options": [*pipeline, *exchanged]
        }
    if d > 2:
        # At d = 2 a direct form has one move at a time: the same program.
        concurrent = ["concurrent_moves"]
        variants["mdfuser_cuda_concurrent"] = cuda_backend | {"_enable_options": concurrent}
        variants["mdfuser_cuda_pipeline_concurrent"] = cuda_backend | {
            "_enable_options": [*pipeline, *concurrent]
        }
    if graphs:
        variants["mdfuser_graph"] = collective_backend(cuda) | {"_enable_options": ["cuda_graph"]}
        variants["mdfuser_cuda_graph"] = cuda_backend | {
            "_enable_options": ["cuda_graph"],
            "_disable_options": in_turn,
        }
    if prologues_first:
        first = ["ring_prologues_first"]
        variants["mdfuser_cuda_first"] = cuda_backend | {
            "_enable_options": first,
            "_disable_options": statements,
        }
        if graphs:
            variants["mdfuser_cuda_graph_first"] = cuda_backend | {
                "_enable_options": [*first, "cuda_graph"]
            }
    if ring_reduce_scatter:
        ring = ["direct_reduce_scatter"]
        variants["mdfuser_cuda_ring_rs"] = cuda_backend | {"_disable_options": [*ring, *statements]}
        if graphs:
            variants["mdfuser_cuda_graph_ring_rs"] = cuda_backend | {
                "_enable_options": ["cuda_graph"],
                "_disable_options": ring,
            }
    return variants


def chosen_chunks(fd) -> int:
    """The stream chunk count of `fd`'s last program (the count mdfuser chose
    for an outer_split without a factor)."""
    counts = {int(n) for n in re.findall(r"istreamIdx\d+\{(\d+)\}", fd.last_host_ir())}
    if len(counts) != 1:
        raise RuntimeError(f"expected one stream chunk count in the program, found {counts}")
    return counts.pop()


def init_distributed(device_type: str, high_priority: bool = False) -> torch.device:
    """Maps mpirun's variables to torch's, then starts torch.distributed."""
    env = os.environ
    if "OMPI_COMM_WORLD_SIZE" in env:
        env.setdefault("RANK", env["OMPI_COMM_WORLD_RANK"])
        env.setdefault("WORLD_SIZE", env["OMPI_COMM_WORLD_SIZE"])
        local = env.get("OMPI_COMM_WORLD_LOCAL_RANK", env["OMPI_COMM_WORLD_RANK"])
        env.setdefault("LOCAL_RANK", local)
    for name, default in (("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0")):
        env.setdefault(name, default)
    env.setdefault("MASTER_ADDR", "localhost")
    env.setdefault("MASTER_PORT", "29500")
    # mdfuser's store must not collide with torch's on MASTER_PORT, except
    # under torchrun, where both are clients of the agent's store there.
    if env.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        env.setdefault("MDFUSER_PORT", str(int(env["MASTER_PORT"]) + 1))
    if device_type == "cuda":
        device = torch.device("cuda", int(env["LOCAL_RANK"]))
        torch.cuda.set_device(device)
        options = dist.ProcessGroupNCCL.Options(is_high_priority_stream=high_priority)
        dist.init_process_group("nccl", device_id=device, pg_options=options)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    return device


def max_rel_err(got: torch.Tensor, ref: torch.Tensor) -> float:
    """max |got - ref| / max |ref|, the largest over ranks (so all ranks agree)."""
    got, ref = got.double(), ref.double()
    err = ((got - ref).abs().max() / ref.abs().max()).reshape(1)
    dist.all_reduce(err, op=dist.ReduceOp.MAX)
    return err.item()


def check(name: str, err: float, rank: int) -> None:
    """Stops the run when `err` is above TOLERANCE or NaN."""
    if rank == 0:
        print(f"check: {name}: max relative error {err:.2e}")
    if not err <= TOLERANCE:  # NaN fails too
        raise SystemExit(f"rank {rank}: {name}: max relative error {err:.2e} > {TOLERANCE:g}")


def run_info(device: torch.device) -> dict:
    """The record fields that describe the run rather than one measurement."""
    cuda = device.type == "cuda"
    return {
        "device": torch.cuda.get_device_name(device) if cuda else "cpu",
        "date": datetime.date.today().isoformat(),
        "command": shlex.join([os.path.basename(sys.executable), *sys.argv]),
        "torch_version": torch.__version__,
        "nccl_env": " ".join(
            f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")
        ),
    }


def add_ratios(results: list, comm: str) -> None:
    """Ratios of each record's median to the references, for records with
    `variant`, `num_chunks`, `median_ms`, `tflops` (None without a GEMM),
    `algbw_gbps` (None without a collective) and the ratio fields:
    `vs_gemm_only` and `vs_torch_no_overlap` (time over theirs, None where
    the run has no such record), and for records with both a GEMM and a
    collective the overlap efficiency `(T_gemm + T_comm - T) / min(T_gemm,
    T_comm)` and the floor ratio `T / max(T_gemm, T_comm)`, with T_gemm the
    median of `gemm_only` and T_comm that of the variant named `comm`."""
    median = {(r.variant, r.num_chunks): r.median_ms for r in results}
    t_gemm, t_comm = median.get(("gemm_only", 1)), median.get((comm, 1))
    t_no_overlap = median.get(("torch_no_overlap", 1))
    for r in results:
        r.vs_gemm_only = r.median_ms / t_gemm if t_gemm else None
        r.vs_torch_no_overlap = r.median_ms / t_no_overlap if t_no_overlap else None
        if r.tflops is not None and r.algbw_gbps is not None and t_gemm and t_comm:
            r.overlap_efficiency = (t_gemm + t_comm - r.median_ms) / min(t_gemm, t_comm)
            r.floor_ratio = r.median_ms / max(t_gemm, t_comm)


def write_json(path: str, records: list) -> None:
    """Writes dataclass records as a JSON list."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump([asdict(r) for r in records], f, indent=1)
    print(f"wrote {path}")


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_table(title: str, columns: list[str], widths: list[int], rows: list[list[str]]) -> None:
    """The first column left-aligned, the others right-aligned."""
    print(f"\n{title}")
    for row in [columns, *rows]:
        cells = zip(row[1:], widths[1:])
        print(row[0].ljust(widths[0]) + "".join(" " + c.rjust(w - 1) for c, w in cells))


def statements(profile) -> list:
    """The host-IR statements a PythonProfiler saw run. On CUDA, torch's
    profiler also reports each range that launched kernels as a GPU
    annotation of the same name, which mdfuser's PythonProfiler lists as a
    second statement; only the host ranges count."""
    return [kp for kp in profile.kernel_profiles if "CUDA" not in kp.device]


def print_statements(title: str, profile) -> None:
    """A PythonProfiler profile summed per kind of host-IR statement; device
    times are those of the kernels each statement launched (for a
    collective, they include waiting for the other ranks)."""
    kinds: dict[str, list[float]] = {}
    for kp in statements(profile):
        count_host_device = kinds.setdefault(kp.name, [0, 0.0, 0.0])
        count_host_device[0] += 1
        count_host_device[1] += kp.host_time_ms
        count_host_device[2] += kp.time_ms
    rows = [
        [name, str(int(c)), f"{host * 1e3:.1f}", f"{host * 1e3 / c:.2f}", f"{device:.3f}"]
        for name, (c, host, device) in sorted(kinds.items(), key=lambda kv: -kv[1][2] - kv[1][1])
    ]
    columns = ["statement", "count", "host_us", "host_us/each", "device_ms"]
    print_table(
        f"{title}: per host-IR statement kind (profiled)", columns, [18, 6, 10, 13, 10], rows
    )
