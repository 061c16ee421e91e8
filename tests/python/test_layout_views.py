# SPDX-License-Identifier: MIT
"""Layout operations run as views of their input (AliasLayoutOps): the
same results as with copies, and no buffer of their own."""

from __future__ import annotations

import torch

from mdfuser import DataType, FusionDefinition, ParallelType


def split_heads() -> FusionDefinition:
    # qkv [s, b, 3e] -> q, k [b, h, s, d] -> q @ k^T, as attention splits
    # its heads; every layout result is an intermediate.
    s, b, h, d = 4, 2, 2, 3
    with FusionDefinition() as fd:
        qkv = fd.define_tensor([s, b, 3 * h * d], dtype=DataType.Float)
        per_head = fd.ops.reshape(qkv, [s, b, h, 3 * d])
        q = fd.ops.permute(fd.ops.slice(per_head, [0, 0, 0, 0], [s, b, h, d]), [1, 2, 0, 3])
        k = fd.ops.permute(fd.ops.slice(per_head, [0, 0, 0, d], [s, b, h, 2 * d]), [1, 2, 3, 0])
        scores = fd.ops.matmul(q, k)
        fd.add_output(
            fd.ops.squeeze(
                fd.ops.broadcast(fd.ops.neg(scores), [True, False, False, False, False]), [0]
            )
        )
    return fd


def test_views_give_the_copies_results():
    fd = split_heads()
    qkv = torch.randn(4, 2, 18, generator=torch.Generator().manual_seed(0))
    (with_views,) = fd.execute([qkv])
    program = fd.last_host_ir()
    (with_copies,) = fd.execute([qkv], _disable_options=["alias_layout_ops"])
    per_head = qkv.view(4, 2, 2, 9)
    q = per_head[..., :3].permute(1, 2, 0, 3)
    k = per_head[..., 3:6].permute(1, 2, 3, 0)
    torch.testing.assert_close(with_views, -(q @ k))
    assert torch.equal(with_views, with_copies)
    # reshape, 2 slices, 2 permutes and the broadcast are views; the
    # squeeze makes the output, which stays a buffer of its own.
    assert program.count(" = View(") == 6
    assert "= squeeze(" in program
    assert program.count("ALLOCATE") == 3  # matmul, neg and the output


def test_attention_output_is_laid_out_like_its_query():
    # Heads cut out of a fused qkv [s, b, h * 3d], attention, heads merged
    # back into [s, b, h * d]: the output is allocated in the query's
    # layout ([s, b, h, d] in memory, ChooseAllocationLayouts), so the
    # merge is a view.
    s, b, h, d = 6, 2, 3, 8
    with FusionDefinition() as fd:
        qkv = fd.define_tensor([s, b, 3 * h * d], dtype=DataType.Float)
        per_head = fd.ops.reshape(qkv, [s, b, h, 3 * d])
        q, k, v = (
            fd.ops.permute(
                fd.ops.slice(per_head, [0, 0, 0, i * d], [s, b, h, (i + 1) * d]), [1, 2, 0, 3]
            )
            for i in range(3)
        )
        o, _, _, _ = fd.ops.sdpfa_fwd(q, k, v, is_causal=True)
        merged = fd.ops.reshape(fd.ops.permute(o, [2, 0, 1, 3]), [s, b, h * d])
        fd.add_output(o)
        fd.add_output(fd.ops.neg(merged))
    x = torch.randn(s, b, 3 * h * d, generator=torch.Generator().manual_seed(1))
    out, y = fd.execute([x])
    program = fd.last_host_ir()

    per_head = x.view(s, b, h, 3 * d)
    tq, tk, tv = (per_head[..., i * d : (i + 1) * d].permute(1, 2, 0, 3) for i in range(3))
    expected = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(y, -expected.permute(2, 0, 1, 3).reshape(s, b, h * d))
    assert out.permute(2, 0, 1, 3).is_contiguous(), out.stride()
    assert "stride_order=[2, 1, 3, 0]" in program
    # reshape, 3 slices, 3 permutes, and the merge's permute and reshape.
    assert program.count(" = View(") == 9


def test_buffers_cut_along_the_batch_are_laid_out_batch_outermost():
    # Linears on [seq, batch, e] with the batch (axis 1) in stream chunks:
    # the buffers the chunks cut are allocated batch outermost, so that
    # each chunk is contiguous and the linears write and read it in place;
    # the results equal torch's, with or without a bias.
    seq, batch, e, chunks = 5, 4, 8, 2
    with FusionDefinition() as fd:
        x = fd.define_tensor([seq, batch, e], dtype=DataType.Float)
        w1 = fd.define_tensor([2 * e, e], dtype=DataType.Float)
        b1 = fd.define_tensor([2 * e], dtype=DataType.Float)
        w2 = fd.define_tensor([e, 2 * e], dtype=DataType.Float)
        hidden = fd.ops.linear(x, w1, b1)
        fd.add_output(hidden)
        fd.add_output(fd.ops.linear(fd.ops.neg(hidden), w2))
        x.outer_split(1, chunks)
        x.axis(1).parallelize(ParallelType.stream)
    g = torch.Generator().manual_seed(2)
    inputs = [
        torch.randn(seq, batch, e, generator=g),
        torch.randn(2 * e, e, generator=g),
        torch.randn(2 * e, generator=g),
        torch.randn(e, 2 * e, generator=g),
    ]
    hidden, y = fd.execute(inputs)
    program = fd.last_host_ir()
    expected = torch.nn.functional.linear(inputs[0], inputs[1], inputs[2])
    torch.testing.assert_close(hidden, expected)
    torch.testing.assert_close(y, torch.nn.functional.linear(-expected, inputs[3]))
    for out in (hidden, y):
        assert out.permute(1, 0, 2).is_contiguous(), out.stride()
    # The outputs; the intermediate is allocated per chunk, in the loop.
    assert program.count("stride_order=[1, 2, 0]") == 2, program
