# SPDX-License-Identifier: MIT
"""The machine model mdfuser chooses stream chunk counts with.

A fusion whose ``outer_split`` has no factor leaves its number of stream
chunks to mdfuser. When it compiles such a fusion, mdfuser estimates each
count worth trying with a model of the machine (doc/options.md, "Stream
chunks"): a GEMM's throughput and how it falls for GEMMs of few outputs, the
bandwidth of a copy within the device and to a peer, the host's cost of
issuing one statement, and the device's cost of one step of a collective
(a move that waits for the one before it). The model is measured once per
machine and device type, in about a second, and cached in
``$MDFUSER_CACHE_DIR`` (default ``~/.cache/mdfuser``); within a job one rank
measures or loads it and every other rank reads it from the job's store, so
that all choose the same count.
"""

from __future__ import annotations

import json
import os
import platform
import re
import statistics
import time
from pathlib import Path

import torch

from mdfuser import _C

FIELDS = (
    "gemm_flops",
    "gemm_half_outputs",
    "memory_bytes",
    "link_bytes",
    "statement_seconds",
    "move_seconds",
)


def cache_dir() -> Path:
    return Path(os.environ.get("MDFUSER_CACHE_DIR", Path.home() / ".cache" / "mdfuser"))


def _machine_name(device: torch.device) -> str:
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    else:
        name = f"{platform.machine()}-{platform.processor() or 'cpu'}-{os.cpu_count()}"
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


# The cache file's version: a model measured another way is measured again.
VERSION = 3


def cache_path(device: torch.device) -> Path:
    return cache_dir() / f"machine_model_v{VERSION}_{device.type}_{_machine_name(device)}.json"


def _seconds(device: torch.device, run, repeats: int = 5) -> float:
    """The median time of one `run()`, after warm-up calls. Each sample
    times enough back-to-back calls to last about a millisecond (CUDA
    events on GPUs), so that a kernel of a few microseconds is not timed as
    its launch and the host's synchronization."""
    cuda = device.type == "cuda"

    def batch(calls: int) -> float:
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(calls):
                run()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3 / calls
        begin = time.perf_counter()
        for _ in range(calls):
            run()
        return (time.perf_counter() - begin) / calls

    batch(2)  # warm-up: kernels chosen and loaded, caches filled
    calls = max(1, min(1000, int(1e-3 / max(batch(1), 1e-7))))
    return statistics.median(batch(calls) for _ in range(repeats))


def measure(device: torch.device) -> dict[str, float]:
    """Measures the model on `device` (a few hundred milliseconds)."""
    cuda = device.type == "cuda"
    dtype = torch.bfloat16 if cuda else torch.float32
    # GEMMs of few rows, and of more: the fastest gives the throughput, and
    # the one of fewest rows how it falls for GEMMs of few output elements
    # (the model's rate(o) = peak * o / (o + half), o = rows * columns).
    nk = 4096 if cuda else 256
    row_counts = (128, 1024, 8192) if cuda else (16, 128, 1024)
    b = torch.randn(nk, nk, device=device, dtype=dtype)
    rates = []
    for rows in row_counts:
        a = torch.randn(rows, nk, device=device, dtype=dtype)
        seconds = _seconds(device, lambda a=a: torch.mm(a, b))
        rates.append(2.0 * rows * nk * nk / seconds)
    gemm_flops = max(rates)
    gemm_half_outputs = row_counts[0] * nk * (gemm_flops / rates[0] - 1.0)

    size = (256 if cuda else 16) * 2**20
    src = torch.empty(size, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    memory_bytes = 2.0 * size / _seconds(device, lambda: dst.copy_(src))
    link_bytes = memory_bytes / 2.0
    peer = None
    if cuda and torch.cuda.device_count() > 1:
        other = torch.device("cuda", ((device.index or 0) + 1) % torch.cuda.device_count())
        if other != device and torch.cuda.can_device_access_peer(device, other):
            peer = other
            remote = torch.empty(size, dtype=torch.uint8, device=peer)
            link_bytes = size / _seconds(device, lambda: remote.copy_(src))

    x = torch.zeros(16, device=device)
    y = torch.empty_like(x)
    issues = 200

    def issue():
        for _ in range(issues):
            torch.add(x, 1, out=y)

    statement_seconds = _seconds(device, issue) / issues
    return {
        "gemm_flops": gemm_flops,
        "gemm_half_outputs": gemm_half_outputs,
        "memory_bytes": memory_bytes,
        "link_bytes": link_bytes,
        "statement_seconds": statement_seconds,
        "move_seconds": _move_seconds(device, peer),
    }


def _move_seconds(device: torch.device, peer: torch.device | None) -> float:
    """The device time of one step of a collective apart from its bytes: a
    chain of small copies (to `peer` where it is given), each issued on the
    other of two streams after the copy before it, as a ring's step waits
    for the step before. On GPUs the chain is queued behind a sleeping
    kernel, so that it is timed on the device and not as the host's issue;
    on the CPU each step is a small copy."""
    steps = 64
    src = torch.zeros(1024, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src, device=peer or device)
    if device.type != "cuda":
        return _seconds(device, lambda: [dst.copy_(src) for _ in range(steps)]) / steps
    streams = [torch.cuda.Stream(device), torch.cuda.Stream(device)]
    main = torch.cuda.current_stream(device)

    def chain() -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        # A few milliseconds of sleep: the chain is queued before it runs.
        torch.cuda._sleep(5_000_000)
        start.record(main)
        before = start
        for i in range(steps):
            stream = streams[i % 2]
            stream.wait_event(before)
            with torch.cuda.stream(stream):
                dst.copy_(src, non_blocking=True)
            before = torch.cuda.Event()
            before.record(stream)
        main.wait_event(before)
        end.record(main)
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / steps

    with torch.cuda.device(device):
        chain()  # warm-up
        return statistics.median(chain() for _ in range(5))


def load_or_measure(device: torch.device) -> dict[str, float]:
    """The cached model of this machine's `device` type, measured and
    cached when there is none (or the cache cannot be read)."""
    path = cache_path(device)
    try:
        model = json.loads(path.read_text())
        if set(model) == set(FIELDS):
            return model
    except (OSError, ValueError):
        pass
    model = measure(device)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(model, indent=1))
        tmp.replace(path)
    except OSError:
        # A read-only home: measured again by the next job.
        pass
    return model


# The models set in this process, by device type: what execute's call of
# ensure_machine_model finds at once.
_models: dict[str, dict[str, float]] = {}


def set_machine_model(device_type: str, model: dict[str, float]) -> None:
    """Sets the model this process chooses chunk counts with on
    `device_type` ('cpu' or 'cuda'); every rank of a job must set the same
    one. mdfuser sets it itself (ensure_machine_model); this is for tests
    and for machines whose model is known."""
    missing = set(FIELDS) - set(model)
    if missing:
        raise ValueError(f"a machine model needs {', '.join(FIELDS)}; missing {sorted(missing)}")
    _C._set_machine_model(device_type, **{k: float(model[k]) for k in FIELDS})
    _models[device_type] = dict(model)


def machine_model(device_type: str) -> dict[str, float] | None:
    """The model this process chooses chunk counts with on `device_type`,
    or None before one is set."""
    return _C._machine_model(device_type)


def ensure_machine_model(device: torch.device) -> dict[str, float]:
    """The model for `device`'s type, set on first use: one rank of the job
    loads or measures it, the others read it from the job's store."""
    model = _models.get(device.type) or machine_model(device.type)
    if model is not None:
        return model
    comm = _C.Communicator.instance()
    key = f"machine_model/{device.type}"
    if comm.size() == 1 or comm._claim_once(key):
        model = load_or_measure(device)
        comm._publish(key, json.dumps(model))
    else:
        model = json.loads(comm._await_published(key, f"reading the {device.type} machine model"))
    set_machine_model(device.type, model)
    return model
