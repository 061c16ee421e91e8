# SPDX-License-Identifier: MIT
"""A column-parallel linear whose weight [d, n, k] carries the device axis
as a logical axis of its own (nvfuser_direct's form): the output [d, t, n]
is sharded on its d axis, its outermost; results compare with torch on the
same global inputs."""

from __future__ import annotations

import pytest
import torch

from mdfuser import DataType, FusionDefinition, ParallelType
from mdfuser.multidevice import DeviceMesh, shard_tensor


@pytest.mark.parametrize("batch", [(5,), (2, 3)], ids=["2d", "3d"])
@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
def test_the_device_axis_of_the_weight_shards_the_output(multidevice_test, bias, batch):
    test = multidevice_test
    d, n, k = test.size, 3, 8
    g = torch.Generator().manual_seed(9)
    x = torch.randint(-2, 3, (*batch, k), generator=g).float()
    w = torch.randint(-2, 3, (d, n, k), generator=g).float()
    b = torch.randint(-2, 3, (d, n), generator=g).float()
    mesh = DeviceMesh(torch.arange(d))
    with FusionDefinition() as fd:
        tx = fd.define_tensor([-1] * len(batch) + [k], dtype=DataType.Float)
        tw = fd.define_tensor([d, n, k], dtype=DataType.Float)
        args = [tx, tw]
        if bias:
            args.append(fd.define_tensor([d, n], dtype=DataType.Float))
        out = fd.ops.linear(*args)
        fd.add_output(out)
        for tv in args:
            tv.set_device_mesh(mesh)
        for tv in args[1:]:
            tv.axis(0).parallelize(ParallelType.mesh_x)
    shards = [x, w[test.rank : test.rank + 1]] + ([b[test.rank : test.rank + 1]] if bias else [])
    (got,) = fd.execute([s.to(test.device) for s in shards])
    # [batch..., d * n] -> [d, batch..., n]
    expected = (
        torch.nn.functional.linear(x, w.reshape(d * n, k), b.reshape(-1) if bias else None)
        .reshape(*batch, d, n)
        .movedim(-2, 0)
    )
    assert torch.equal(got.cpu(), expected[test.rank : test.rank + 1])
    # The output was left without a mesh: shard_tensor lays it out as the
    # run did, as nvfuser_direct's tests read it.
    assert torch.equal(got.cpu(), shard_tensor(expected, out))
    assert "Communication" not in fd.last_host_ir()
    (sharding,) = fd.fec.get_output_shardings()
    assert sharding.axis_sharded_on(ParallelType.mesh_x) == 0


def test_a_bias_after_the_sum_of_a_split_weight_is_a_value_error(multidevice_test):
    """in_features split across the devices: the bias [A, B] would be added
    after the sum, to an output [A, t, B] it does not line up with."""
    test = multidevice_test
    test.require(2)
    d = test.size
    mesh = DeviceMesh(torch.arange(d))
    with FusionDefinition() as fd:
        tx = fd.define_tensor([-1, 4 * d], dtype=DataType.Float)
        tw = fd.define_tensor([2, 3, 4 * d], dtype=DataType.Float)
        tb = fd.define_tensor([2, 3], dtype=DataType.Float)
        fd.add_output(fd.ops.linear(tx, tw, tb))
        for tv in (tx, tw, tb):
            tv.set_device_mesh(mesh)
        for tv, axis in ((tx, 1), (tw, 2)):
            tv.outer_split(axis, d)
            tv.axis(axis).parallelize(ParallelType.mesh_x)
    shards = [torch.ones(5, 4), torch.ones(2, 3, 4), torch.ones(2, 3)]
    with pytest.raises(
        ValueError,
        match=r"linear with a weight \[A, B, K\] \(T1.*\) whose in_features are split "
        r"across devices cannot take its bias T2",
    ):
        fd.execute([t.to(test.device) for t in shards])
