# SPDX-License-Identifier: MIT
"""Transformer blocks as mdfuser fusions, in tensor-parallel (TP) and
sequence-parallel (SP) form.

Each block is written twice over: a single-GPU definition with global shapes
(``define_*``), then a schedule (``shard_*``) that places tensors on a mesh
and splits axes across devices and streams. mdfuser derives every
communication from the schedule:

- TP: activations are replicated; the first linear of a block is sharded on
  its output features (column parallel), the second on its input features
  (row parallel), whose partial sums are allreduced.
- SP: activations are also split along the tokens; the tokens are gathered
  in front of the column-parallel linear and the row-parallel one's partial
  sums are reduce-scattered back along the tokens.

With ``streams > 1`` the tokens are also split into stream chunks so that
each chunk's communication overlaps the next chunk's GEMMs.

Run ``mpirun -np 2 python examples/transformer_blocks.py`` (or torchrun):
it runs the MLP in both forms and checks it against torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from mdfuser import DataType, FusionDefinition, ParallelType
from mdfuser.multidevice import DeviceMesh

GELU_K = math.sqrt(2.0 / math.pi)


@dataclass
class Mlp:
    """A defined MLP fusion and its input and output tensors."""

    fd: FusionDefinition
    inputs: dict
    outputs: dict


def _tokens(tv, mesh: DeviceMesh, d: int, streams: int, sharded: bool) -> None:
    """Splits the tokens axis (0) of `tv`: into stream chunks, then, for SP,
    each chunk across the devices."""
    axis = 0
    if streams > 1:
        tv.outer_split(0, streams)
        tv.axis(0).parallelize(ParallelType.stream)
        axis = 1
    if sharded:
        tv.outer_split(axis, d)
        tv.axis(axis).parallelize(ParallelType.mesh_x)


def _shard(tv, axis: int, d: int) -> None:
    """Splits `axis` of `tv` across the devices (mesh_x)."""
    tv.outer_split(axis, d)
    tv.axis(axis).parallelize(ParallelType.mesh_x)


def mlp_forward(h: int, d: int, mode: str, streams: int = 1, dtype=DataType.BFloat16) -> Mlp:
    """y = linear(gelu_tanh(linear(x, w1, b1)), w2, b2) for x: [tokens, h]."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, h], dtype=dtype)
        w1 = fd.define_tensor([4 * h, h], dtype=dtype)
        b1 = fd.define_tensor([4 * h], dtype=dtype)
        w2 = fd.define_tensor([h, 4 * h], dtype=dtype)
        b2 = fd.define_tensor([h], dtype=dtype)
        pre = fd.ops.linear(x, w1, b1)
        act = fd.ops.gelu(pre, approximate="tanh")
        y = fd.ops.linear(act, w2, b2)
        fd.add_output(y)

        mesh = DeviceMesh(range(d))
        for tv in (x, w1, b1, w2, b2):
            tv.set_device_mesh(mesh)
        _shard(w1, 0, d)  # column parallel: out_features
        _shard(b1, 0, d)
        _shard(w2, 1, d)  # row parallel: in_features
        _tokens(x, mesh, d, streams, sharded=mode == "sp")
        if mode == "sp":
            y.set_device_mesh(mesh)
            _tokens(y, mesh, d, streams, sharded=True)
    return Mlp(fd, dict(x=x, w1=w1, b1=b1, w2=w2, b2=b2), dict(y=y))


def _gelu_tanh_grad(fd, pre, grad):
    """grad * d gelu_tanh(pre) / d pre, from primitives."""
    ops = fd.ops
    cube = ops.mul(ops.mul(pre, pre), pre)
    t = ops.tanh(ops.mul(GELU_K, ops.add(pre, ops.mul(0.044715, cube))))
    left = ops.mul(0.5, ops.add(1.0, t))
    dt = ops.mul(
        ops.sub(1.0, ops.mul(t, t)),
        ops.mul(GELU_K, ops.add(1.0, ops.mul(3 * 0.044715, ops.mul(pre, pre)))),
    )
    right = ops.mul(ops.mul(0.5, pre), dt)
    return ops.mul(grad, ops.add(left, right))


def mlp_backward(h: int, d: int, mode: str, streams: int = 1, dtype=DataType.BFloat16) -> Mlp:
    """The gradients of mlp_forward given x, the weights, the saved
    pre-activation `pre` = linear(x, w1, b1) and the output gradient."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, h], dtype=dtype)
        w1 = fd.define_tensor([4 * h, h], dtype=dtype)
        w2 = fd.define_tensor([h, 4 * h], dtype=dtype)
        pre = fd.define_tensor([-1, 4 * h], dtype=dtype)
        grad_y = fd.define_tensor([-1, h], dtype=dtype)
        ops = fd.ops
        act = ops.gelu(pre, approximate="tanh")
        grad_b2 = ops.sum(grad_y, [0])
        grad_w2 = ops.matmul(ops.permute(grad_y, [1, 0]), act)
        grad_act = ops.matmul(grad_y, w2)
        grad_pre = ops.cast(_gelu_tanh_grad(fd, pre, grad_act), dtype)
        grad_b1 = ops.sum(grad_pre, [0])
        grad_w1 = ops.matmul(ops.permute(grad_pre, [1, 0]), x)
        grad_x = ops.matmul(grad_pre, w1)
        outputs = dict(
            grad_x=grad_x, grad_w1=grad_w1, grad_b1=grad_b1, grad_w2=grad_w2, grad_b2=grad_b2
        )
        for tv in outputs.values():
            fd.add_output(tv)

        mesh = DeviceMesh(range(d))
        for tv in (x, w1, w2, pre, grad_y):
            tv.set_device_mesh(mesh)
        _shard(w1, 0, d)
        _shard(w2, 1, d)
        _shard(pre, 1, d)
        sharded = mode == "sp"
        _tokens(x, mesh, d, 1, sharded)
        _tokens(grad_y, mesh, d, streams, sharded)
        if sharded:
            grad_x.set_device_mesh(mesh)
            _tokens(grad_x, mesh, d, 1, True)
    return Mlp(fd, dict(x=x, w1=w1, w2=w2, pre=pre, grad_y=grad_y), outputs)


def mlp_reference(x, w1, b1, w2, b2):
    """The MLP in plain torch, in float64."""
    f = torch.nn.functional
    x, w1, b1, w2, b2 = (t.double() for t in (x, w1, b1, w2, b2))
    pre = f.linear(x, w1, b1)
    return f.linear(f.gelu(pre, approximate="tanh"), w2, b2), pre


def main() -> None:
    from mdfuser.multidevice import Communicator, shard_tensor

    comm = Communicator.instance()
    d = comm.size()
    device = torch.device("cuda", comm.local_rank()) if torch.cuda.is_available() else "cpu"
    h, t = 64, 64 * d
    torch.manual_seed(0)
    full = dict(
        x=torch.randn(t, h),
        w1=torch.randn(4 * h, h) / 8,
        b1=torch.randn(4 * h),
        w2=torch.randn(h, 4 * h) / 16,
        b2=torch.randn(h),
    )
    expected, _ = mlp_reference(**full)
    for mode in ("tp", "sp"):
        block = mlp_forward(h, d, mode, streams=2, dtype=DataType.Float)
        args = [shard_tensor(full[k], tv).to(device) for k, tv in block.inputs.items()]
        (y,) = block.fd.execute(args)
        want = shard_tensor(expected.float(), block.outputs["y"])
        torch.testing.assert_close(y.cpu(), want, rtol=1e-4, atol=1e-4)
        if comm.rank() == 0:
            print(f"MLP {mode.upper()} on {d} devices: output {tuple(y.shape)} matches torch")


if __name__ == "__main__":
    main()
