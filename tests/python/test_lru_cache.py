# SPDX-License-Identifier: MIT
"""LRUCache: executor caches shared among equal fusions, used as the
reference system's direct-binding tests use it (their conftest sets
``fd.fec = cache.cache_compile(fd.fusion)``, drops ``fd._fusion`` and runs
``fd.execute``), and the stream-lowering test those tests run with it."""

from __future__ import annotations

import pytest
import torch

from mdfuser import DataType, FusionDefinition, FusionExecutorCache, LRUCache, ParallelType


def define_relu_twice(fd: FusionDefinition, width: int = 4) -> None:
    x = fd.define_tensor([-1, width], dtype=DataType.Float)
    fd.add_output(fd.ops.add(fd.ops.relu(x), fd.ops.relu(x)))


def cached(cache: LRUCache, fusion_func) -> FusionDefinition:
    """A FusionDefinition running through `cache`, as the reference's
    conftest builds one."""
    with FusionDefinition() as fd:
        fusion_func(fd)
    fd.fec = cache.cache_compile(fd.fusion)
    del fd._fusion
    return fd


def test_equal_fusions_share_one_executor_cache():
    cache = LRUCache(max_fusions=4)
    first = cached(cache, define_relu_twice)
    second = cached(cache, define_relu_twice)
    assert cache.num_fusions() == 1
    assert first.fec is second.fec
    x = torch.randn(3, 4)
    (out,) = second.execute([x])
    torch.testing.assert_close(out, x.relu() * 2)
    (again,) = first.execute([torch.ones(3, 4)])
    torch.testing.assert_close(again, torch.full((3, 4), 2.0))
    assert first._cache.num_programs == 1, "one program for one signature"
    # The definition's fusion is gone: the executor cache's stands in.
    assert second.fusion is second.fec.fusion()
    assert "Cache Hits: 1" in cache.stats()


def test_a_different_fusion_gets_its_own_and_the_least_recent_is_evicted():
    cache = LRUCache(max_fusions=2)
    a = cached(cache, define_relu_twice)
    cached(cache, lambda fd: define_relu_twice(fd, width=8))
    assert cache.num_fusions() == 2
    cached(cache, define_relu_twice)  # a hit: the width-4 fusion is recent
    cached(cache, lambda fd: define_relu_twice(fd, width=16))  # evicts width 8
    assert cache.num_fusions() == 2
    assert cached(cache, define_relu_twice).fec is a.fec
    assert cached(cache, lambda fd: define_relu_twice(fd, width=8)).fec is not a.fec
    stats = cache.stats()
    assert "Max Fusions Allowed: 2" in stats and "Total Unique Fusions Compiled: 4" in stats


def test_an_empty_cache_says_so():
    assert "The fusion cache is empty." in LRUCache(max_fusions=1).stats()


def test_bad_arguments_name_the_value():
    with pytest.raises(ValueError, match="max_fusions must be positive, got 0"):
        LRUCache(max_fusions=0)
    with pytest.raises(TypeError, match="max_fusions must be an int, got '8'"):
        LRUCache(max_fusions="8")
    with pytest.raises(TypeError, match="expected an mdfuser Fusion .* got FusionDefinition"):
        LRUCache(max_fusions=1).cache_compile(FusionDefinition())
    fd = FusionDefinition()
    with pytest.raises(TypeError, match="expected a FusionExecutorCache .* got int"):
        fd.fec = 3
    with pytest.raises(AttributeError, match="no executor cache until it is executed"):
        fd.fec  # noqa: B018


def test_a_fusion_executor_cache_runs_a_fusion_of_its_own():
    with FusionDefinition() as fd:
        define_relu_twice(fd)
    fec = FusionExecutorCache(fd.fusion)
    (out,) = fec.execute([-torch.ones(2, 4)])
    torch.testing.assert_close(out, torch.zeros(2, 4))
    with pytest.raises(ValueError, match="execute expected 1 inputs .* got 2"):
        fec.execute([torch.ones(2, 4), torch.ones(2, 4)])


@pytest.mark.parametrize("cache_type", ["lru_cache", "eager"])
def test_stream_split_matmul(cache_type):
    # The reference's stream-lowering test (its test_matmul), run with and
    # without an LRUCache as its fixture does.
    c = 3
    cache = LRUCache(max_fusions=16) if cache_type == "lru_cache" else None

    def definition(fd: FusionDefinition) -> None:
        inp = fd.define_tensor([-1, -1], contiguity=True, dtype=DataType.Float)
        w = fd.define_tensor([-1, -1], contiguity=True, dtype=DataType.Float)
        out = fd.ops.matmul(inp, w)
        fd.add_output(out)
        out.outer_split(1, c)
        out.axis(1).parallelize(ParallelType.stream)

    if cache is None:
        with FusionDefinition() as fd:
            definition(fd)
    else:
        for _ in range(2):
            fd = cached(cache, definition)
        assert cache.num_fusions() == 1

    inp = torch.testing.make_tensor(5, 7, dtype=torch.float32, device="cpu")
    w = torch.testing.make_tensor(7, c * 2, dtype=torch.float32, device="cpu")
    ref = torch.matmul(inp, w)
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True
    ) as profile:
        (out,) = fd.execute([inp, w], _enable_options=["host_ir_lowering"])
    torch.testing.assert_close(out, ref)
    matmul_events = [event for event in profile.events() if event.name == "aten::mm"]
    assert len(matmul_events) == c
    for event in matmul_events:
        assert event.input_shapes == [[5, 7], [7, 2], [5, 2]]
