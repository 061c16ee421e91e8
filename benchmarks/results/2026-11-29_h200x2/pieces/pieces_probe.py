# ruff: noqa: E731, B023, E501 - the probe of one device call, kept as it ran
"""Probe: the direct reduce-scatter in pieces on two GPUs, k = 2048 and the
reference 1024^3 and h = t = 8192: the calibrated model, the model's
estimates (host_ir dump line), and measured times of the default (model),
whole (1 piece) and pieces forced through models that pick 2, 3, 4."""

import os
import statistics
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, "examples")
sys.path.insert(0, "benchmarks")
from ring_decomposition import linear_reduce_scatter

from mdfuser import DataType, calibration
from mdfuser.multidevice import Communicator

comm = Communicator.instance()
r, d = comm.rank(), comm.size()
CUDA = torch.cuda.is_available()
dev = torch.device("cuda", comm.local_rank()) if CUDA else torch.device("cpu")
if CUDA:
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
else:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29771")
    dist.init_process_group("gloo", rank=r, world_size=d)
KIND = dev.type
SHAPES = [
    (8192, 8192, 2048, torch.bfloat16),
    (8192, 8192, 8192 * 2, torch.bfloat16),
    (1024, 1024, 512, torch.float16),
    (8192, 16384, 2048, torch.bfloat16),
    (4096, 8192, 2048, torch.bfloat16),
]
if not CUDA:
    SHAPES = [(64, 64, 32, torch.bfloat16)]
if os.environ.get("DUMP_ONLY"):
    h, t, k, dt = SHAPES[0]
    x = torch.randn(t, k, device=dev).to(dt)
    w = torch.randn(h, k, device=dev).to(dt)
    calibration.ensure_machine_model(dev)
    fd = linear_reduce_scatter(d, 1, d * k, h)
    fd.execute([x, w])
    sys.exit(0)
model = calibration.ensure_machine_model(dev)
if r == 0:
    print("model", model, flush=True)


def timeit(fn, iters=40, warm=5):
    import time

    for _ in range(warm):
        fn()
    if CUDA:
        torch.cuda.synchronize()
    dist.barrier()
    ts = []
    for _ in range(iters if CUDA else 3):
        dist.barrier()
        if CUDA:
            a = torch.cuda.Event(enable_timing=True)
            b = torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            ts.append(a.elapsed_time(b))
        else:
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts), min(ts)


for h, t, k, dt in SHAPES:
    mdt = DataType.BFloat16 if dt == torch.bfloat16 else DataType.Half
    x = torch.randn(t, k, device=dev).to(dt)
    w = torch.randn(h, k, device=dev).to(dt)
    gemm = lambda: torch.mm(x, w.t())
    out = torch.empty(t // d, h, device=dev, dtype=dt)
    nccl = lambda: dist.reduce_scatter_tensor(out, torch.mm(x, w.t()))
    ref = torch.empty(t // d, h, device=dev, dtype=dt)
    dist.reduce_scatter_tensor(ref, torch.mm(x, w.t()))
    rows = []

    def variant(name, kw, m=None):
        calibration.set_machine_model(KIND, m or model)
        fd = linear_reduce_scatter(d, 1, d * k, h, dtype=mdt)
        res = fd.execute([x, w], **kw)[0]
        err = ((res.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
        prog = fd.last_host_ir()
        perm = prog.count("type=CollectivePermute")
        med, mn = timeit(lambda: fd.execute([x, w], **kw))
        rows.append((name, perm, med, mn, err))

    g = timeit(gemm)
    n = timeit(nccl)
    variant("default", {})
    variant("whole", {"_disable_options": ["reduce_scatter_pieces"]})
    variant("pieces", {"_enable_options": ["reduce_scatter_pieces"]})
    for mv in (0.0, 2e-6):
        variant(
            f"pieces_move{mv * 1e6:.0f}us",
            {"_enable_options": ["reduce_scatter_pieces"]},
            {**model, "move_seconds": mv},
        )
    if not CUDA:
        rows.append(("(cpu: no graphs)", 0, 0, 0, 0))
    elif True:
        pass
    if CUDA:
        variant("whole_nograph", {"_disable_options": ["reduce_scatter_pieces", "cuda_graph"]})
    if CUDA:
        variant(
            "pieces_nograph",
            {"_enable_options": ["reduce_scatter_pieces"], "_disable_options": ["cuda_graph"]},
        )
    calibration.set_machine_model(KIND, model)
    if r == 0:
        print(
            f"\n== h={h} t={t} k={k} {dt} d={d}: gemm_only {g[0]:.4f} (min {g[1]:.4f}) ms, nccl rs+gemm {n[0]:.4f} ms",
            flush=True,
        )
        for name, perm, med, mn, err in rows:
            print(
                f"  {name:24s} permutes={perm} median {med:.4f} min {mn:.4f} ms  x_gemm {med / g[0]:.3f}  err {err:.2e}",
                flush=True,
            )
    # the model's estimate line
dist.destroy_process_group()
