# SPDX-License-Identifier: MIT
"""The cases of benchmarks/transformer_blocks.py (a block in a mode at a size)
with their global inputs, and the hand-written PyTorch version of each block
that mdfuser's runs are checked and timed against."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F


def _load_example():
    """examples/transformer_blocks.py, which defines the blocks, under a
    module name of its own: this benchmark's script has its file name."""
    path = os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "examples", "transformer_blocks.py"
    )
    spec = importlib.util.spec_from_file_location("transformer_blocks_example", path)
    module = importlib.util.module_from_spec(spec)
    # Registered first: its dataclasses look their module up.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


_example = _load_example()
Attention = _example.Attention
attention_forward = _example.attention_forward
attention_reference = _example.attention_reference
layer_forward = _example.layer_forward
layer_reference = _example.layer_reference
mlp_forward = _example.mlp_forward
mlp_reference = _example.mlp_reference


@dataclass
class Case:
    """One block in one mode at one size."""

    block: str
    mode: str
    h: int
    tokens: int  # MLP only
    attention: Attention | None  # attention and layer

    @property
    def t(self) -> int:
        a = self.attention
        return self.tokens if a is None else a.seq * a.batch

    def define(self, d: int, s: int, dtype):
        """The example's fusion with s stream chunks."""
        if self.block == "mlp":
            return mlp_forward(self.h, d, self.mode, s, dtype)
        make = attention_forward if self.block == "attention" else layer_forward
        return make(self.attention, d, self.mode, s, dtype)

    def flops(self, d: int) -> int:
        """GEMM and attention flops of one rank's shard: every rank multiplies
        all tokens by its 1/d of the weights (SP gathers the tokens first);
        causal attention counts half of the QK^T and PV products."""
        mlp = 16 * self.t * self.h * self.h // d
        if self.block == "mlp":
            return mlp
        a = self.attention
        attention = 8 * self.t * a.e * a.e // d + 2 * a.batch * a.seq * a.seq * a.e // d
        return attention + (mlp if self.block == "layer" else 0)


def global_inputs(case: Case, device, dtype, seed: int) -> dict[str, torch.Tensor]:
    """The block's global inputs, the same on every rank; weights scaled by
    1/sqrt(fan_in) so that activations stay near 1."""
    g = torch.Generator(device=device).manual_seed(seed)
    h = case.h

    def randn(*shape, scale=1.0, shift=0.0):
        x = torch.randn(*shape, generator=g, device=device, dtype=torch.float32)
        return (x * scale + shift).to(dtype)

    mlp = dict(
        w1=randn(4 * h, h, scale=h**-0.5),
        b1=randn(4 * h, scale=0.1),
        w2=randn(h, 4 * h, scale=(4 * h) ** -0.5),
        b2=randn(h, scale=0.1),
    )
    if case.block == "mlp":
        return dict(x=randn(case.tokens, h), **mlp)
    a = case.attention
    x = randn(a.seq, a.batch, h)
    attention = dict(
        w_qkv=randn(3 * h, h, scale=h**-0.5),
        b_qkv=randn(3 * h, scale=0.1),
        w_o=randn(h, h, scale=h**-0.5),
        b_o=randn(h, scale=0.1),
    )
    if case.block == "attention":
        return dict(x=x, **attention)
    norms = {
        f"ln{i}_{p}": randn(h, scale=0.1, shift=1.0 if p == "w" else 0.0)
        for i in (0, 1)
        for p in ("w", "b")
    }
    return dict(
        x=x,
        ln0_w=norms["ln0_w"],
        ln0_b=norms["ln0_b"],
        **attention,
        ln1_w=norms["ln1_w"],
        ln1_b=norms["ln1_b"],
        **mlp,
    )


# --- the hand-written PyTorch reference ------------------------------------


def local_tokens(t: torch.Tensor, d: int, rank: int, s: int = 1) -> torch.Tensor:
    """rank's rows of t, mdfuser's SP layout: axis 0 cut into s stream
    chunks, each chunk across the d devices."""
    parts = t.unflatten(0, (s, d, t.size(0) // (s * d)))
    return parts[:, rank].flatten(0, 1).contiguous()


def local_weights(full: dict, d: int, rank: int) -> dict[str, torch.Tensor]:
    """Column-parallel weights (w1, b1, w_qkv, b_qkv) by output rows,
    row-parallel ones (w2, w_o) by input columns; the rest replicated."""
    local = {}
    for name, t in full.items():
        if name in ("w1", "b1", "w_qkv", "b_qkv"):
            local[name] = t.tensor_split(d, 0)[rank].contiguous()
        elif name in ("w2", "w_o"):
            local[name] = t.tensor_split(d, 1)[rank].contiguous()
        elif name != "x":
            local[name] = t
    return local


def gather(x: torch.Tensor, d: int) -> torch.Tensor:
    """SP: all ranks' rows (axis 0) of x."""
    out = x.new_empty(d * x.size(0), *x.shape[1:])
    dist.all_gather_into_tensor(out, x.contiguous())
    return out


def scatter(partial: torch.Tensor, d: int) -> torch.Tensor:
    """SP: the sum over ranks of partial, this rank's rows (axis 0) of it."""
    out = partial.new_empty(partial.size(0) // d, *partial.shape[1:])
    dist.reduce_scatter_tensor(out, partial.contiguous())
    return out


def mlp_partial(x: torch.Tensor, w: dict) -> torch.Tensor:
    """This rank's partial sums of the MLP without b2: column-parallel
    linear, gelu, row-parallel linear."""
    act = F.gelu(F.linear(x, w["w1"], w["b1"]), approximate="tanh")
    return F.linear(act, w["w2"])


def attention_partial(x: torch.Tensor, w: dict, heads: int) -> torch.Tensor:
    """This rank's partial sums of the attention block without b_o, on its
    `heads` local heads (qkv laid out head-major, as in the example)."""
    seq, batch = x.shape[:2]
    qkv = F.linear(x, w["w_qkv"], w["b_qkv"])
    size = qkv.size(-1) // (3 * heads)
    per_head = qkv.view(seq, batch, heads, 3 * size)
    q, k, v = (per_head[..., i * size : (i + 1) * size].permute(1, 2, 0, 3) for i in range(3))
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return F.linear(o.permute(2, 0, 1, 3).reshape(seq, batch, heads * size), w["w_o"])


def reference(case: Case, w: dict, d: int, communicate: bool = True) -> Callable:
    """fn(x, out): the block on this rank's input x (replicated for TP, its
    rows for SP), writing this rank's output into out (may be a strided
    chunk of a larger output). Without `communicate` (compute_only), SP's
    gathers become local copies of the same size and its reduce-scatters
    keep this rank's rows of the partial sums; TP's allreduces are left out."""
    sp = case.mode == "sp"

    def gather_rows(x: torch.Tensor) -> torch.Tensor:
        return gather(x, d) if communicate else torch.cat([x] * d)

    def reduce(partial: torch.Tensor) -> torch.Tensor:
        if sp:
            return scatter(partial, d) if communicate else partial[: partial.size(0) // d]
        if communicate:
            dist.all_reduce(partial)
        return partial

    heads = 0 if case.attention is None else case.attention.heads // d
    e = case.h

    def mlp(x, out):
        partial = mlp_partial(gather_rows(x) if sp else x, w)
        torch.add(reduce(partial), w["b2"], out=out)

    def attention(x, out):
        partial = attention_partial(gather_rows(x) if sp else x, w, heads)
        torch.add(reduce(partial), w["b_o"], out=out)

    def layer(x, out):
        ln0 = F.layer_norm(x, (e,), w["ln0_w"], w["ln0_b"])
        attn = reduce(attention_partial(gather_rows(ln0) if sp else ln0, w, heads))
        h = attn.add_(w["b_o"]).add_(x)
        ln1 = F.layer_norm(h, (e,), w["ln1_w"], w["ln1_b"])
        y = reduce(mlp_partial(gather_rows(ln1) if sp else ln1, w))
        torch.add(y.add_(w["b2"]), h, out=out)

    return {"mlp": mlp, "attention": attention, "layer": layer}[case.block]


def communication_only(case: Case, x: torch.Tensor, d: int) -> Callable:
    """The block's collectives alone (comm_only), on buffers of their sizes:
    per row-parallel linear (one in the MLP and the attention block, two in
    the layer) an allreduce of the output for TP; an allgather of x and a
    reduce-scatter back to x's shape for SP."""
    count = 2 if case.block == "layer" else 1
    sp = case.mode == "sp"
    full = x.new_empty(d * x.size(0), *x.shape[1:]) if sp else x.clone()
    out = torch.empty_like(x)

    def run() -> None:
        for _ in range(count):
            if sp:
                dist.all_gather_into_tensor(full, x)
                dist.reduce_scatter_tensor(out, full)
            else:
                dist.all_reduce(full)  # sums grow; NCCL's speed does not care

    return run


def chunk_axis(case: Case) -> int:
    """The axis stream chunks split: tokens for the MLP, batch otherwise."""
    return 0 if case.block == "mlp" else 1


def torch_no_overlap(fn: Callable, x: torch.Tensor) -> Callable:
    def run() -> torch.Tensor:
        out = torch.empty_like(x)  # every block's output is shaped like its input
        fn(x, out)
        return out

    return run


def torch_streams(fn: Callable, x: torch.Tensor, axis: int, s: int, streams) -> Callable:
    """Chunk i of x (along axis) on worker stream i: its collectives and
    compute; the main stream waits for all of them. A chunk of the batch is
    strided; it is copied to a contiguous tensor first, since ATen's linear
    on a strided 3-D input falls back to one small GEMM per sequence position
    (40 times slower here)."""

    def run() -> torch.Tensor:
        out = torch.empty_like(x)
        chunks = zip(x.tensor_split(s, axis), out.tensor_split(s, axis))
        if not streams:  # CPU: no streams, chunks run one after another
            for x_chunk, out_chunk in chunks:
                fn(x_chunk.contiguous(), out_chunk)
            return out
        main = torch.cuda.current_stream()
        for stream, (x_chunk, out_chunk) in zip(streams, chunks):
            stream.wait_stream(main)
            with torch.cuda.stream(stream):
                # Collectives only enqueue: the worker stream, not the host, waits.
                fn(x_chunk.contiguous(), out_chunk)
        for stream in streams[:s]:
            main.wait_stream(stream)
        return out

    return run


def float64_reference(case: Case, full: dict) -> tuple[torch.Tensor, slice]:
    """The example's float64 reference of the global output, for attention
    and layer on the first batch element only (the batch elements are
    independent, and the full float64 scores would take gigabytes); the
    second value selects the same part of the output."""
    if case.block == "mlp":
        return mlp_reference(**{k: v.double() for k, v in full.items()})[0], slice(None)
    a = case.attention
    one = Attention(a.seq, 1, a.e, a.heads)
    part = {k: (v[:, :1] if k == "x" else v).double() for k, v in full.items()}
    with torch.device(full["x"].device):  # the reference makes its mask on the default device
        if case.block == "attention":
            return attention_reference(*part.values(), one)[0], slice(0, 1)
        return layer_reference(part, one), slice(0, 1)
