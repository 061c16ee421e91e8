# SPDX-License-Identifier: MIT
"""A scalar operation in a sharded fusion, as the reference's backward of a
transformer layer writes it: the partial sums of a row-parallel linear
scaled by the reciprocal of a scalar input."""

from __future__ import annotations

import torch
from helpers import row_parallel_hidden_near, schedule_row_parallel

from mdfuser import DataType, FusionDefinition


def test_a_sharded_linear_scaled_by_the_reciprocal_of_a_scalar(multidevice_test):
    test = multidevice_test
    d, t = test.size, 6
    h = row_parallel_hidden_near(8, d)
    with FusionDefinition() as fd:
        inp = fd.define_tensor([-1, 4 * h], contiguity=True, dtype=DataType.Float)
        w = fd.define_tensor([h, 4 * h], contiguity=True, dtype=DataType.Float)
        s = fd.define_scalar(None, dtype=DataType.Double)
        fd.add_output(fd.ops.mul(fd.ops.linear(inp, w), fd.ops.reciprocal(s)))
        schedule_row_parallel(inp, w, d, 2)
    g = torch.Generator().manual_seed(4)
    x = torch.randint(-2, 3, (t, 4 * h), generator=g).float()
    wt = torch.randint(-2, 3, (h, 4 * h), generator=g).float()
    inp_tv, w_tv = fd.fusion.inputs()[:2]
    shards = [test.shard(x, inp_tv), test.shard(wt, w_tv)]
    for value in (2.0, 4.0):
        (out,) = fd.execute([*shards, value])
        assert torch.equal(out.cpu(), torch.nn.functional.linear(x, wt) / value)
