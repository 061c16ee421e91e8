# SPDX-License-Identifier: MIT
"""TensorView.set_allocation_domain: mdfuser holds every local tensor
contiguous in the order of its logical axes, so it accepts the allocation
domains that say so (the loop axes of splits, in order) and refuses, with a
ValueError naming the axis, those that would need another layout."""

from __future__ import annotations

import pytest
import torch

from mdfuser import FusionDefinition, ParallelType
from mdfuser.multidevice import DeviceMesh


def defined(shape=(-1, -1)):
    fd = FusionDefinition()
    fd.__enter__()
    x = fd.define_tensor(list(shape))
    fd.add_output(fd.ops.add(x, 1.0))
    return fd, x


def finish(fd):
    fd.__exit__(None, None, None)
    return fd


def test_the_loop_domain_of_splits_in_order_is_accepted_and_runs():
    fd, x = defined()
    x.set_device_mesh(DeviceMesh(torch.arange(1)))
    x.split(0, 1, inner_split=False)
    x.axis(0).parallelize(ParallelType.mesh_x)
    x.split(2, 2)
    x.set_allocation_domain(x.get_loop_domain(), new_contiguity=True)
    x.set_allocation_domain(x.get_loop_domain(), new_contiguity=[True, True, True, True])
    finish(fd)
    t = torch.arange(12.0).reshape(3, 4)
    (out,) = fd.execute([t])
    assert torch.equal(out, t + 1)


def test_a_reordered_domain_is_refused_naming_the_axis():
    fd, x = defined()
    x.split(1, 2)
    x.reorder({2: 0})
    with pytest.raises(ValueError, match=r"cannot lay out T0.* its axis .* comes after an axis"):
        x.set_allocation_domain(x.get_loop_domain(), new_contiguity=True)
    finish(fd)


def test_a_domain_without_every_loop_axis_is_refused():
    fd, x = defined()
    x.split(0, 2)
    with pytest.raises(ValueError, match=r"each loop axis of T0.* once, got 2 axes"):
        x.set_allocation_domain(x.get_loop_domain()[:2], new_contiguity=True)
    finish(fd)


def test_another_tensors_axis_is_refused():
    fd, x = defined()
    y = fd.define_tensor([-1])
    with pytest.raises(ValueError, match=r"axis .* belongs to T2.*, not to T0"):
        x.set_allocation_domain([x.axis(0), y.axis(0)], new_contiguity=True)
    finish(fd)


def test_a_layout_with_gaps_is_refused():
    fd, x = defined()
    with pytest.raises(ValueError, match="contiguous; new_contiguity must be True"):
        x.set_allocation_domain(x.get_loop_domain(), new_contiguity=[True, False])
    finish(fd)
