# SPDX-License-Identifier: MIT
"""The MLP block driven by DTensors: a single-GPU definition, DTensors in,
DTensors out.

``define_mlp_forward`` and ``define_mlp_backward`` define the block with
global shapes and no schedule. ``FusionDefinitionWrapper`` derives the
schedule from the DTensors it is called with: here the weights are laid
out as in tensor parallelism (the first linear split on its output
features, the second on its input features) and mdfuser inserts the
allreduce of the second linear's partial sums. The same definitions run
on 2-D meshes (data parallel x tensor parallel) by changing only the mesh
and the placements (tests/python/multidevice/test_mlp_2d.py schedules them
by hand through the raw API).

Run ``mpirun -np 2 python examples/dtensor_mlp.py`` or
``torchrun --nproc-per-node 2 examples/dtensor_mlp.py``: it runs the block
on CPU tensors (Gloo), or on GPUs (NCCL) where every process has one, and
checks it against torch.
"""

from __future__ import annotations

import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor
from transformer_blocks import _gelu_tanh_grad, mlp_reference

from mdfuser import DataType, FusionDefinitionWrapper
from mdfuser.dtensor import init_process_group
from mdfuser.multidevice import Communicator

# The tensor-parallel placements of the forward inputs, on a 1-D mesh.
TP_PLACEMENTS = dict(
    x=[Replicate()],
    w1=[Shard(0)],  # column parallel: output features
    b1=[Shard(0)],
    w2=[Shard(1)],  # row parallel: input features
    b2=[Replicate()],
)


def define_mlp_forward(fd, h: int, dtype=DataType.Float) -> None:
    """y = linear(gelu_tanh(linear(x, w1, b1)), w2, b2), x: [tokens, h]."""
    x = fd.define_tensor([-1, h], dtype=dtype)
    w1 = fd.define_tensor([4 * h, h], dtype=dtype)
    b1 = fd.define_tensor([4 * h], dtype=dtype)
    w2 = fd.define_tensor([h, 4 * h], dtype=dtype)
    b2 = fd.define_tensor([h], dtype=dtype)
    act = fd.ops.gelu(fd.ops.linear(x, w1, b1), approximate="tanh")
    # gelu of BFloat16 or Half is Float (nvFuser's promotion): back to dtype.
    act = act if act.dtype() == dtype else fd.ops.cast(act, dtype)
    fd.add_output(fd.ops.linear(act, w2, b2))


def define_mlp_backward(fd, h: int, dtype=DataType.Float) -> None:
    """The gradients of define_mlp_forward (grad_x, grad_w1, grad_b1,
    grad_w2, grad_b2) from x, the weights, the saved pre-activation
    ``pre = linear(x, w1, b1)`` and the output gradient."""
    ops = fd.ops
    x = fd.define_tensor([-1, h], dtype=dtype)
    w1 = fd.define_tensor([4 * h, h], dtype=dtype)
    w2 = fd.define_tensor([h, 4 * h], dtype=dtype)
    pre = fd.define_tensor([-1, 4 * h], dtype=dtype)
    grad_y = fd.define_tensor([-1, h], dtype=dtype)
    act = ops.gelu(pre, approximate="tanh")
    act = act if act.dtype() == dtype else ops.cast(act, dtype)
    grad_act = ops.matmul(grad_y, w2)
    f32 = [ops.cast(t, DataType.Float) for t in (pre, grad_act)]
    grad_pre = ops.cast(_gelu_tanh_grad(fd, *f32), dtype)
    for grad in (
        ops.matmul(grad_pre, w1),  # grad_x
        ops.matmul(ops.permute(grad_pre, [1, 0]), x),  # grad_w1
        ops.sum(grad_pre, [0]),  # grad_b1
        ops.matmul(ops.permute(grad_y, [1, 0]), act),  # grad_w2
        ops.sum(grad_y, [0]),  # grad_b2
    ):
        fd.add_output(grad)


def mlp_inputs(t: int, h: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Global inputs of the forward block, the same on every process."""
    g = torch.Generator().manual_seed(seed)
    return dict(
        x=torch.randn(t, h, generator=g),
        w1=torch.randn(4 * h, h, generator=g) / 4,
        b1=torch.randn(4 * h, generator=g),
        w2=torch.randn(h, 4 * h, generator=g) / 8,
        b2=torch.randn(h, generator=g),
    )


def device_of(comm: Communicator) -> torch.device:
    """This process's GPU where every local process has one, else the CPU."""
    if torch.cuda.is_available() and torch.cuda.device_count() >= comm.local_size():
        torch.cuda.set_device(comm.local_rank())
        return torch.device("cuda", comm.local_rank())
    return torch.device("cpu")


def main(t: int = 8) -> None:
    init_process_group()  # torch.distributed on mdfuser's processes
    comm = Communicator.instance()
    d = comm.size()
    device = device_of(comm)
    # h a multiple of d, so that the 4h features that w1, b1 and w2 shard
    # split evenly across the devices (15 on 3 devices).
    h = 16 // d * d
    mesh = init_device_mesh(device.type, (d,))

    full = mlp_inputs(t, h)
    dtensors = [
        distribute_tensor(full[name].to(device), mesh, placements)
        for name, placements in TP_PLACEMENTS.items()
    ]
    mlp = FusionDefinitionWrapper(lambda fd: define_mlp_forward(fd, h))
    (y,) = mlp(dtensors)

    expected, _ = mlp_reference(**{k: v.double() for k, v in full.items()})
    torch.testing.assert_close(y.full_tensor().cpu().double(), expected, rtol=1e-5, atol=1e-5)
    if comm.rank() == 0:
        print(
            f"MLP from DTensors on {d} devices ({device.type}): inputs "
            + ", ".join(f"{k} {tuple(p)}" for k, p in TP_PLACEMENTS.items())
            + f"; output {tuple(y.placements)}, matches torch"
        )


if __name__ == "__main__":
    main()
