# SPDX-License-Identifier: MIT
"""Multi-head attention, heads across the devices, tensor-parallel and
sequence-parallel, forward and backward, against plain torch on the same
global inputs."""

from __future__ import annotations

import pytest
import torch
from helpers import stream_loop_statements
from transformer_blocks import Attention, attention_backward, attention_forward, attention_reference

from mdfuser.multidevice import shard_tensor


def sizes(d: int) -> Attention:
    return Attention(seq=4 * d, batch=2, e=16 * d, heads=2 * d)


def weights(a: Attention, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return dict(
        x=torch.randn(a.seq, a.batch, a.e, generator=g),
        w_qkv=torch.randn(3 * a.e, a.e, generator=g) / 4,
        b_qkv=torch.randn(3 * a.e, generator=g),
        w_o=torch.randn(a.e, a.e, generator=g) / 4,
        b_o=torch.randn(a.e, generator=g),
    )


def check(test, block, outputs: list[torch.Tensor], want: dict, torch_result: dict) -> None:
    """Each output against the float64 reference `want`, with tolerances
    from torch's own result in the block's dtype; dtypes as torch's."""
    compiled = block.fd.output_tensors()
    for i, name in enumerate(block.outputs):
        assert outputs[i].dtype == torch_result[name].dtype, name
        shard = shard_tensor(want[name].detach().cpu(), compiled[i])
        test.assert_close(
            outputs[i], shard, test.tolerance(want[name], torch_result[name]), msg=name
        )


def forward(a: Attention):
    def run(x, w_qkv, b_qkv, w_o, b_o):
        y, qkv, o, lse = attention_reference(x, w_qkv, b_qkv, w_o, b_o, a)
        return dict(y=y, qkv=qkv, o=o, lse=lse)

    return run


def backward(a: Attention):
    """The gradients by torch's autograd, with what the forward saves."""

    def run(grad_y, **tensors):
        leaves = {k: v.clone().requires_grad_() for k, v in tensors.items()}
        y, qkv, o, lse = attention_reference(**leaves, a=a)
        y.backward(grad_y)
        grads = {f"grad_{k}": v.grad for k, v in leaves.items()}
        return grads, dict(qkv=qkv.detach(), o=o.detach(), lse=lse.detach())

    return run


@pytest.mark.parametrize("streams", [1, 2])
@pytest.mark.parametrize("mode", ["tp", "sp"])
def test_forward(multidevice_test, mode, streams):
    d = multidevice_test.size
    a = sizes(d)
    test = multidevice_test
    full = weights(a, seed=3)
    block = attention_forward(a, d, mode, streams, test.mdfuser_dtype)
    outputs = block.fd.execute(
        [test.shard(full[k].to(test.dtype), tv) for k, tv in block.inputs.items()]
    )
    want, torch_result = test.references(forward(a), full)
    check(test, block, outputs, want, torch_result)
    # Heads are split across the devices: each holds heads / d of them.
    assert outputs[2].shape[1] == a.heads // d
    if streams > 1:
        # The whole block runs per batch chunk, attention included.
        loop = stream_loop_statements(block.fd.last_host_ir())[0]
        assert any("= sdpfa_fwd(" in statement for statement in loop), loop


@pytest.mark.parametrize("mode", ["tp", "sp"])
def test_backward(multidevice_test, mode):
    d = multidevice_test.size
    a = sizes(d)
    test = multidevice_test
    full = weights(a, seed=5)
    full["grad_y"] = torch.randn(a.seq, a.batch, a.e, generator=torch.Generator().manual_seed(6))
    (want, _), (torch_result, saved) = test.references(backward(a), full)
    # What the forward in the block's dtype saved; lse stays float32.
    saved = {k: v.cpu() for k, v in saved.items()}
    given = dict(full, **saved)
    block = attention_backward(a, d, mode, test.mdfuser_dtype)
    outputs = block.fd.execute(
        [
            test.shard(given[k] if k == "lse" else given[k].to(test.dtype), tv)
            for k, tv in block.inputs.items()
        ]
    )
    check(test, block, outputs, want, torch_result)
