# SPDX-License-Identifier: MIT
"""Scalar inputs (define_scalar(None, dtype)) in sharded fusions on every
process of the job: each rank passes the values with its local shards."""

from __future__ import annotations

import pytest
import torch
from helpers import row_parallel_hidden_near, schedule_row_parallel

from mdfuser import DataType, FusionDefinition, ParallelType
from mdfuser.multidevice import DeviceMesh


def scaled_row_parallel_linear(d: int, s: int, h: int) -> FusionDefinition:
    """linear(x * a, w) + b over d devices, the reduction axis sharded
    (partial sums, an allreduce) and s stream chunks; a and b inputs
    defined around the tensors."""
    with FusionDefinition() as fd:
        a = fd.define_scalar(None, dtype=DataType.Double)
        inp = fd.define_tensor(shape=[-1, 4 * h], contiguity=True, dtype=DataType.BFloat16)
        w = fd.define_tensor(shape=[h, 4 * h], contiguity=True, dtype=DataType.BFloat16)
        b = fd.define_scalar(None, dtype=DataType.Int)
        # BFloat16 arithmetic is Float (nvFuser's promotion): cast back.
        scaled = fd.ops.cast(fd.ops.mul(inp, a), DataType.BFloat16)
        out = fd.ops.cast(fd.ops.add(fd.ops.linear(scaled, w), b), DataType.BFloat16)
        fd.add_output(out)
        schedule_row_parallel(inp, w, d, s)
    return fd


def test_sharded_fusion_takes_the_values_at_every_run(multidevice_test):
    test = multidevice_test
    d, t = test.size, 12
    h = row_parallel_hidden_near(8, d)
    fd = scaled_row_parallel_linear(d, 3, h)
    generator = torch.Generator().manual_seed(7)
    inp = torch.randint(-1, 2, (t, 4 * h), generator=generator).to(torch.bfloat16)
    w = torch.randint(-1, 2, (h, 4 * h), generator=generator).to(torch.bfloat16)
    _, inp_tv, w_tv, _ = fd.fusion.inputs()
    shards = [test.shard(inp, inp_tv), test.shard(w, w_tv)]
    # Integers and halves keep every sum exact in bf16.
    for a, b in [(2.0, 1), (-0.5, -3), (1, 0)]:
        (out,) = fd.execute([a, shards[0], shards[1], b])
        expected = torch.nn.functional.linear(inp.double() * a, w.double()) + b
        assert torch.equal(out.cpu(), expected.to(torch.bfloat16)), (a, b)
    assert fd._cache.num_programs == 1
    if d > 1:
        # The partial sums cross devices: an Allreduce, or on the CUDA
        # backend the ring that replaces it.
        assert "Communication" in fd.last_host_ir()


def test_a_sharded_random_tensor_seeded_at_execute_is_each_ranks_part(multidevice_test):
    """uniform with rng_seed and rng_offset given at execute, sharded along
    its rows: each rank holds its part of the tensor the same seed gives
    unsharded."""
    test = multidevice_test
    d = test.size
    mesh = DeviceMesh(torch.arange(d))

    def define(seed, offset, sharded: bool) -> FusionDefinition:
        with FusionDefinition() as fd:
            if seed is None:
                seed = fd.define_scalar(None, dtype=DataType.Int)
                offset = fd.define_scalar(None, dtype=DataType.Int)
            noise = fd.ops.uniform(-1.0, 1.0, [4 * d, 3], rng_seed=seed, rng_offset=offset)
            fd.add_output(noise)
            noise.set_device_mesh(mesh)
            if sharded:
                noise.outer_split(0, d)
                noise.axis(0).parallelize(ParallelType.mesh_x)
        return fd

    given = define(None, None, sharded=True)
    for seed, offset in [(3, 1), (4, 0)]:
        (part,) = given.execute([seed, offset])
        (whole,) = define(seed, offset, sharded=False).execute([])
        # Without tensor inputs both run on the CPU.
        expected = test.shard(whole, given.output_tensors()[0]).cpu()
        assert torch.equal(part.cpu(), expected), (seed, offset)


def test_a_bad_value_on_every_rank_is_an_error_not_a_failure(multidevice_test):
    """Every rank passes a float for the Int scalar: each raises the
    TypeError, having shared it with the others (none waits for another
    in a collective), so the communication goes on without recovering."""
    test = multidevice_test
    d = test.size
    h = row_parallel_hidden_near(8, d)
    fd = scaled_row_parallel_linear(d, 2, h)
    _, inp_tv, w_tv, _ = fd.fusion.inputs()
    inp = torch.ones(4, 4 * h, dtype=torch.bfloat16)
    w = torch.ones(h, 4 * h, dtype=torch.bfloat16)
    shards = [test.shard(inp, inp_tv), test.shard(w, w_tv)]
    for _ in range(2):
        with pytest.raises(TypeError, match=r"scalar input 1 \(s\d+\) has dtype Int but got 1.5"):
            fd.execute([1.0, shards[0], shards[1], 1.5])
        assert not test.comm.stopped()
    (out,) = fd.execute([1.0, shards[0], shards[1], 1])
    assert torch.equal(out.cpu(), torch.full((4, h), 4 * h + 1, dtype=torch.bfloat16))
