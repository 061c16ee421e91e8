# SPDX-License-Identifier: MIT
"""Creation operations across devices: a sharded full, iota or uniform
gives each rank its part of the one global tensor (full fills only its local
buffer; iota and uniform compute the global tensor and keep the rank's
part); a replicated random tensor holds the same values on every rank, with
or without a seed; and a random weight feeds a sharded linear like torch's
on the same global weight."""

from __future__ import annotations

import pytest
import torch
from communication_helpers import global_tensor, mesh_of, part

from mdfuser import DataType, FusionDefinition, ParallelType


def shard_rows(tv, d: int, mesh) -> None:
    tv.set_device_mesh(mesh)
    tv.outer_split(0, d)
    tv.axis(0).parallelize(ParallelType.mesh_x)


def whole(create, device="cpu") -> torch.Tensor:
    """What `create(fd)` gives in a fusion of one device: the global tensor,
    drawn on `device` (random values differ between CPU and CUDA). A fusion
    without tensor inputs runs on the CPU, so an input on `device` places
    it there."""
    with FusionDefinition() as fd:
        anchor = fd.define_tensor([1])
        fd.add_output(create(fd))
        fd.add_output(anchor)
    out, _ = fd.execute([torch.zeros(1, device=device)])
    return out.cpu()


CREATIONS = {
    "full": lambda fd, rows: fd.ops.full([rows, 3], 2.5, DataType.Float),
    "iota": lambda fd, rows: fd.ops.iota(rows, 5, 3, DataType.Int),
    "uniform": lambda fd, rows: fd.ops.uniform(
        -1.0, 1.0, [rows, 3], rng_seed=11, rng_offset=4, dtype=DataType.Float
    ),
    "normal": lambda fd, rows: fd.ops.normal(
        0.0, 1.0, [rows, 3], rng_seed=12, rng_offset=0, dtype=DataType.Double
    ),
}


@pytest.mark.parametrize("name", list(CREATIONS))
def test_a_sharded_creation_gives_each_rank_its_part(multidevice_test, name):
    d, r = multidevice_test.size, multidevice_test.rank
    rows = 4 * d
    with FusionDefinition() as fd:
        out = CREATIONS[name](fd, rows)
        fd.add_output(out)
        shard_rows(out, d, mesh_of(range(d)))
    (local,) = fd.execute([])
    expected = part(whole(lambda f: CREATIONS[name](f, rows)), 0, d, r)
    assert local.shape == expected.shape == (4,) + tuple(expected.shape[1:])
    assert torch.equal(local.cpu(), expected)
    host_ir = fd.last_host_ir()
    assert "Communication" not in host_ir
    # full fills its local buffer; the others take their part of the whole.
    assert ("ShardByDevice" in host_ir) == (name != "full"), host_ir


@pytest.mark.parametrize("name", ["full", "iota", "uniform"])
def test_a_creation_split_across_devices_and_streams(multidevice_test, name):
    d, r, s = multidevice_test.size, multidevice_test.rank, 2
    rows = 4 * d
    with FusionDefinition() as fd:
        out = CREATIONS[name](fd, rows)
        fd.add_output(out)
        shard_rows(out, d, mesh_of(range(d)))
        out.outer_split(1, s)
        out.axis(1).parallelize(ParallelType.stream)
    (local,) = fd.execute([])
    expected = part(whole(lambda f: CREATIONS[name](f, rows)), 0, d, r)
    assert torch.equal(local.cpu(), expected)


def gather_rows(test, t: torch.Tensor) -> torch.Tensor:
    """Every rank's `t`, one row each, by an mdfuser allgather."""
    d = test.size
    if d == 1:
        return t.reshape(1, -1).float().cpu()
    with FusionDefinition() as fd:
        x = fd.define_tensor([d, t.numel()], dtype=DataType.Float)
        y = fd.ops.set(x)
        fd.add_output(y)
        mesh = mesh_of(range(d))
        shard_rows(x, d, mesh)
        y.set_device_mesh(mesh)
    (out,) = fd.execute([t.reshape(1, -1).float().to(test.device)])
    return out.cpu()


@pytest.mark.parametrize("seeded", [True, False], ids=["seeded", "unseeded"])
@pytest.mark.parametrize("op", ["uniform", "normal"])
def test_a_replicated_random_tensor_is_the_same_on_every_rank(multidevice_test, op, seeded):
    d = multidevice_test.size
    seed = dict(rng_seed=3, rng_offset=1) if seeded else {}
    with FusionDefinition() as fd:
        x = fd.define_tensor([2 * d, 8])
        noise = getattr(fd.ops, op)(0.0, 1.0, [8, 8], **seed)
        fd.add_output(fd.ops.add(fd.ops.sum(x, [0]), noise))
        shard_rows(x, d, mesh_of(range(d)))
    zeros = torch.zeros(2, 8, device=multidevice_test.device)
    for _ in range(2):
        (local,) = fd.execute([zeros])
        rows = gather_rows(multidevice_test, local)
        assert all(torch.equal(rows[0], row) for row in rows), rows
    if seeded:
        expected = whole(
            lambda f: getattr(f.ops, op)(0.0, 1.0, [8, 8], **seed), multidevice_test.device
        )
        assert torch.equal(local.cpu(), expected)


def test_a_random_weight_shards_a_column_parallel_linear(multidevice_test):
    """w = uniform(...) annotated [mesh_x{d}, k]: each rank draws the global
    weight and keeps its rows; out = linear(x, w) is column-parallel."""
    test = multidevice_test
    d, r = test.size, test.rank
    t, k, n = 6, 8, 4 * d

    def weight(fd):
        return fd.ops.uniform(-1.0, 1.0, [n, k], rng_seed=21, rng_offset=0)

    with FusionDefinition() as fd:
        x = fd.define_tensor([t, k])
        w = weight(fd)
        out = fd.ops.linear(x, w)
        fd.add_output(out)
        mesh = mesh_of(range(d))
        x.set_device_mesh(mesh)
        shard_rows(w, d, mesh)
    x_full = global_tensor([t, k], seed=5)
    (local,) = fd.execute([x_full.to(test.device)])
    expected = part(torch.nn.functional.linear(x_full, whole(weight, test.device)), 1, d, r)
    # cuBLAS and the CPU sum in other orders.
    torch.testing.assert_close(local.cpu(), expected, rtol=1e-5, atol=1e-4)


def test_an_unannotated_random_weight_follows_a_row_parallel_linear(multidevice_test):
    """w = uniform(...) without annotation takes the linear's mesh and is
    cut along k like x; the partial sums are summed across devices."""
    test = multidevice_test
    d = test.size
    t, k, n = 6, 4 * d, 5

    def weight(fd):
        return fd.ops.uniform(-1.0, 1.0, [n, k], rng_seed=22, rng_offset=7)

    with FusionDefinition() as fd:
        x = fd.define_tensor([t, k])
        out = fd.ops.linear(x, weight(fd))
        fd.add_output(out)
        x.set_device_mesh(mesh_of(range(d)))
        x.outer_split(1, d)
        x.axis(1).parallelize(ParallelType.mesh_x)
    x_full = global_tensor([t, k], seed=6)
    (local,) = fd.execute([test.shard(x_full, x)])
    expected = torch.nn.functional.linear(x_full, whole(weight, test.device))
    # cuBLAS and the CPU sum in other orders.
    torch.testing.assert_close(local.cpu(), expected, rtol=1e-5, atol=1e-4)
