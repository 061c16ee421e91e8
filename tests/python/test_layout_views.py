# SPDX-License-Identifier: MIT
"""Layout operations run as views of their input (AliasLayoutOps): the
same results as with copies, and no buffer of their own."""

from __future__ import annotations

import torch

from mdfuser import DataType, FusionDefinition


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
