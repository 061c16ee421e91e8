# SPDX-License-Identifier: MIT
"""execute on a GPU where the caller's stream state matters: a non-default
current stream, a CUDA graph capture, and an out-of-memory error in the
middle of a stream loop. One process; skipped without a GPU."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from mdfuser import DataType, FusionDefinition, ParallelType

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")


def stream_chunked_mlp(chunks: int) -> FusionDefinition:
    """linear -> gelu -> linear, its rows split across `chunks` streams:
    each chunk's intermediates are allocated inside the stream loop."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        w1 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        w2 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.linear(fd.ops.gelu(fd.ops.linear(x, w1)), w2))
        x.outer_split(0, chunks)
        x.axis(0).parallelize(ParallelType.stream)
    return fd


def mlp_inputs(tokens: int, hidden: int, inner: int, seed: int = 0):
    generator = torch.Generator(device="cuda").manual_seed(seed)
    return [
        torch.randn(tokens, hidden, device="cuda", generator=generator),
        torch.randn(inner, hidden, device="cuda", generator=generator) / hidden**0.5,
        torch.randn(hidden, inner, device="cuda", generator=generator) / inner**0.5,
    ]


def reference(x, w1, w2):
    return F.linear(F.gelu(F.linear(x, w1)), w2)


def test_execute_runs_on_the_callers_stream_after_its_queued_work():
    fd = stream_chunked_mlp(4)
    x, w1, w2 = mlp_inputs(256, 64, 128)
    fd.execute([x, w1, w2])  # compiles outside the timed part
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        # A long queue on the caller's stream, then the input's last write:
        # a program not ordered after the caller's stream reads stale rows.
        busy = torch.randn(4096, 4096, device="cuda")
        for _ in range(8):
            busy = busy @ busy / 64
        x.mul_(2)
        out = fd.execute([x, w1, w2])[0]
        assert torch.cuda.current_stream() == side
    side.synchronize()
    torch.testing.assert_close(out, reference(x, w1, w2))


def test_execute_is_captured_and_replayed_in_a_cuda_graph():
    fd = stream_chunked_mlp(2)
    x, w1, w2 = mlp_inputs(128, 32, 64, seed=1)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fd.execute([x, w1, w2])  # compiles before the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fd.execute([x, w1, w2])[0]
    for seed in (2, 3):
        x.copy_(mlp_inputs(128, 32, 64, seed=seed)[0])
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, reference(x, w1, w2))


def test_out_of_memory_inside_a_stream_loop_leaves_execute_working():
    # Each of the 4 chunks allocates a 16384 x 16384 float32 intermediate
    # (1 GiB) inside the loop; the inputs and output take 40 MiB.
    tokens, hidden, inner = 65536, 64, 16384
    x, w1, w2 = mlp_inputs(tokens, hidden, inner, seed=4)
    fd = stream_chunked_mlp(4)
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.empty_cache()
    caller = torch.cuda.current_stream()
    torch.cuda.set_per_process_memory_fraction((512 << 20) / total)
    try:
        with pytest.raises(torch.OutOfMemoryError):
            fd.execute([x, w1, w2])
        assert torch.cuda.current_stream() == caller
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
    out = fd.execute([x, w1, w2])[0]
    # A chunk's GEMM sums its 16384 products in another order than the
    # whole-tensor GEMM of the reference.
    torch.testing.assert_close(out, reference(x, w1, w2), rtol=1e-4, atol=1e-4)
