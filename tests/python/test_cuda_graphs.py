# SPDX-License-Identifier: MIT
"""The cuda_graph option: programs replayed as CUDA graphs, one launch per
run instead of one per host statement. One process; the GPU tests skip
without a GPU (the CUDA backend's rings in graphs are in
multidevice/test_cuda_backend.py)."""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F
from test_cuda_execute import mlp_inputs, reference, stream_chunked_mlp

from mdfuser import DataType, FusionDefinition

GRAPHS = ["cuda_graph"]
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")


def run(fd: FusionDefinition, args):
    return fd.execute(args, _enable_options=GRAPHS)[0]


def stats(fd: FusionDefinition) -> tuple[int, int, int]:
    s = fd._cache.graph_stats
    return s["eager"], s["captures"], s["replays"]


def test_cuda_graphs_of_cpu_tensors_are_refused():
    fd = stream_chunked_mlp(2)
    args = [torch.randn(8, 4), torch.randn(6, 4), torch.randn(4, 6)]
    with pytest.raises(ValueError, match="cuda_graph option replays CUDA graphs, which need CUDA"):
        run(fd, args)


@needs_gpu
def test_replays_equal_the_statements_run_one_by_one():
    fd = stream_chunked_mlp(2)
    eager = stream_chunked_mlp(2)
    args = mlp_inputs(128, 32, 64)
    x = args[0]
    for seed in range(6):
        # New values at the same address: the graphs read them.
        x.copy_(mlp_inputs(128, 32, 64, seed=seed)[0])
        out = run(fd, args)
        expected = eager.execute(args)[0]
        assert torch.equal(out, expected)
        torch.testing.assert_close(out, reference(*args))
    # Run 1 runs the statements; run 2 captures graph 1 and replays it;
    # run 3 finds graph 1's outputs still held (by `out`) and captures
    # graph 2; from then on the two take turns.
    assert stats(fd) == (1, 2, 5)


@needs_gpu
def test_scalar_inputs_are_part_of_what_a_graph_is_kept_for():
    """A capture bakes a scalar input's value into its kernels: a new value
    runs the statements like new addresses do, and each value replays its
    own graphs."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1], dtype=DataType.Float)
        a = fd.define_scalar(None, dtype=DataType.Double)
        fd.add_output(fd.ops.mul(fd.ops.relu(x), a))
    x = torch.randn(64, 32, device="cuda")
    for a in [2.0, 2.0, 2.0, 0.5, 0.5, 0.5, 2.0]:
        out = fd.execute([x, a], _enable_options=GRAPHS)[0]
        assert torch.equal(out, torch.relu(x) * a), a
        del out
    # 2.0: run, capture (replayed at once), replay; 0.5: the same; 2.0
    # again: replay its graph.
    assert stats(fd) == (2, 2, 5)


def resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@needs_gpu
def test_a_scalar_new_at_every_call_keeps_memory_flat():
    """A value new at every call (a dropout seed per training step) runs the
    statements, never captures a graph per value: after 1,000 calls, host
    and device memory are where they were after the first 20."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1], dtype=DataType.Float)
        a = fd.define_scalar(None, dtype=DataType.Double)
        fd.add_output(fd.ops.mul(fd.ops.relu(x), a))
    x = torch.randn(256, 256, device="cuda")
    for step in range(1000):
        out = fd.execute([x, float(step)], _enable_options=GRAPHS)[0]
        if step % 97 == 0:
            assert torch.equal(out, torch.relu(x) * float(step)), step
        del out
        if step == 19:
            torch.cuda.synchronize()
            device_before, host_before = torch.cuda.memory_allocated(), resident_bytes()
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() - device_before < 2**20
    assert resident_bytes() - host_before < 16 * 2**20
    assert stats(fd) == (1000, 0, 0)


@needs_gpu
def test_outputs_the_caller_keeps_are_never_overwritten():
    fd = stream_chunked_mlp(2)
    args = mlp_inputs(64, 16, 32, seed=10)
    kept, expected = [], []
    for seed in range(5):
        args[0].copy_(mlp_inputs(64, 16, 32, seed=20 + seed)[0])
        kept.append(run(fd, args))
        expected.append(reference(*args))
    for out, ref in zip(kept, expected):
        torch.testing.assert_close(out, ref)
    # Both graphs' outputs are kept: runs 4 and 5 run the statements.
    assert stats(fd) == (3, 2, 2)
    # A view of an output holds it as well.
    view = kept[1][:4]  # of graph 1's outputs
    del kept, expected, out
    held = run(fd, args)  # graph 2
    assert stats(fd) == (3, 2, 3)
    run(fd, args)
    assert stats(fd) == (4, 2, 3)
    del view
    run(fd, args)
    assert stats(fd) == (4, 2, 4)
    torch.testing.assert_close(held, reference(*args))


@needs_gpu
def test_outputs_that_are_views_of_the_programs_buffers_replay():
    """An output that is a layout view of a buffer (its base held by the
    graph too) is as free as any once the caller drops it."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.permute(fd.ops.relu(x), [1, 0]))
    x = torch.arange(-6.0, 6.0, device="cuda").reshape(3, 4)
    for _ in range(4):
        out = run(fd, [x])
        assert torch.equal(out, x.relu().t())
        x.neg_()
    assert stats(fd) == (1, 2, 3)


@needs_gpu
def test_an_attention_block_with_outputs_sharing_buffers_replays():
    """The attention block of examples/transformer_blocks.py in two stream
    chunks: four outputs, some of them views of one buffer."""
    from transformer_blocks import Attention, attention_forward

    a = Attention(seq=16, batch=4, e=64, heads=4)
    block = attention_forward(a, 1, "tp", 2)
    eager = attention_forward(a, 1, "tp", 2)
    g = torch.Generator(device="cuda").manual_seed(60)
    shapes = [(a.seq, a.batch, a.e), (3 * a.e, a.e), (3 * a.e,), (a.e, a.e), (a.e,)]
    args = [
        (torch.randn(shape, device="cuda", generator=g) / 8).to(torch.bfloat16) for shape in shapes
    ]
    for _ in range(4):
        outs = block.fd.execute(args, _enable_options=GRAPHS)
        for out, expected in zip(outs, eager.fd.execute(args)):
            assert torch.equal(out, expected)
        args[0].neg_()
    assert stats(block.fd) == (1, 2, 3)


@needs_gpu
def test_new_input_addresses_run_once_before_they_are_captured():
    fd = stream_chunked_mlp(2)
    args = mlp_inputs(64, 16, 32, seed=30)
    run(fd, args)
    run(fd, args)
    assert stats(fd) == (1, 1, 1)
    moved = [args[0].clone(), *args[1:]]
    out = run(fd, moved)
    assert stats(fd) == (2, 1, 1)
    torch.testing.assert_close(out, reference(*moved))
    out = run(fd, moved)
    assert stats(fd) == (2, 2, 2)
    torch.testing.assert_close(out, reference(*moved))


@needs_gpu
def test_replays_synchronize_nothing():
    fd = stream_chunked_mlp(4)
    args = mlp_inputs(256, 32, 64, seed=40)
    run(fd, args)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        # Copies, so that each run finds a graph whose outputs are free.
        outs = [run(fd, args).clone() for _ in range(4)]
    finally:
        torch.cuda.set_sync_debug_mode("default")
    for out in outs:
        torch.testing.assert_close(out, reference(*args))
    assert stats(fd)[2] == 4


@needs_gpu
def test_outputs_that_alias_the_inputs_run_the_statements():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.relu(x))
        fd.add_output(x)
    x = torch.arange(-6.0, 6.0, device="cuda").reshape(3, 4)
    for _ in range(3):
        relu, same = fd.execute([x], _enable_options=GRAPHS)
        assert same.data_ptr() == x.data_ptr()
        assert torch.equal(relu, x.relu())
        x.neg_()
    assert stats(fd) == (3, 0, 0)


@needs_gpu
def test_random_numbers_drawn_at_every_run_are_refused():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        noise = fd.ops.uniform(0.0, 1.0, [4], dtype=DataType.Float)
        fd.add_output(fd.ops.add(x, noise))
    with pytest.raises(ValueError, match="cannot replay uniform, which draws new numbers"):
        run(fd, [torch.zeros(4, device="cuda")])


@needs_gpu
def test_a_callers_own_capture_takes_the_statements():
    fd = stream_chunked_mlp(2)
    args = mlp_inputs(128, 32, 64, seed=50)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        run(fd, args)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = run(fd, args)
    args[0].copy_(mlp_inputs(128, 32, 64, seed=51)[0])
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, F.linear(F.gelu(F.linear(args[0], args[1])), args[2]))
    assert stats(fd) == (2, 0, 0)
