# SPDX-License-Identifier: MIT
"""Helpers shared by the Python tests."""

from __future__ import annotations

import math
import os
import random
import socket
import subprocess
import sys
import time

import torch

from mdfuser import DataType, FusionDefinition, ParallelType
from mdfuser.multidevice import DeviceMesh

LAUNCHER_VARIABLES = [
    name
    for name in os.environ
    if name.startswith("OMPI_")
    or name
    in (
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        "TORCHELASTIC_USE_AGENT_STORE",
        "NVFUSER_DUMP",
        "MDFUSER_DUMP",
    )
]


def row_parallel_linear(
    d: int, s: int, h: int, dtype: DataType = DataType.BFloat16
) -> FusionDefinition:
    """The row-parallel linear of the architecture guide, on d devices."""
    with FusionDefinition() as fd:
        inp = fd.define_tensor(shape=[-1, 4 * h], contiguity=True, dtype=dtype)
        w = fd.define_tensor(shape=[h, 4 * h], contiguity=True, dtype=dtype)
        out = fd.ops.linear(inp, w)
        fd.add_output(out)
        schedule_row_parallel(inp, w, d, s)
    return fd


def row_parallel_hidden_near(h: int, d: int) -> int:
    """A hidden size for the row-parallel linear on d devices: the largest
    h' <= h whose in_features 4h' split evenly over them (h itself on 1, 2
    or 4 devices; 6 for h = 8 on 3), or the smallest such h' where h is
    below it. Not above h where it can be, so that sums that are exact for
    h stay exact."""
    step = d // math.gcd(4, d)
    return max(step, h // step * step)


def schedule_row_parallel(inp, w, d: int, s: int) -> None:
    """The row-parallel linear's schedule: the tokens of `inp` in s stream
    chunks, the reduction axis of `inp` and `w` across d devices."""
    mesh = DeviceMesh(torch.arange(d))
    for tv in (inp, w):
        tv.set_device_mesh(mesh)
    inp.outer_split(0, s)
    inp.axis(0).parallelize(ParallelType.stream)
    inp.outer_split(2, d)
    inp.axis(2).parallelize(ParallelType.mesh_x)
    w.outer_split(1, d)
    w.axis(1).parallelize(ParallelType.mesh_x)


def stream_loop_statements(host_ir: str) -> list[list[str]]:
    """The statements of each Stream loop of a printed host program (its
    join loops, which only synchronize, included), one string per
    statement, a compute operation's argument lines joined to it."""
    loops: list[list[str]] = []
    loop_indent = None
    for line in host_ir.splitlines():
        indent = len(line) - len(line.lstrip())
        text = line.strip()
        if loop_indent is not None and indent <= loop_indent:
            loop_indent = None
        if loop_indent is None:
            if text.startswith("FOR "):
                loop_indent = indent
                loops.append([])
            continue
        if indent == loop_indent + 2:
            loops[-1].append(text)
        else:
            loops[-1][-1] += " " + text
    return loops


def tensor_name(tv) -> str:
    """How a fusion's tensor starts in a printed program: `T1_g___bfloat[`."""
    return str(tv).split("[")[0] + "["


# Source of a child-process script's fusion: an allgather of x's rows,
# sharded on mesh_x across the ranks of `mesh` (a list the script defines
# before it), into y on every rank of the mesh. Free of braces: the tests
# str.format the scripts it goes into.
ALLGATHER_FUSION = """
import torch
from mdfuser import FusionDefinition, ParallelType
from mdfuser.multidevice import DeviceMesh, shard_tensor
with FusionDefinition() as fd:
    x = fd.define_tensor([-1, 4])
    y = fd.ops.set(x)
    fd.add_output(y)
    for tv in (x, y):
        tv.set_device_mesh(DeviceMesh(mesh))
    x.outer_split(0, len(mesh))
    x.axis(0).parallelize(ParallelType.mesh_x)
"""


def free_port() -> int:
    """A port that is free now, for a child job's store. Drawn below Linux's
    ephemeral range (32768 and up), from which the kernel hands out the
    ports of outgoing connections and of bind(0): a port found free there
    is soon taken by another job's connection, where one drawn at random
    from 16384-32767 is not, and two suites running at once seldom draw
    the same."""
    draw = random.Random(os.getpid() ^ time.monotonic_ns())
    for _ in range(64):
        port = draw.randrange(16384, 32768)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_python(code: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter with `env` on top of a launcher-free environment."""
    full_env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARIABLES}
    full_env.update(env)
    return subprocess.run(
        [sys.executable, "-c", code],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start_world(
    code: str, size: int, env: dict[str, str] | None = None, port: int | None = None
) -> list[subprocess.Popen]:
    """Starts `code` in `size` fresh interpreters that form one job, as
    torchrun without its agent would start them (RANK, WORLD_SIZE, ...), on
    `port` (default: a free one), with MDFUSER_TIMEOUT_S=10 unless `env`
    says otherwise."""
    base = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARIABLES}
    base.update({"MDFUSER_PORT": str(port or free_port()), "MDFUSER_TIMEOUT_S": "10"})
    base.update(env or {})
    processes = []
    for rank in range(size):
        rank_env = dict(base, RANK=str(rank), WORLD_SIZE=str(size))
        rank_env.update(LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(size))
        processes.append(
            subprocess.Popen(
                [sys.executable, "-c", code],
                env=rank_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    return processes


def finish_world(
    processes: list[subprocess.Popen], timeout: float = 120
) -> list[subprocess.CompletedProcess]:
    """Waits for the processes of `start_world`; each rank's result, in rank
    order. Ranks still running `timeout` seconds from now are killed and get
    returncode None."""
    deadline = time.monotonic() + timeout
    results = []
    for rank, process in enumerate(processes):
        try:
            stdout, stderr = process.communicate(timeout=max(0.1, deadline - time.monotonic()))
            returncode = process.returncode
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
            returncode = None
        results.append(subprocess.CompletedProcess([f"rank {rank}"], returncode, stdout, stderr))
    return results


def row_parallel_job(device: str, body: str) -> str:
    """A child job's script for run_world: on each of two ranks, the
    row-parallel linear of helpers (h = 4, one stream chunk) with its
    all-ones shards in `args`, on `device` (a Python expression that may use
    `comm`; a CUDA rank's current GPU is its local rank's), then `body`.
    `CommunicatorBackend`, `sys` and `time` are imported."""
    return f"""
import sys, time, torch
sys.path.insert(0, {os.path.dirname(__file__)!r})
from helpers import row_parallel_linear
from mdfuser import CommunicatorBackend
from mdfuser.multidevice import Communicator, shard_tensor
comm = Communicator.instance()
device = torch.device({device})
if device.type == "cuda":
    torch.cuda.set_device(comm.local_rank() % torch.cuda.device_count())
fd = row_parallel_linear(2, 1, 4)
full = [torch.ones(8, 16, dtype=torch.bfloat16), torch.ones(4, 16, dtype=torch.bfloat16)]
args = [shard_tensor(t, tv).to(device) for t, tv in zip(full, fd.fusion.inputs())]
{body}"""


def fused_pair_job(pair: str, device: str, body: str) -> str:
    """A child job's script for run_world, as row_parallel_job but with a
    pair that the fused matmul kernels compute (examples/ring_decomposition:
    `allgather_linear` or `linear_reduce_scatter`, bf16, 256 rows a rank,
    K and N of 64 a rank, integer shards; `allgather_linear_filling`, 2048
    rows and N of 2048 a rank, whose GEMM fills the GPU, so that copy
    engines move its rows) in `fd` and `args`."""
    examples = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
    # The fusion and its global inputs' shapes: x [t, k] and w [n, k].
    fusion, x, w = {
        "allgather_linear": ("allgather_linear(2, 1, 64, 128)", (512, 64), (128, 64)),
        "allgather_linear_filling": (
            "allgather_linear(2, 1, 64, 4096)",
            (4096, 64),
            (4096, 64),
        ),
        "linear_reduce_scatter": ("linear_reduce_scatter(2, 1, 128, 64)", (512, 128), (64, 128)),
    }[pair]
    return f"""
import sys, time, torch
sys.path.insert(0, {os.path.abspath(examples)!r})
from ring_decomposition import allgather_linear, linear_reduce_scatter
from mdfuser import CommunicatorBackend
from mdfuser.multidevice import Communicator, shard_tensor
comm = Communicator.instance()
device = torch.device({device})
if device.type == "cuda":
    torch.cuda.set_device(comm.local_rank() % torch.cuda.device_count())
fd = {fusion}
g = torch.Generator().manual_seed(3)
full = [torch.randint(-1, 2, shape, generator=g).bfloat16() for shape in ({x}, {w})]
args = [shard_tensor(t, tv).to(device) for t, tv in zip(full, fd.fusion.inputs())]
{body}"""


def run_absent_peer_job(
    device: str,
    backend: str,
    env: dict[str, str],
    options: tuple[str, ...] = (),
    runs: int = 1,
    raises: bool = False,
    pair: str | None = None,
) -> str:
    """Runs a row_parallel_job (or, with `pair`, a fused_pair_job) in which
    both ranks run the fusion `runs` times on `backend` (the
    CommunicatorBackend's name) with the enable `options` (without
    "cuda_graph" among them, the statements one by one), then rank 1 stops
    for 25 s (or, with `raises`, exits on an error it does not catch) while
    rank 0 runs it again and waits for it. Checks that rank 0 ended, with an
    error, within the time bound; returns rank 0's stderr."""
    disable = [] if "cuda_graph" in options else ["cuda_graph"]
    kwargs = (
        f"backend=CommunicatorBackend.{backend}, _enable_options={list(options)}, "
        f"_disable_options={disable}"
    )
    call = f"fd.execute(args, {kwargs})"
    leave = 'raise RuntimeError("rank 1 gives up")' if raises else "time.sleep(25)\n    sys.exit(0)"
    make_job = row_parallel_job if pair is None else lambda *a: fused_pair_job(pair, *a)
    job = make_job(
        device,
        f"""
for _ in range({runs}):
    {call}
torch.cuda.synchronize()
print("first runs done", flush=True)
if comm.rank() == 1:
    {leave}
{call}
torch.cuda.synchronize()
print("the next run finished without rank 1", flush=True)
""",
    )
    start = time.monotonic()
    waiting, absent = run_world(job, 2, env, timeout=90)
    assert time.monotonic() - start < 80, "bounded by the timeout, not by a hang"
    assert "first runs done" in waiting.stdout, waiting.stderr
    assert absent.returncode == (1 if raises else 0), absent.stderr
    assert "finished without rank 1" not in waiting.stdout
    assert waiting.returncode not in (0, None), waiting.stderr
    return waiting.stderr


# A child job of `size` ranks for run_failing_rank_job: the row-parallel
# linear on every rank, with integer inputs whose result is exact.
FAILING_RANK_JOB = """
import faulthandler, sys, time, torch
# Where a rank is, should it still run when its parent gives up on it.
faulthandler.dump_traceback_later(30)
sys.path.insert(0, {helpers!r})
from helpers import row_parallel_linear
from mdfuser import CommunicatorBackend
from mdfuser.multidevice import Communicator, shard_tensor
comm = Communicator.instance()
d = comm.size()
device = torch.device({device})
backend = {backend}
if device.type == "cuda":
    torch.cuda.set_device(device)
fd = row_parallel_linear(d, 2, 12)  # 4h = 48 splits over 2, 3 or 4 ranks
g = torch.Generator().manual_seed(0)
full = [torch.randint(-2, 3, (rows, 48), generator=g).to(torch.bfloat16) for rows in (8, 12)]
expected = torch.nn.functional.linear(full[0].double(), full[1].double()).to(torch.bfloat16)
args = [shard_tensor(t, tv).to(device) for t, tv in zip(full, fd.fusion.inputs())]

def run():
    (out,) = fd.execute(
        args, backend=backend, _enable_options={options!r}, _disable_options={disable!r}
    )
    return out

def step():
    assert torch.equal(run().cpu(), expected)
    print("ok", comm.epoch(), flush=True)

for _ in range({warmups}):
    step()
if comm.rank() == d - 1:
    comm.report_failure("AssertionError: rank " + str(comm.rank()) + "'s check failed")
else:
    start = time.monotonic()
    try:
        # Waits for the last rank, which never comes: on the CPU the wait
        # stops within a second; on GPUs the watchdog releases the stream
        # and the next run says that the communication is stopped.
        run().cpu()
        run()
        print("no error", flush=True)
    except RuntimeError as e:
        print(f"stopped after {{time.monotonic() - start:.1f}} s: {{e}}", flush=True)
comm.recover()
step()
"""


def run_failing_rank_job(
    size: int,
    device: str,
    options: tuple[str, ...],
    env: dict[str, str],
    warmups: int = 1,
    backend: str | None = None,
) -> list[list[str]]:
    """Runs FAILING_RANK_JOB: every rank runs the row-parallel linear
    `warmups` times (with the enable `options`; without "cuda_graph" among
    them, the statements one by one); then the last rank reports a failure
    (as a test harness does when a check fails on it) and skips a run, in
    which the others wait for it; then all recover and run once more. Checks
    that every rank ended well, within a bound far below MDFUSER_TIMEOUT_S
    (a rank still running at 30 s prints where it is), and returns each
    rank's lines. `backend` names a CommunicatorBackend (default:
    execute's)."""
    code = FAILING_RANK_JOB.format(
        helpers=os.path.dirname(__file__),
        device=device,
        options=list(options),
        disable=[] if "cuda_graph" in options else ["cuda_graph"],
        warmups=warmups,
        backend="None" if backend is None else f"CommunicatorBackend.{backend}",
    )
    start = time.monotonic()
    results = run_world(code, size, {"MDFUSER_TIMEOUT_S": "60", **env}, timeout=40)
    took = time.monotonic() - start
    every_rank = "\n".join(
        f"rank {r} ({result.returncode}):\n{result.stdout}\n{result.stderr[-4000:]}"
        for r, result in enumerate(results)
    )
    assert all(result.returncode == 0 for result in results), every_rank
    assert took < 35, f"ended by the timeout, not by the failure:\n{every_rank}"
    return [result.stdout.splitlines() for result in results]


def run_world(
    code: str, size: int, env: dict[str, str] | None = None, timeout: float = 120
) -> list[subprocess.CompletedProcess]:
    """start_world, then finish_world."""
    return finish_world(start_world(code, size, env), timeout)
