# SPDX-License-Identifier: MIT
"""The matmul–collective pairs that mdfuser lowers into ring decompositions.

- allgather + column-parallel linear: sequence-parallel x [t, k] (tokens
  across the devices) feeding a linear whose weight [n, k] is split on its
  out_features;
- row-parallel linear + reduce-scatter: x [t, k] and w [n, k] split on
  in_features, the output's tokens across the devices.

With `_enable_options=["ring_decomposition"]` each becomes a ring of
point-to-point moves beside the GEMMs; with
`backend=CommunicatorBackend.cuda` (CUDA tensors) the moves run on copy
engines into the peers' symmetric memory. This script runs both pairs both
ways and checks them against torch:

    mpirun -np 2 python examples/ring_decomposition.py
    torchrun --nproc-per-node 2 examples/ring_decomposition.py
"""

import torch

from mdfuser import CommunicatorBackend, DataType, FusionDefinition, ParallelType
from mdfuser.multidevice import Communicator, DeviceMesh, shard_tensor


def split_across(tv, axis: int, d: int) -> None:
    tv.outer_split(axis, d)
    tv.axis(axis).parallelize(ParallelType.mesh_x)


def split_tokens(tv, d: int, s: int) -> None:
    """The tokens (axis 0) in s stream chunks, each cut across the devices."""
    axis = 0
    if s > 1:
        tv.outer_split(0, s)
        tv.axis(0).parallelize(ParallelType.stream)
        axis = 1
    split_across(tv, axis, d)


def allgather_linear(
    d: int, s: int, k: int, n: int, bias: bool = False, dtype=DataType.BFloat16
) -> FusionDefinition:
    """Sequence-parallel x [t, k] (tokens across the devices) feeding a
    column-parallel linear: w [n, k] and b [n] split on out_features."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, k], contiguity=True, dtype=dtype)
        w = fd.define_tensor([n, k], contiguity=True, dtype=dtype)
        inputs = [x, w]
        if bias:
            inputs.append(fd.define_tensor([n], contiguity=True, dtype=dtype))
        fd.add_output(fd.ops.linear(*inputs))
        mesh = DeviceMesh(range(d))
        for tv in inputs:
            tv.set_device_mesh(mesh)
        split_tokens(x, d, s)
        for tv in inputs[1:]:
            split_across(tv, 0, d)
    return fd


def linear_reduce_scatter(
    d: int, s: int, k: int, n: int, dtype=DataType.BFloat16
) -> FusionDefinition:
    """A row-parallel linear (x [t, k] and w [n, k] split on in_features)
    whose output is sequence parallel: its partial sums are
    reduce-scattered along the tokens."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, k], contiguity=True, dtype=dtype)
        w = fd.define_tensor([n, k], contiguity=True, dtype=dtype)
        out = fd.ops.linear(x, w)
        fd.add_output(out)
        mesh = DeviceMesh(range(d))
        for tv in (x, w, out):
            tv.set_device_mesh(mesh)
        axis = 1
        if s > 1:
            x.outer_split(0, s)
            x.axis(0).parallelize(ParallelType.stream)
            axis = 2
        split_across(x, axis, d)
        split_across(w, 1, d)
        split_tokens(out, d, s)
    return fd


def main() -> None:
    comm = Communicator.instance()
    d, rank = comm.size(), comm.rank()
    device = torch.device("cpu")
    if torch.cuda.is_available() and torch.cuda.device_count() >= comm.local_size():
        device = torch.device("cuda", comm.local_rank())
        torch.cuda.set_device(device)
    ways = {"collectives": {}, "rings": {"_enable_options": ["ring_decomposition"]}}
    if device.type == "cuda":
        ways["rings on the CUDA backend"] = {"backend": CommunicatorBackend.cuda}

    # Entries in {-1, 0, 1} and k <= 256 (up to 32 devices): every sum is
    # exact in bf16, so every way must equal torch exactly. The extents the
    # devices split (t, k and n) are multiples of d.
    s, t, k, n = 2, 4 * d, 8 * d, 8 * d
    g = torch.Generator().manual_seed(0)
    x = torch.randint(-1, 2, (t, k), generator=g).to(torch.bfloat16)
    w = torch.randint(-1, 2, (n, k), generator=g).to(torch.bfloat16)
    expected = torch.nn.functional.linear(x.double(), w.double()).to(torch.bfloat16)
    for name, fd in (
        ("allgather + linear", allgather_linear(d, s, k, n)),
        ("linear + reduce-scatter", linear_reduce_scatter(d, s, k, n)),
    ):
        args = [shard_tensor(t_, tv).to(device) for t_, tv in zip((x, w), fd.fusion.inputs())]
        for way, options in ways.items():
            (out,) = fd.execute(args, **options)
            # The output's sharding is known once the fusion ran.
            want = shard_tensor(expected, fd.output_tensors()[0])
            if not torch.equal(out.cpu(), want):
                raise SystemExit(f"rank {rank}: {name} with {way} differs from torch")
            if rank == 0:
                print(f"{name} with {way} on {d} devices ({device.type}): matches torch")


if __name__ == "__main__":
    main()
