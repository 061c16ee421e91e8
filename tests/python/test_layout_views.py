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
