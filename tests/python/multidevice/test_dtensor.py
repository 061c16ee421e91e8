# SPDX-License-Identifier: MIT
"""FusionDefinitionWrapper: DTensors in, DTensors out.

Every process builds the same global inputs, distributes them as DTensors
and compares the DTensors the wrapper returns (their placements, and their
full tensors) with plain torch on the global inputs. Run under
``mpirun -np N`` or torchrun. The sharded extents are multiples of N:
torch's DTensors shard unevenly, mdfuser only evenly (a test of its own
checks that it refuses the rest).
"""

from __future__ import annotations

import math

import pytest
import torch
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

from mdfuser import FusionDefinitionWrapper, ParallelType
from mdfuser.dtensor import parallel_types


def global_tensor(shape, seed: int) -> torch.Tensor:
    """Integer-valued float32, the same on every rank (sums are exact)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-4, 5, tuple(shape), generator=g).to(torch.float32)


def distribute(dtensor_test, full: torch.Tensor, mesh, placements) -> DTensor:
    return distribute_tensor(full.to(dtensor_test.test.device), mesh, placements)


def even(n: int, d: int) -> int:
    """n where it splits evenly over d devices, else its least multiple
    that does (8 stays 8 on 1, 2, 4 or 8 devices and becomes 24 on 3)."""
    return math.lcm(n, d)


def define_linear(n: int):
    """A define_fusion of linear(x, w) for x [tokens, n] and w [n, n]."""

    def define(fd):
        x = fd.define_tensor([-1, n])
        w = fd.define_tensor([n, n])
        fd.add_output(fd.ops.linear(x, w))

    return define


def test_parallel_types_of_mesh_dimensions():
    assert parallel_types(1) == [ParallelType.mesh_x]
    assert parallel_types(2) == [ParallelType.mesh_y, ParallelType.mesh_x]
    assert parallel_types(3) == [ParallelType.mesh_z, ParallelType.mesh_y, ParallelType.mesh_x]
    with pytest.raises(ValueError, match="1 to 3 dimensions"):
        parallel_types(4)


def test_column_parallel_linear_returns_the_placements_mdfuser_chose(dtensor_test):
    d = dtensor_test.test.size
    mesh = dtensor_test.mesh((d,))
    n = even(8, d)
    x, w = global_tensor([4, n], 1), global_tensor([n, n], 2)
    linear = FusionDefinitionWrapper(define_linear(n))
    (y,) = linear(
        [
            distribute(dtensor_test, x, mesh, [Replicate()]),
            distribute(dtensor_test, w, mesh, [Shard(0)]),
        ]
    )
    assert isinstance(y, DTensor)
    assert y.device_mesh == mesh
    assert y.placements == (Shard(1),)
    assert y.shape == (4, n)
    assert y.to_local().shape == (4, n // d)
    torch.testing.assert_close(y.full_tensor().cpu(), x @ w.T)


def test_output_placements_are_honoured(dtensor_test):
    d = dtensor_test.test.size
    mesh = dtensor_test.mesh((d,))
    n = even(8, d)
    x, w = global_tensor([4 * d, n], 3), global_tensor([n, n], 4)
    linear = FusionDefinitionWrapper(define_linear(n))
    inputs = [
        distribute(dtensor_test, x, mesh, [Replicate()]),
        distribute(dtensor_test, w, mesh, [Shard(0)]),
    ]
    for wanted in ([Replicate()], [Shard(0)], [Shard(1)]):
        (y,) = linear(inputs, output_placements=[wanted])
        assert y.placements == tuple(wanted)
        torch.testing.assert_close(y.full_tensor().cpu(), x @ w.T)


def test_a_partial_sum_input_is_summed_across_its_mesh_dimension(dtensor_test):
    """Each rank holds a contribution; the fusion sees their sum."""
    test = dtensor_test.test
    mesh = dtensor_test.mesh((test.size,))
    n = even(8, test.size)
    contribution = global_tensor([4, n], 10 + test.rank).to(test.device)
    x = DTensor.from_local(contribution, mesh, [Partial("sum")])
    w = global_tensor([n, n], 5)
    linear = FusionDefinitionWrapper(define_linear(n))
    (y,) = linear([x, distribute(dtensor_test, w, mesh, [Shard(0)])])
    assert y.placements == (Shard(1),)
    expected = sum(global_tensor([4, n], 10 + r) for r in range(test.size)) @ w.T
    torch.testing.assert_close(y.full_tensor().cpu(), expected)


def test_same_placements_reuse_the_program_other_placements_recompile(dtensor_test):
    d = dtensor_test.test.size
    mesh = dtensor_test.mesh((d,))
    n = even(8, d)
    x, w = global_tensor([4, n], 6), global_tensor([n, n], 7)
    linear = FusionDefinitionWrapper(define_linear(n))
    column = [
        distribute(dtensor_test, x, mesh, [Replicate()]),
        distribute(dtensor_test, w, mesh, [Shard(0)]),
    ]
    row = [
        distribute(dtensor_test, x, mesh, [Shard(1)]),
        distribute(dtensor_test, w, mesh, [Shard(1)]),
    ]
    assert (linear.num_definitions, linear.num_programs) == (0, 0)
    linear(column)
    assert (linear.num_definitions, linear.num_programs) == (1, 1)
    (y,) = linear(column)
    assert (linear.num_definitions, linear.num_programs) == (1, 1)
    torch.testing.assert_close(y.full_tensor().cpu(), x @ w.T)
    (y,) = linear(row)
    assert (linear.num_definitions, linear.num_programs) == (2, 2)
    assert y.placements == (Replicate(),)
    torch.testing.assert_close(y.full_tensor().cpu(), x @ w.T)
    linear(row)
    assert (linear.num_definitions, linear.num_programs) == (2, 2)
    # Another global shape is another key too.
    x2 = global_tensor([8, n], 8)
    (y,) = linear([distribute(dtensor_test, x2, mesh, [Replicate()]), column[1]])
    assert (linear.num_definitions, linear.num_programs) == (3, 3)
    torch.testing.assert_close(y.full_tensor().cpu(), x2 @ w.T)


def test_a_2d_mesh_maps_mesh_y_and_mesh_x(dtensor_test):
    """On an init_device_mesh of (dp, tp): tokens on mesh_y (dimension 0),
    the weight's rows on mesh_x (dimension 1); the output is sharded on
    both. Both ways round, of the world's least factor beyond 1 and the
    rest: (2, 1) and (1, 2) on 2 processes, (3, 1) and (1, 3) on 3."""
    test = dtensor_test.test
    test.require(2)
    d = test.size
    least = next(f for f in range(2, d + 1) if d % f == 0)
    tokens, n = even(4, d), even(8, d)
    for shape in {(least, d // least), (d // least, least)}:
        mesh = dtensor_test.mesh(shape)
        x, w = global_tensor([tokens, n], 11), global_tensor([n, n], 12)
        linear = FusionDefinitionWrapper(define_linear(n))
        (y,) = linear(
            [
                distribute(dtensor_test, x, mesh, [Shard(0), Replicate()]),
                distribute(dtensor_test, w, mesh, [Replicate(), Shard(0)]),
            ]
        )
        assert y.placements == (Shard(0), Shard(1)), shape
        torch.testing.assert_close(y.full_tensor().cpu(), x @ w.T)
        (definition,) = linear._compiled.values()
        x_tv = definition.fd.fusion.inputs()[0]
        assert x_tv.device_mesh.shape == list(shape)
        assert [x_tv.axis(i).parallel_type for i in range(x_tv.num_loop_axes)][0] == (
            ParallelType.mesh_y
        )


def test_two_mesh_dimensions_on_one_tensor_dimension(dtensor_test):
    """Shard(0) on both mesh dimensions splits dimension 0 by mesh_y, then
    each part by mesh_x, as DTensor does."""
    test = dtensor_test.test
    test.require(4)
    mesh = dtensor_test.mesh((2, test.size // 2))
    x = global_tensor([8, 4], 13)

    def double(fd):
        t = fd.define_tensor([8, 4])
        fd.add_output(fd.ops.mul(t, 2.0))

    (y,) = FusionDefinitionWrapper(double)(
        [distribute(dtensor_test, x, mesh, [Shard(0), Shard(0)])]
    )
    assert y.placements == (Shard(0), Shard(0))
    torch.testing.assert_close(y.to_local().cpu(), (2 * x).chunk(test.size)[test.rank])
    torch.testing.assert_close(y.full_tensor().cpu(), 2 * x)


def test_bad_inputs_are_refused_before_anything_runs(dtensor_test):
    test = dtensor_test.test
    mesh = dtensor_test.mesh((test.size,))
    n = even(8, test.size)
    x, w = global_tensor([4, n], 1), global_tensor([n, n], 2)
    xd = distribute(dtensor_test, x, mesh, [Replicate()])
    wd = distribute(dtensor_test, w, mesh, [Shard(0)])
    linear = FusionDefinitionWrapper(define_linear(n))
    with pytest.raises(ValueError, match=r"input 1 is a Tensor, not a DTensor"):
        linear([xd, w.to(test.device)])
    with pytest.raises(
        ValueError,
        match=r'Partial\(max\).*supported: Shard\(dim\), Replicate\(\) and Partial\("sum"\)',
    ):
        linear([DTensor.from_local(x.to(test.device), mesh, [Partial("max")]), wd])
    with pytest.raises(ValueError, match=r"define_fusion defined 2 inputs but was called with 3"):
        linear([xd, wd, wd])
    with pytest.raises(
        ValueError, match=rf"input 1 has global shape \({n}, {n // 2}\).*shape \[{n}, {n}\]"
    ):
        linear([xd, distribute(dtensor_test, w[:, : n // 2], mesh, [Replicate()])])
    with pytest.raises(ValueError, match=r"output_placements\[0\].*Partial"):
        linear([xd, wd], output_placements=[[Partial("sum")]])
    if test.size > 1:
        other = dtensor_test.mesh((1, test.size))
        with pytest.raises(
            ValueError, match=r"input 1 is a DTensor .* every input must be on the same mesh"
        ):
            linear([xd, distribute(dtensor_test, w, other, [Replicate(), Shard(0)])])
    assert linear.num_definitions == 0


def test_jagged_shards_are_refused(dtensor_test):
    """Non-uniform sharding: a global extent that does not divide, or local
    shards whose sizes disagree with the global shape."""
    test = dtensor_test.test
    test.require(2)
    mesh = dtensor_test.mesh((test.size,))
    n = even(8, test.size)
    w = distribute(dtensor_test, global_tensor([n, n], 2), mesh, [Shard(0)])
    linear = FusionDefinitionWrapper(define_linear(n))
    uneven = distribute(dtensor_test, global_tensor([test.size + 1, n], 3), mesh, [Shard(0)])
    with pytest.raises(
        ValueError,
        match=rf"dimension 0 of extent {test.size + 1} does not split evenly into {test.size} "
        "shards",
    ):
        linear([uneven, w])
    # Local shards of 2 rows on every rank but one that claims 3.
    rows = 3 if test.rank == 0 else 2
    lying = DTensor.from_local(
        torch.zeros(rows, n, device=test.device),
        mesh,
        [Shard(0)],
        shape=torch.Size([2 * test.size, n]),
        stride=(n, 1),
    )
    if test.rank == 0:
        with pytest.raises(
            ValueError,
            match=rf"local shard has shape \(3, {n}\); uniform sharding gives every device a "
            rf"shard of shape \(2, {n}\)",
        ):
            linear([lying, w])
    assert linear.num_definitions == 0


def test_outputs_feed_torch_dtensor_ops_like_a_pure_dtensor_mlp(dtensor_test):
    """The column-parallel half of the MLP through mdfuser, the
    row-parallel half through torch's own DTensor ops, against the whole
    MLP in DTensor ops."""
    test = dtensor_test.test
    mesh = dtensor_test.mesh((test.size,))
    h = even(8, test.size)
    g = torch.Generator().manual_seed(51)
    x, w1, b1 = (
        torch.randn(4, h, generator=g),
        torch.randn(4 * h, h, generator=g),
        torch.randn(4 * h, generator=g),
    )
    w2, b2 = torch.randn(h, 4 * h, generator=g), torch.randn(h, generator=g)
    f = torch.nn.functional
    xd = distribute(dtensor_test, x, mesh, [Replicate()])
    w1d = distribute(dtensor_test, w1, mesh, [Shard(0)])
    b1d = distribute(dtensor_test, b1, mesh, [Shard(0)])
    w2d = distribute(dtensor_test, w2, mesh, [Shard(1)])
    b2d = distribute(dtensor_test, b2, mesh, [Replicate()])

    def up(fd):
        xt = fd.define_tensor([-1, h])
        w = fd.define_tensor([4 * h, h])
        b = fd.define_tensor([4 * h])
        fd.add_output(fd.ops.gelu(fd.ops.linear(xt, w, b), approximate="tanh"))

    (act,) = FusionDefinitionWrapper(up)([xd, w1d, b1d])
    assert act.placements == (Shard(1),)
    y = f.linear(act, w2d, b2d)
    assert isinstance(y, DTensor)

    reference = f.linear(f.gelu(f.linear(xd, w1d, b1d), approximate="tanh"), w2d, b2d)
    torch.testing.assert_close(y.full_tensor(), reference.full_tensor())
    torch.testing.assert_close(
        y.full_tensor().cpu(),
        f.linear(f.gelu(f.linear(x, w1, b1), approximate="tanh"), w2, b2),
        rtol=1e-5,
        atol=1e-5,
    )


def test_a_world_numbered_otherwise_than_mdfuser_is_refused(dtensor_test, monkeypatch):
    """torch.distributed must number the processes as mdfuser's launcher
    does; the check runs before anything is defined or communicated."""
    import torch.distributed as dist

    test = dtensor_test.test
    mesh = dtensor_test.mesh((test.size,))
    x, w = global_tensor([4, 8], 1), global_tensor([8, 8], 2)
    inputs = [
        distribute(dtensor_test, x, mesh, [Replicate()]),
        distribute(dtensor_test, w, mesh, [Replicate()]),
    ]
    linear = FusionDefinitionWrapper(define_linear(8))
    monkeypatch.setattr(dist, "get_rank", lambda *args: test.rank + 1)
    with pytest.raises(
        ValueError,
        match=rf"torch.distributed says rank {test.rank + 1} of {test.size} but mdfuser's "
        rf"launcher says rank {test.rank} of {test.size}",
    ):
        linear(inputs)
    assert linear.num_definitions == 0


@pytest.mark.parametrize("name", ["execute_with_dtensors", "dtensor_execute"])
def test_execute_with_dtensors_runs_a_raw_api_definition(dtensor_test, name):
    """nvfuser_direct's execute_with_dtensors (dtensor_execute in other
    versions of it): the fusion declares the shardings (row-parallel
    linear); DTensors with those placements go in, DTensors with the
    placements mdfuser chose come out. Other placements are refused before
    anything runs."""
    import mdfuser
    from mdfuser import FusionDefinition
    from mdfuser.multidevice import DeviceMesh

    execute_with_dtensors = getattr(mdfuser, name)

    d = dtensor_test.test.size
    mesh = dtensor_test.mesh((d,))
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, 4 * d])
        w = fd.define_tensor([6, 4 * d])
        fd.add_output(fd.ops.linear(x, w))
        for tv in (x, w):
            tv.set_device_mesh(DeviceMesh(range(d)))
            tv.outer_split(1, d)
            tv.axis(1).parallelize(ParallelType.mesh_x)
    x_full, w_full = global_tensor([5, 4 * d], 21), global_tensor([6, 4 * d], 22)
    xs = distribute(dtensor_test, x_full, mesh, [Shard(1)])
    ws = distribute(dtensor_test, w_full, mesh, [Shard(-1)])
    (y,) = execute_with_dtensors(fd, [xs, ws])
    assert isinstance(y, DTensor) and y.placements == (Replicate(),)
    torch.testing.assert_close(y.full_tensor().cpu(), x_full @ w_full.T)
    (sharding,) = fd.fec.get_output_shardings()
    assert sharding.axis_sharded_on(ParallelType.mesh_x) == -1
    if d > 1:
        with pytest.raises(ValueError, match=rf"{name}: input 0 is a DTensor .* but the fusion"):
            execute_with_dtensors(fd, [distribute(dtensor_test, x_full, mesh, [Replicate()]), ws])
    with pytest.raises(ValueError, match=f"{name}: the fusion has 2 inputs, got 1 DTensors"):
        execute_with_dtensors(fd, [xs])


def define_scaled_linear(n: int):
    """A define_fusion of linear(x * a, w) + b for x [tokens, n] and
    w [n, n], with a and b scalar inputs between the tensors."""
    from mdfuser import DataType

    def define(fd):
        x = fd.define_tensor([-1, n])
        a = fd.define_scalar(None, dtype=DataType.Double)
        w = fd.define_tensor([n, n])
        b = fd.define_scalar(None, dtype=DataType.Int)
        fd.add_output(fd.ops.add(fd.ops.linear(fd.ops.mul(x, a), w), b))

    return define


def test_scalar_inputs_take_numbers_in_their_places(dtensor_test):
    """Numbers go where define_fusion calls define_scalar(None); new values
    neither redefine nor recompile."""
    d = dtensor_test.test.size
    mesh = dtensor_test.mesh((d,))
    n = even(8, d)
    x, w = global_tensor([2 * d, n], 31), global_tensor([n, n], 32)
    xs = distribute(dtensor_test, x, mesh, [Shard(0)])
    ws = distribute(dtensor_test, w, mesh, [Shard(1)])
    scaled = FusionDefinitionWrapper(define_scaled_linear(n))
    for a, b in [(2.0, 1), (-0.5, 3)]:
        (y,) = scaled([xs, a, ws, b])
        torch.testing.assert_close(y.full_tensor().cpu(), (x * a) @ w.T + b)
    assert scaled.num_definitions == 1 and scaled.num_programs == 1
    with pytest.raises(
        ValueError, match="input 1 is a DTensor, but define_fusion defined a scalar"
    ):
        scaled([xs, ws, ws, 1])
    with pytest.raises(ValueError, match="input 2 is a number, but define_fusion defined a tensor"):
        scaled([xs, 1.0, 2.0, 1])
    with pytest.raises(TypeError, match=r"scalar input 1 \(s\d+\) has dtype Int but got 1.5"):
        scaled([xs, 1.0, ws, 1.5])


def test_execute_with_dtensors_takes_numbers_for_scalar_inputs(dtensor_test):
    from mdfuser import DataType, FusionDefinition, execute_with_dtensors
    from mdfuser.multidevice import DeviceMesh

    d = dtensor_test.test.size
    mesh = dtensor_test.mesh((d,))
    with FusionDefinition() as fd:
        a = fd.define_scalar(None, dtype=DataType.Double)
        x = fd.define_tensor([-1, 4 * d])
        fd.add_output(fd.ops.mul(x, a))
        x.set_device_mesh(DeviceMesh(range(d)))
        x.outer_split(1, d)
        x.axis(1).parallelize(ParallelType.mesh_x)
    x_full = global_tensor([3, 4 * d], 33)
    xs = distribute(dtensor_test, x_full, mesh, [Shard(1)])
    for a in (3.0, -2):
        (y,) = execute_with_dtensors(fd, [a, xs])
        assert y.placements == (Shard(1),)
        torch.testing.assert_close(y.full_tensor().cpu(), x_full * a)
    with pytest.raises(TypeError, match=r"input 0 is the scalar input .* got DTensor"):
        execute_with_dtensors(fd, [xs, xs])


def test_ranks_outside_the_dtensors_mesh_are_told_so(dtensor_test):
    """DTensors on a mesh of rank 0 alone: rank 0 computes; the other ranks,
    which hold nothing of them, get a ValueError saying so."""
    from torch.distributed.device_mesh import DeviceMesh as TorchDeviceMesh

    test = dtensor_test.test
    mesh = TorchDeviceMesh(test.device.type, [0])
    x, w = global_tensor([4, 8], 41), global_tensor([8, 8], 42)
    inputs = [distribute(dtensor_test, t, mesh, [Replicate()]) for t in (x, w)]
    linear = FusionDefinitionWrapper(define_linear(8))
    if test.rank == 0:
        (y,) = linear(inputs)
        torch.testing.assert_close(y.to_local().cpu(), x @ w.T)
        return
    with pytest.raises(
        ValueError, match=rf"this rank \({test.rank}\) is not in the DTensors' mesh \[0\]"
    ):
        linear(inputs)


def test_execute_options_reach_the_program(dtensor_test):
    """backend and the options go to execute: a row-parallel linear runs
    its allreduce as rings with ring_decomposition, and an unknown option
    is refused."""
    test = dtensor_test.test
    d = test.size
    mesh = dtensor_test.mesh((d,))
    x, w = global_tensor([6, 8 * d], 20), global_tensor([8, 8 * d], 21)

    def define(fd):
        xs = fd.define_tensor([-1, 8 * d])
        ws = fd.define_tensor([8, 8 * d])
        fd.add_output(fd.ops.linear(xs, ws))

    linear = FusionDefinitionWrapper(define)
    inputs = [
        distribute(dtensor_test, x, mesh, [Shard(1)]),
        distribute(dtensor_test, w, mesh, [Shard(1)]),
    ]
    (y,) = linear(
        inputs,
        output_placements=[[Replicate()]],
        backend=test.collective_backend,
        _enable_options=["ring_decomposition"],
    )
    torch.testing.assert_close(y.full_tensor().cpu(), x @ w.T)
    (compiled,) = linear._compiled.values()
    assert ("CollectivePermute" in compiled.fd.last_host_ir()) == (d > 1)
    with pytest.raises(ValueError, match="unknown option 'bogus'"):
        linear(inputs, _enable_options=["bogus"])
