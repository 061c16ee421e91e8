# SPDX-License-Identifier: MIT
"""Row-parallel linear with stream-overlapped allreduce.

Each of d processes holds a [t, 4h / d] slice of the input and a
[h, 4h / d] slice of the weight. mdfuser computes the full [t, h] output on
every process as s chunked matmuls whose partial sums are allreduced chunk by
chunk, each chunk on its own worker stream.

    mpirun -np 2 python examples/row_parallel_linear.py
    torchrun --nproc-per-node 2 examples/row_parallel_linear.py

On a machine without GPUs it runs on CPU tensors with Gloo.
"""

import argparse
import os

import torch

from mdfuser import CommunicatorBackend, DataType, FusionDefinition, ParallelType
from mdfuser.multidevice import Communicator, DeviceMesh, shard_tensor


def define(d: int, s: int, h: int) -> FusionDefinition:
    with FusionDefinition() as fd:
        inp = fd.define_tensor(shape=[-1, 4 * h], contiguity=True, dtype=DataType.BFloat16)
        w = fd.define_tensor(shape=[h, 4 * h], contiguity=True, dtype=DataType.BFloat16)
        out = fd.ops.linear(inp, w)
        fd.add_output(out)

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--hidden",
        type=int,
        help="h, whose 4h must split evenly over the processes (default: the largest "
        "multiple of the processes up to 64, e.g. 63 on 3)",
    )
    parser.add_argument("--tokens", type=int, default=96, help="t")
    parser.add_argument("--chunks", type=int, default=3, help="s, stream chunks")
    parser.add_argument(
        "--backend",
        choices=["nccl", "cuda", "gloo"],
        help="what carries the communications (default: the CUDA backend on GPUs of one "
        "host that map each other's memory, else NCCL; Gloo on CPUs); "
        "cuda: copy engines over symmetric memory, as ring decompositions",
    )
    parser.add_argument(
        "--cuda-graph",
        action="store_true",
        help="run three times with the cuda_graph option (the statements, then a "
        "capture and its replay, then a replay) and check the last",
    )
    args = parser.parse_args()

    comm = Communicator.instance()
    d, rank = comm.size(), comm.rank()
    device = torch.device("cpu")
    if torch.cuda.is_available():
        # MDFUSER_SHARE_DEVICES=1 lets several processes share a GPU.
        device = torch.device("cuda", comm.local_rank() % torch.cuda.device_count())
    if device.type == "cuda":
        torch.cuda.set_device(device)

    if rank == 0 and "NVFUSER_DUMP" not in os.environ and "MDFUSER_DUMP" not in os.environ:
        print("Set NVFUSER_DUMP=host_ir to print the host program at compile time.")
    h = args.hidden if args.hidden is not None else 64 // d * d
    fd = define(d, args.chunks, h)

    # Entries in {-1, 0, 1}: while 4h <= 256, every partial and full sum is an
    # integer bf16 holds exactly, so the result must equal torch's exactly.
    # Larger sizes are checked to bf16 accuracy.
    torch.manual_seed(0)
    t = args.tokens
    inp = torch.randint(-1, 2, (t, 4 * h), dtype=torch.bfloat16)
    w = torch.randint(-1, 2, (h, 4 * h), dtype=torch.bfloat16)
    inp_tv, w_tv = fd.fusion.inputs()
    backend = None if args.backend is None else getattr(CommunicatorBackend, args.backend)
    inputs = [shard_tensor(inp, inp_tv).to(device), shard_tensor(w, w_tv).to(device)]
    options = ["cuda_graph"] if args.cuda_graph else []
    for _ in range(3 if args.cuda_graph else 1):
        (out,) = fd.execute(inputs, backend=backend, _enable_options=options)

    expected = torch.nn.functional.linear(inp.double(), w.double())
    got = out.cpu().double()
    if 4 * h <= 256:
        ok, how = torch.equal(got, expected), "exactly"
    else:
        error = ((got - expected).norm() / expected.norm()).item()
        ok, how = error < 1e-2, f"to relative error {error:.1e}"
    if rank == 0:
        print(fd.last_host_ir())
        print(
            f"row-parallel linear: d={d} s={args.chunks} h={h} t={t} on {device.type}"
            f"{'' if args.backend is None else ' over ' + args.backend}"
            f"{', replayed as a CUDA graph' if args.cuda_graph else ''}: "
            f"output {tuple(out.shape)} {'matches' if ok else 'DIFFERS FROM'} torch {how}"
        )
    if not ok:
        raise SystemExit(f"rank {rank}: mdfuser's result differs from torch's")


if __name__ == "__main__":
    main()
