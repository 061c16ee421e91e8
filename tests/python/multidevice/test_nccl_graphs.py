# SPDX-License-Identifier: MIT
"""The cuda_graph option over NCCL: collectives and NCCL rings captured into
CUDA graphs and replayed, against the same programs run one statement at a
time. One GPU per process (NCCL cannot share one); the CUDA backend's
rings in graphs are in test_cuda_backend.py."""

from __future__ import annotations

import os

import pytest
import torch
from ring_helpers import ring_pair
from transformer_blocks import mlp_forward

from mdfuser import CommunicatorBackend
from mdfuser.multidevice import shard_tensor

NCCL = CommunicatorBackend.nccl


def needs_nccl(test) -> None:
    if test.device.type != "cuda" or os.environ.get("MDFUSER_SHARE_DEVICES") == "1":
        pytest.skip("NCCL needs a GPU per process")


def stats(fd) -> tuple[int, int, int]:
    s = fd._cache.graph_stats
    return s["eager"], s["captures"], s["replays"]


@pytest.mark.parametrize("options", [[], ["ring_decomposition"]], ids=["collectives", "rings"])
@pytest.mark.parametrize("pair", ["allgather_linear", "linear_reduce_scatter", "linear_allreduce"])
def test_nccl_programs_replay_as_cuda_graphs(multidevice_test, pair, options):
    test = multidevice_test
    needs_nccl(test)
    fd, args, full_output = ring_pair(test, pair)
    graphs = [*options, "cuda_graph"]
    for i in range(6):
        (graphed,) = fd.execute(args, backend=NCCL, _enable_options=graphs)
        (eager,) = fd.execute(args, backend=NCCL, _enable_options=options)
        expected = shard_tensor(full_output, fd.output_tensors()[0])
        assert torch.equal(graphed, eager)
        assert torch.equal(graphed.cpu(), expected if i % 2 == 0 else expected.neg())
        args[0].neg_()
    assert stats(fd) == (1, 2, 5)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        replays = [
            fd.execute(args, backend=NCCL, _enable_options=graphs)[0].clone() for _ in range(4)
        ]
    finally:
        torch.cuda.set_sync_debug_mode("default")
    for replay in replays:
        assert torch.equal(replay, graphed.neg())
    assert stats(fd) == (1, 2, 9)


@pytest.mark.parametrize("mode", ["tp", "sp"])
def test_an_mlp_block_on_nccl_replays_as_cuda_graphs(multidevice_test, mode):
    """The MLP of examples/transformer_blocks.py in two stream chunks, its
    collectives on NCCL: the replays equal the statements run one by one."""
    test = multidevice_test
    needs_nccl(test)
    d, h = test.size, 64
    block = mlp_forward(h, d, mode, 2, test.mdfuser_dtype)
    eager = mlp_forward(h, d, mode, 2, test.mdfuser_dtype)
    g = torch.Generator().manual_seed(70)
    shapes = dict(x=(8 * d, h), w1=(4 * h, h), b1=(4 * h,), w2=(h, 4 * h), b2=(h,))
    full = {k: (torch.randn(shapes[k], generator=g) / 8).to(test.dtype) for k in block.inputs}
    args = [test.shard(full[k], tv) for k, tv in block.inputs.items()]
    other = [test.shard(full[k], tv) for k, tv in eager.inputs.items()]
    for _ in range(4):
        graphed = block.fd.execute(args, backend=NCCL, _enable_options=["cuda_graph"])
        expected = eager.fd.execute(other, backend=NCCL)
        for out, want in zip(graphed, expected):
            assert torch.equal(out, want)
        args[0].neg_()
        other[0].neg_()
    assert stats(block.fd) == (1, 2, 3)
