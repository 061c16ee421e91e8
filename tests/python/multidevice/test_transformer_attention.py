# SPDX-License-Identifier: MIT
"""Multi-head attention, heads across the devices, tensor-parallel and
sequence-parallel, forward and backward, against plain torch on the same
global inputs."""

from __future__ import annotations

import pytest
import torch
from transformer_blocks import Attention, attention_backward, attention_forward, attention_reference

from mdfuser.multidevice import shard_tensor


def sizes(d: int) -> Attention:
    return Attention(seq=4 * d, batch=2, e=8 * d, heads=2 * d)


def weights(a: Attention, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return dict(
        x=torch.randn(a.seq, a.batch, a.e, generator=g),
        w_qkv=torch.randn(3 * a.e, a.e, generator=g) / 4,
        b_qkv=torch.randn(3 * a.e, generator=g),
        w_o=torch.randn(a.e, a.e, generator=g) / 4,
        b_o=torch.randn(a.e, generator=g),
    )


def check(test, block, outputs: list[torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    compiled = block.fd.output_tensors()
    for i, name in enumerate(block.outputs):
        want = shard_tensor(expected[name].detach().cpu(), compiled[i])
        assert outputs[i].dtype == want.dtype, name
        test.assert_close(outputs[i], want, msg=name)


def on(test, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.to(test.device, test.dtype) for k, v in tensors.items()}


@pytest.mark.parametrize("streams", [1, 2])
@pytest.mark.parametrize("mode", ["tp", "sp"])
def test_forward(multidevice_test, mode, streams):
    d = multidevice_test.size
    a = sizes(d)
    test = multidevice_test
    full = on(test, weights(a, seed=3))
    block = attention_forward(a, d, mode, streams, test.mdfuser_dtype)
    outputs = block.fd.execute([test.shard(full[k].cpu(), tv) for k, tv in block.inputs.items()])
    y, qkv, o, lse = attention_reference(*(full[k] for k in block.inputs), a)
    check(test, block, outputs, dict(y=y, qkv=qkv, o=o, lse=lse))
    # Heads are split across the devices: each holds heads / d of them.
    assert outputs[2].shape[1] == a.heads // d
    if streams > 1:
        # The whole block runs per batch chunk, attention included.
        loop = block.fd.last_host_ir().split("FOR ")[1]
        assert "sdpfa_fwd" in loop


@pytest.mark.parametrize("mode", ["tp", "sp"])
def test_backward(multidevice_test, mode):
    d = multidevice_test.size
    a = sizes(d)
    test = multidevice_test
    full = weights(a, seed=5)
    leaves = {k: v.clone().requires_grad_() for k, v in on(test, full).items()}
    y, qkv, o, lse = attention_reference(*leaves.values(), a)
    grad_y = torch.randn(a.seq, a.batch, a.e, generator=torch.Generator().manual_seed(6))
    y.backward(grad_y.to(test.device, test.dtype))
    saved = dict(
        x=full["x"],
        w_qkv=full["w_qkv"],
        w_o=full["w_o"],
        qkv=qkv.detach().cpu(),
        o=o.detach().cpu(),
        lse=lse.detach().cpu(),
        grad_y=grad_y,
    )
    block = attention_backward(a, d, mode, test.mdfuser_dtype)
    outputs = block.fd.execute(
        [
            test.shard(v if k == "lse" else v.to(test.dtype), block.inputs[k])
            for k, v in saved.items()
        ]
    )
    check(
        test,
        block,
        outputs,
        dict(
            grad_x=leaves["x"].grad,
            grad_w_qkv=leaves["w_qkv"].grad,
            grad_b_qkv=leaves["b_qkv"].grad,
            grad_w_o=leaves["w_o"].grad,
            grad_b_o=leaves["b_o"].grad,
        ),
    )
