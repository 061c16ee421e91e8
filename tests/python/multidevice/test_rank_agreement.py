# SPDX-License-Identifier: MIT
"""Ranks that disagree about what they run.

At a fusion's first run, and whenever a rank's input signature differs
from its previous run's, the ranks of the fusion's mesh compare the fusion,
the execute options and their inputs' shapes, dtypes and devices. A
difference, or a user error on one rank, ends in the same error on every
rank, naming the ranks and their values, before any collective: never a
crash or a hang inside the collective library.

Every test here runs the row-parallel linear on the first two ranks
(mesh {0 1}); ranks beyond them take no part.
"""

from __future__ import annotations

import re

import pytest
import torch
from helpers import row_parallel_linear

from mdfuser import DataType, FusionDefinition


def fusion(multidevice_test, s: int = 2, h: int = 8):
    multidevice_test.require(2)
    return row_parallel_linear(2, s, h, dtype=multidevice_test.mdfuser_dtype)


def shards(multidevice_test, fd, rows: int, h: int = 8):
    """This rank's shards of a `rows` x 4h input and the h x 4h weight."""
    inp_tv, w_tv = fd.fusion.inputs()
    inp = torch.ones(rows, 4 * h, dtype=multidevice_test.dtype)
    w = torch.ones(h, 4 * h, dtype=multidevice_test.dtype)
    return [multidevice_test.shard(inp, inp_tv), multidevice_test.shard(w, w_tv)]


def rows_of(rank: int, rows: dict[int, int]) -> int:
    return rows.get(rank, rows[0])


def run_outside_the_mesh(multidevice_test, fd, inputs) -> None:
    """Ranks beyond the mesh take no part in the check: they run the fusion
    and get an empty output, whatever the ranks of the mesh do."""
    assert multidevice_test.rank >= 2
    (out,) = fd.execute(inputs)
    assert out.numel() == 0
    assert fd._cache.num_agreements == 0


@pytest.mark.parametrize(
    "rows, shapes",
    [
        ({0: 12, 1: 9}, "[12, 16] on rank 0 and [9, 16] on rank 1"),
        ({0: 0, 1: 12}, "[0, 16] on rank 0 and [12, 16] on rank 1"),
        ({0: 12, 1: 0}, "[12, 16] on rank 0 and [0, 16] on rank 1"),
    ],
    ids=["12-and-9-rows", "0-rows-on-rank-0", "0-rows-on-rank-1"],
)
def test_different_shard_shapes_raise_on_every_rank(multidevice_test, rows, shapes):
    fd = fusion(multidevice_test)
    inputs = shards(multidevice_test, fd, rows_of(multidevice_test.rank, rows))
    if multidevice_test.rank >= 2:
        return run_outside_the_mesh(multidevice_test, fd, inputs)
    with pytest.raises(ValueError, match=re.escape(f"input 0 (T0) has shape {shapes}")):
        fd.execute(inputs)


def test_different_stream_chunk_counts_raise_on_every_rank(multidevice_test):
    s = 2 if multidevice_test.rank == 0 else 3
    fd = fusion(multidevice_test, s=s)
    inputs = shards(multidevice_test, fd, 12)
    if multidevice_test.rank >= 2:
        return run_outside_the_mesh(multidevice_test, fd, inputs)
    with pytest.raises(
        ValueError,
        match=r"the fusion definitions differ between rank 0 and rank 1: line \d+ is "
        r".*\{2\}.* on rank 0 and .*\{3\}.* on rank 1",
    ):
        fd.execute(inputs)


def test_different_execute_options_raise_on_every_rank(multidevice_test):
    fd = fusion(multidevice_test)
    inputs = shards(multidevice_test, fd, 12)
    if multidevice_test.rank >= 2:
        return run_outside_the_mesh(multidevice_test, fd, inputs)
    disabled = ["inplace_allreduce"] if multidevice_test.rank == 1 else []
    with pytest.raises(
        ValueError,
        match=re.escape(
            "the execute options differ: inplace_allreduce=1 on rank 0 and "
            "inplace_allreduce=0 on rank 1"
        ),
    ):
        fd.execute(inputs, _disable_options=disabled)


def test_a_user_error_on_one_rank_is_raised_on_every_rank(multidevice_test):
    fd = fusion(multidevice_test)
    inputs = shards(multidevice_test, fd, 12)
    if multidevice_test.rank >= 2:
        return run_outside_the_mesh(multidevice_test, fd, inputs)
    if multidevice_test.rank == 1:
        inputs[1] = inputs[1].to(torch.float64)
    with pytest.raises(
        TypeError, match=re.escape("input 1 (T1) has dtype Double but was defined as")
    ) as error:
        fd.execute(inputs)
    if multidevice_test.rank == 0:
        assert str(error.value).startswith("rank 1: input 1 (T1)")


def test_ranks_run_again_after_they_disagreed(multidevice_test):
    fd = fusion(multidevice_test)
    if multidevice_test.rank < 2:
        bad = shards(multidevice_test, fd, 12 if multidevice_test.rank == 0 else 9)
        with pytest.raises(ValueError, match="has shape"):
            fd.execute(bad)
    (out,) = fd.execute(shards(multidevice_test, fd, 12))
    if multidevice_test.rank < 2:
        assert torch.equal(out.cpu(), torch.full((12, 8), 32.0, dtype=out.dtype))
    assert fd._cache.num_programs == 1


def test_agreeing_ranks_compare_when_the_signature_changes(multidevice_test):
    """12, 12, 6, 12 rows: compared at the first run and at each change."""
    fd = fusion(multidevice_test)
    for rows in (12, 12, 6, 12):
        (out,) = fd.execute(shards(multidevice_test, fd, rows))
    assert fd._cache.num_programs == 2
    assert fd._cache.num_agreements == (3 if multidevice_test.rank < 2 else 0)
    if multidevice_test.rank < 2:
        assert torch.equal(out.cpu(), torch.full((12, 8), 32.0, dtype=out.dtype))


def test_alternating_signatures_keep_the_store_from_growing(multidevice_test):
    """Each comparison posts a value per rank in the rendezvous store; each
    rank takes its previous one away once every rank has posted the next,
    so that a workload alternating signatures does not grow the store."""
    fd = fusion(multidevice_test)
    inputs = {rows: shards(multidevice_test, fd, rows) for rows in (12, 6)}
    comm = multidevice_test.comm
    store = comm._store()
    # Both programs compiled first: a program's set-up may post keys of
    # its own (the CUDA backend's symmetric buffers), once.
    fd.execute(inputs[12])
    fd.execute(inputs[6])
    # Every rank counts the store's keys while all others wait in a barrier,
    # before and after the runs, so that no rank's other work is counted.
    comm.barrier()
    keys = store.num_keys()
    comm.barrier()
    for _ in range(10):
        for rows in (6, 12):
            (out,) = fd.execute(inputs[rows])
    comm.barrier()
    grown = store.num_keys() - keys
    comm.barrier()
    if multidevice_test.rank < 2:
        assert fd._cache.num_agreements == 21
        assert torch.equal(out.cpu(), torch.full((12, 8), 32.0, dtype=out.dtype))
    # 19 comparisons by two ranks leave the last one's two keys in place of
    # the second one's (without the clean-up: 38 keys more). Each barrier
    # adds a key: the two between the counts, and the one after the second
    # count, which a rank may have reached before a slower one counts.
    assert grown <= 3


def test_switching_to_another_signature_is_compared_even_when_run_before(multidevice_test):
    """Both ranks ran 12 and then 6 rows; rank 0 switches back to 12 (a
    signature it compiled before) while rank 1 switches to 9: both compare,
    and both raise, instead of rank 0 going straight to its collectives."""
    fd = fusion(multidevice_test)
    for rows in (12, 6):
        fd.execute(shards(multidevice_test, fd, rows))
    if multidevice_test.rank >= 2:
        run_outside_the_mesh(multidevice_test, fd, shards(multidevice_test, fd, 12))
        return
    rows = 12 if multidevice_test.rank == 0 else 9
    with pytest.raises(ValueError, match=r"has shape \[12, 16\] on rank 0 and \[9, 16\] on rank 1"):
        fd.execute(shards(multidevice_test, fd, rows))
    assert fd._cache.num_agreements == 2  # the failed comparison is not counted
    (out,) = fd.execute(shards(multidevice_test, fd, 12))
    assert torch.equal(out.cpu(), torch.full((12, 8), 32.0, dtype=out.dtype))
    assert fd._cache.num_agreements == 3


def test_other_strides_alone_are_not_compared(multidevice_test):
    """Strides may differ between ranks, and changing them alone is no new
    signature to agree on: rank 1 passes a column-major input with the same
    values, the others run their previous signature, and all are right."""
    fd = fusion(multidevice_test)
    inputs = shards(multidevice_test, fd, 12)
    fd.execute(inputs)
    if multidevice_test.rank == 1:
        inputs[0] = inputs[0].t().contiguous().t()
        assert not inputs[0].is_contiguous()
    (out,) = fd.execute(inputs)
    if multidevice_test.rank < 2:
        assert torch.equal(out.cpu(), torch.full((12, 8), 32.0, dtype=out.dtype))
        assert fd._cache.num_agreements == 1
    assert fd._cache.num_programs == (2 if multidevice_test.rank == 1 else 1)


def test_a_fusion_without_a_mesh_is_not_compared(multidevice_test):
    # Without a mesh every rank runs the fusion on its own tensors: shapes
    # may differ and nothing is exchanged.
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, 4], dtype=DataType.Float)
        fd.add_output(fd.ops.mul(x, 2.0))
    rows = 3 + multidevice_test.rank
    x = torch.arange(rows * 4, dtype=torch.float32).reshape(rows, 4)
    (out,) = fd.execute([x])
    assert torch.equal(out, x * 2)
    assert fd._cache.num_agreements == 0


def test_an_input_mdfuser_cannot_run_on_one_rank_is_refused_on_every_rank(multidevice_test):
    fd = fusion(multidevice_test)
    inputs = shards(multidevice_test, fd, 12)
    if multidevice_test.rank >= 2:
        return run_outside_the_mesh(multidevice_test, fd, inputs)
    if multidevice_test.rank == 1:
        inputs[0] = torch.empty_like(inputs[0], device="meta")
    with pytest.raises(TypeError, match=re.escape("input 0 (T0) is on the meta device")) as error:
        fd.execute(inputs)
    if multidevice_test.rank == 0:
        assert str(error.value).startswith("rank 1: input 0 (T0)")


def allgather_on_two_by_two(test, parallel_type, rows: int = 8):
    """An allgather of x's rows spread on `parallel_type` of a 2 x 2 mesh:
    mesh_x's teams are its rows (0 1) and (2 3), mesh_y's its columns (0 2)
    and (1 3)."""
    from mdfuser import ParallelType
    from mdfuser.multidevice import DeviceMesh, shard_tensor

    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, 4], dtype=test.mdfuser_dtype)
        y = fd.ops.set(x)
        fd.add_output(y)
        for tv in (x, y):  # y replicated: gathered
            tv.set_device_mesh(DeviceMesh(torch.arange(4).reshape(2, 2)))
        x.outer_split(0, 2)
        x.axis(0).parallelize(getattr(ParallelType, parallel_type))
    full = torch.arange(rows * 4, dtype=test.dtype).reshape(rows, 4)
    (out,) = fd.execute([shard_tensor(full, x).to(test.device)])
    return out.cpu(), full


def test_teams_of_a_two_by_two_mesh_agree_apart(multidevice_test):
    """Ranks 0 and 1 run the fusion of the rows, then that of the columns;
    ranks 2 and 3 the columns first. Every team sees its own collectives in
    one order, so all four run, each checking with its own team."""
    test = multidevice_test
    if test.size != 4:
        pytest.skip("a 2 x 2 mesh runs on exactly 4 processes")
    order = ["mesh_x", "mesh_y"] if test.rank < 2 else ["mesh_y", "mesh_x"]
    for parallel_type in order:
        out, full = allgather_on_two_by_two(test, parallel_type)
        assert torch.equal(out, full), parallel_type


def test_a_disagreement_inside_a_team_is_raised_on_its_ranks(multidevice_test):
    """Rank 1 passes other shapes than rank 0 in the rows' fusion: ranks 0
    and 1 raise the difference, before any collective; ranks 2 and 3, a
    team of their own, run it."""
    test = multidevice_test
    if test.size != 4:
        pytest.skip("a 2 x 2 mesh runs on exactly 4 processes")
    # On GPUs the allgather runs on NCCL, which GPUs shared by processes
    # refuse first.
    test.require_nccl()
    rows = 12 if test.rank == 1 else 8
    if test.rank >= 2:
        out, full = allgather_on_two_by_two(test, "mesh_x", rows)
        assert torch.equal(out, full)
        return
    with pytest.raises(ValueError, match=r"has shape \[4, 4\] on rank 0 and \[6, 4\] on rank 1"):
        allgather_on_two_by_two(test, "mesh_x", rows)
