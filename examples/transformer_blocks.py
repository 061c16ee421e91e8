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
    """Splits the tokens axis (0) of `tv`: into stream chunks (None: as many
    as mdfuser chooses), then, for SP, each chunk across the devices."""
    axis = 0
    if streams is None or streams > 1:
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


def _as(fd: FusionDefinition, tv, dtype):
    """`tv` in `dtype`: arithmetic on BFloat16 and Half returns Float, as in
    nvFuser, and the block keeps torch's module dtypes (the cast folds into
    the kernel before it)."""
    return tv if tv.dtype() == dtype else fd.ops.cast(tv, dtype)


def mlp_forward(h: int, d: int, mode: str, streams: int = 1, dtype=DataType.BFloat16) -> Mlp:
    """y = linear(gelu_tanh(linear(x, w1, b1)), w2, b2) for x: [tokens, h]."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, h], dtype=dtype)
        w1 = fd.define_tensor([4 * h, h], dtype=dtype)
        b1 = fd.define_tensor([4 * h], dtype=dtype)
        w2 = fd.define_tensor([h, 4 * h], dtype=dtype)
        b2 = fd.define_tensor([h], dtype=dtype)
        pre = fd.ops.linear(x, w1, b1)
        act = _as(fd, fd.ops.gelu(pre, approximate="tanh"), dtype)
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
        act = _as(fd, ops.gelu(pre, approximate="tanh"), dtype)
        grad_b2 = ops.sum(grad_y, [0])
        grad_w2 = ops.matmul(ops.permute(grad_y, [1, 0]), act)
        grad_act = ops.matmul(grad_y, w2)
        # The pointwise gradient in float32, as torch's gelu_backward
        # computes it, rounded once to the block's dtype.
        f32 = [ops.cast(t, DataType.Float) for t in (pre, grad_act)]
        grad_pre = ops.cast(_gelu_tanh_grad(fd, *f32), dtype)
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
    """The MLP in plain torch, in the inputs' dtype: (y, pre-activation)."""
    f = torch.nn.functional
    pre = f.linear(x, w1, b1)
    return f.linear(f.gelu(pre, approximate="tanh"), w2, b2), pre


@dataclass
class Attention:
    """Sizes of a multi-head attention block on activations [seq, batch, e]
    (sequence first, so that sequence parallelism cuts the outermost axis)."""

    seq: int
    batch: int
    e: int
    heads: int

    @property
    def head_size(self) -> int:
        return self.e // self.heads


def _split_heads(fd, qkv, a: Attention):
    """q, k, v [batch, heads, seq, head_size] from qkv [seq, batch, 3e]
    laid out head-major: each head's q, k and v rows are adjacent in the
    weight, so a device's share of the rows holds whole heads."""
    ops = fd.ops
    per_head = ops.reshape(qkv, [a.seq, a.batch, a.heads, 3 * a.head_size])
    parts = []
    for i in range(3):
        part = ops.slice(
            per_head,
            [0, 0, 0, i * a.head_size],
            [a.seq, a.batch, a.heads, (i + 1) * a.head_size],
        )
        parts.append(ops.permute(part, [1, 2, 0, 3]))
    return parts


def _merge_heads(fd, o, a: Attention):
    """[batch, heads, seq, head_size] -> [seq, batch, e]."""
    return fd.ops.reshape(fd.ops.permute(o, [2, 0, 1, 3]), [a.seq, a.batch, a.e])


def _attention(fd, x, w_qkv, b_qkv, w_o, b_o, a: Attention):
    qkv = fd.ops.linear(x, w_qkv, b_qkv)
    q, k, v = _split_heads(fd, qkv, a)
    o, lse, _, _ = fd.ops.sdpfa_fwd(q, k, v, dropout_p=0.0, is_causal=True)
    return fd.ops.linear(_merge_heads(fd, o, a), w_o, b_o), qkv, o, lse


def _shard_sequence(tv, d: int) -> None:
    """SP: the sequence axis (0) across the devices."""
    _shard(tv, 0, d)


def _batch_streams(tv, streams: int) -> None:
    """Splits the batch axis (1) into stream chunks: attention is
    independent across the batch, so each chunk can run the whole block
    (None: as many chunks as mdfuser chooses)."""
    if streams is None or streams > 1:
        tv.outer_split(1, streams)
        tv.axis(1).parallelize(ParallelType.stream)


def _activations(x, y, mesh: DeviceMesh, d: int, mode: str, streams: int) -> None:
    """The layout of a block's input x and output y [seq, batch, e]: batch
    stream chunks; for SP, also the sequence across the devices."""
    # The batch split first: it is axis 1 of the unsplit tensor.
    _batch_streams(x, streams)
    if mode == "sp":
        _shard_sequence(x, d)
        y.set_device_mesh(mesh)
        _batch_streams(y, streams)
        _shard_sequence(y, d)


def attention_forward(
    a: Attention, d: int, mode: str, streams: int = 1, dtype=DataType.BFloat16
) -> Mlp:
    """y = linear(merge(sdpa(split(linear(x, w_qkv, b_qkv)))), w_o, b_o),
    causal, heads across the devices; with `streams` > 1 the batch is split
    into stream chunks."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([a.seq, a.batch, a.e], dtype=dtype)
        w_qkv = fd.define_tensor([3 * a.e, a.e], dtype=dtype)
        b_qkv = fd.define_tensor([3 * a.e], dtype=dtype)
        w_o = fd.define_tensor([a.e, a.e], dtype=dtype)
        b_o = fd.define_tensor([a.e], dtype=dtype)
        y, qkv, o, lse = _attention(fd, x, w_qkv, b_qkv, w_o, b_o, a)
        outputs = dict(y=y, qkv=qkv, o=o, lse=lse)
        for tv in outputs.values():
            fd.add_output(tv)

        mesh = DeviceMesh(range(d))
        for tv in (x, w_qkv, b_qkv, w_o, b_o):
            tv.set_device_mesh(mesh)
        _shard(w_qkv, 0, d)  # heads
        _shard(b_qkv, 0, d)
        _shard(w_o, 1, d)
        _activations(x, y, mesh, d, mode, streams)
    return Mlp(fd, dict(x=x, w_qkv=w_qkv, b_qkv=b_qkv, w_o=w_o, b_o=b_o), outputs)


def attention_backward(a: Attention, d: int, mode: str, dtype=DataType.BFloat16) -> Mlp:
    """The gradients of attention_forward from the saved qkv, sdpa output
    `o` and log-sum-exp `lse`."""
    with FusionDefinition() as fd:
        ops = fd.ops
        x = fd.define_tensor([a.seq, a.batch, a.e], dtype=dtype)
        w_qkv = fd.define_tensor([3 * a.e, a.e], dtype=dtype)
        w_o = fd.define_tensor([a.e, a.e], dtype=dtype)
        qkv = fd.define_tensor([a.seq, a.batch, 3 * a.e], dtype=dtype)
        o = fd.define_tensor([a.batch, a.heads, a.seq, a.head_size], dtype=dtype)
        lse = fd.define_tensor([a.batch, a.heads, a.seq], dtype=DataType.Float)
        grad_y = fd.define_tensor([a.seq, a.batch, a.e], dtype=dtype)
        tokens = a.seq * a.batch

        grad_b_o = ops.sum(grad_y, [0, 1])
        merged = _merge_heads(fd, o, a)
        grad_w_o = ops.matmul(
            ops.permute(ops.reshape(grad_y, [tokens, a.e]), [1, 0]),
            ops.reshape(merged, [tokens, a.e]),
        )
        grad_merged = ops.matmul(grad_y, w_o)
        grad_o = ops.permute(
            ops.reshape(grad_merged, [a.seq, a.batch, a.heads, a.head_size]), [1, 2, 0, 3]
        )
        q, k, v = _split_heads(fd, qkv, a)
        grads = ops.sdpfa_bwd(grad_o, q, k, v, o, lse, 0.0, True, None, None, None)
        per_head = ops.cat([ops.permute(g, [2, 0, 1, 3]) for g in grads], 3)
        grad_qkv = ops.reshape(per_head, [a.seq, a.batch, 3 * a.e])
        grad_b_qkv = ops.sum(grad_qkv, [0, 1])
        grad_w_qkv = ops.matmul(
            ops.permute(ops.reshape(grad_qkv, [tokens, 3 * a.e]), [1, 0]),
            ops.reshape(x, [tokens, a.e]),
        )
        grad_x = ops.matmul(grad_qkv, w_qkv)
        outputs = dict(
            grad_x=grad_x,
            grad_w_qkv=grad_w_qkv,
            grad_b_qkv=grad_b_qkv,
            grad_w_o=grad_w_o,
            grad_b_o=grad_b_o,
        )
        for tv in outputs.values():
            fd.add_output(tv)

        mesh = DeviceMesh(range(d))
        for tv in (x, w_qkv, w_o, qkv, o, lse, grad_y):
            tv.set_device_mesh(mesh)
        _shard(w_qkv, 0, d)
        _shard(w_o, 1, d)
        _shard(qkv, 2, d)
        _shard(o, 1, d)
        _shard(lse, 1, d)
        if mode == "sp":
            _shard_sequence(x, d)
            _shard_sequence(grad_y, d)
            grad_x.set_device_mesh(mesh)
            _shard_sequence(grad_x, d)
    return Mlp(fd, dict(x=x, w_qkv=w_qkv, w_o=w_o, qkv=qkv, o=o, lse=lse, grad_y=grad_y), outputs)


def attention_reference(x, w_qkv, b_qkv, w_o, b_o, a: Attention):
    """The attention block in plain torch: (y, qkv, o, lse) with lse from
    the log-sum-exp of the scaled, masked scores."""
    f = torch.nn.functional
    qkv = f.linear(x, w_qkv, b_qkv)
    per_head = qkv.view(a.seq, a.batch, a.heads, 3 * a.head_size)
    q, k, v = (
        per_head[..., i * a.head_size : (i + 1) * a.head_size].permute(1, 2, 0, 3) for i in range(3)
    )
    o = f.scaled_dot_product_attention(q, k, v, is_causal=True)
    acc = torch.promote_types(q.dtype, torch.float32)  # lse is float32 at least
    scores = (q.to(acc) @ k.to(acc).transpose(-1, -2)) / math.sqrt(a.head_size)
    mask = torch.ones(a.seq, a.seq, dtype=torch.bool, device=x.device).tril()
    lse = torch.logsumexp(scores.masked_fill(~mask, float("-inf")), dim=-1)
    merged = o.permute(2, 0, 1, 3).reshape(a.seq, a.batch, a.e)
    return f.linear(merged, w_o, b_o), qkv, o, lse


def layer_forward(
    a: Attention, d: int, mode: str, streams: int = 1, dtype=DataType.BFloat16
) -> Mlp:
    """A pre-norm transformer layer on x [seq, batch, e]:
    h = x + attention(layer_norm(x)); y = h + mlp(layer_norm(h)); with
    `streams` > 1 the batch is split into stream chunks."""
    e = a.e
    with FusionDefinition() as fd:
        ops = fd.ops
        x = fd.define_tensor([a.seq, a.batch, e], dtype=dtype)
        ln0_w = fd.define_tensor([e], dtype=dtype)
        ln0_b = fd.define_tensor([e], dtype=dtype)
        w_qkv = fd.define_tensor([3 * e, e], dtype=dtype)
        b_qkv = fd.define_tensor([3 * e], dtype=dtype)
        w_o = fd.define_tensor([e, e], dtype=dtype)
        b_o = fd.define_tensor([e], dtype=dtype)
        ln1_w = fd.define_tensor([e], dtype=dtype)
        ln1_b = fd.define_tensor([e], dtype=dtype)
        w1 = fd.define_tensor([4 * e, e], dtype=dtype)
        b1 = fd.define_tensor([4 * e], dtype=dtype)
        w2 = fd.define_tensor([e, 4 * e], dtype=dtype)
        b2 = fd.define_tensor([e], dtype=dtype)
        attn, _, _, _ = _attention(
            fd, _as(fd, ops.layer_norm(x, 1, ln0_w, ln0_b), dtype), w_qkv, b_qkv, w_o, b_o, a
        )
        h = _as(fd, ops.add(x, attn), dtype)
        pre = ops.linear(_as(fd, ops.layer_norm(h, 1, ln1_w, ln1_b), dtype), w1, b1)
        act = _as(fd, ops.gelu(pre, approximate="tanh"), dtype)
        y = _as(fd, ops.add(h, ops.linear(act, w2, b2)), dtype)
        fd.add_output(y)

        inputs = dict(
            x=x,
            ln0_w=ln0_w,
            ln0_b=ln0_b,
            w_qkv=w_qkv,
            b_qkv=b_qkv,
            w_o=w_o,
            b_o=b_o,
            ln1_w=ln1_w,
            ln1_b=ln1_b,
            w1=w1,
            b1=b1,
            w2=w2,
            b2=b2,
        )
        mesh = DeviceMesh(range(d))
        for tv in inputs.values():
            tv.set_device_mesh(mesh)
        for tv in (w_qkv, b_qkv, w1, b1):
            _shard(tv, 0, d)
        for tv in (w_o, w2):
            _shard(tv, 1, d)
        _activations(x, y, mesh, d, mode, streams)
    return Mlp(fd, inputs, dict(y=y))


def layer_reference(inputs: dict, a: Attention):
    """The layer in plain torch, in the inputs' dtype."""
    f = torch.nn.functional
    t = inputs
    ln0 = f.layer_norm(t["x"], (a.e,), t["ln0_w"], t["ln0_b"])
    attn, _, _, _ = attention_reference(ln0, t["w_qkv"], t["b_qkv"], t["w_o"], t["b_o"], a)
    h = t["x"] + attn
    ln1 = f.layer_norm(h, (a.e,), t["ln1_w"], t["ln1_b"])
    y, _ = mlp_reference(ln1, t["w1"], t["b1"], t["w2"], t["b2"])
    return h + y


def main() -> None:
    from mdfuser.multidevice import Communicator, shard_tensor

    comm = Communicator.instance()
    d = comm.size()
    device = torch.device("cpu")
    if torch.cuda.is_available() and torch.cuda.device_count() >= comm.local_size():
        device = torch.device("cuda", comm.local_rank())
    # h a multiple of d, so that the MLP's 4h features split evenly
    # across the devices (63 on 3 devices).
    h, t = 64 // d * d, 64 * d
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
        want = shard_tensor(expected, block.outputs["y"])
        torch.testing.assert_close(y.cpu(), want)
        if comm.rank() == 0:
            print(f"MLP {mode.upper()} on {d} devices: output {tuple(y.shape)} matches torch")


if __name__ == "__main__":
    main()
