# SPDX-License-Identifier: MIT
"""A column-parallel linear whose weight [d, n, k] carries the device axis
as a logical axis of its own (nvfuser_direct's form): the output [t, d, n]
is sharded on its d axis; results compare with torch on the same global
inputs."""

from __future__ import annotations

import pytest
import torch

from mdfuser import DataType, FusionDefinition, ParallelType
from mdfuser.multidevice import DeviceMesh


@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
def test_the_device_axis_of_the_weight_shards_the_output(multidevice_test, bias):
    test = multidevice_test
    d, n, k, t = test.size, 3, 8, 5
    g = torch.Generator().manual_seed(9)
    x = torch.randint(-2, 3, (t, k), generator=g).float()
    w = torch.randint(-2, 3, (d, n, k), generator=g).float()
    b = torch.randint(-2, 3, (d, n), generator=g).float()
    mesh = DeviceMesh(torch.arange(d))
    with FusionDefinition() as fd:
        tx = fd.define_tensor([-1, k], dtype=DataType.Float)
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
    expected = torch.nn.functional.linear(
        x, w.reshape(d * n, k), b.reshape(-1) if bias else None
    ).reshape(t, d, n)
    assert torch.equal(got.cpu(), expected[:, test.rank : test.rank + 1])
    assert "Communication" not in fd.last_host_ir()
