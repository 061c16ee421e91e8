# SPDX-License-Identifier: MIT
"""grouped_mm sharded on every process of the job: column-parallel (the
experts' N on mesh_x), row-parallel (K on mesh_x: partial sums and an
allreduce), expert-sharded weights (the group axis on mesh_x: each device
computes its experts' rows, then an allreduce or a reduce-scatter), and the
grouped MLP of a mixture-of-experts layer, forward and backward (written as
nvfuser_direct writes it, with grouped_mm on transposed operands). Results
compare with plain torch on the same global inputs; extents that are split
are multiples of the world size."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from grouped_mm_reference import grouped_mm as reference
from grouped_mm_reference import offsets_of

from mdfuser import DataType, FusionDefinition, ParallelType
from mdfuser.multidevice import DeviceMesh


def small_integers(shape, seed: int, dtype: torch.dtype) -> torch.Tensor:
    """Entries in {-1, 0, 1}: sums of a few of them are exact in BFloat16
    and Float, whatever the order in which devices add them."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(-1, 2, tuple(shape), generator=generator).to(dtype)


def group_sizes(g: int, seed: int) -> list[int]:
    """Ragged sizes, one of them 0."""
    generator = torch.Generator().manual_seed(seed)
    sizes = torch.randint(1, 6, (g,), generator=generator).tolist()
    sizes[g // 2] = 0
    return sizes


def shard_on_mesh_x(tv, axis: int, d: int) -> None:
    tv.outer_split(axis, d)
    tv.axis(axis).parallelize(ParallelType.mesh_x)


def communications(fd) -> list[str]:
    return [
        line.strip()
        for line in fd.last_host_ir().splitlines()
        if line.strip().startswith("Communication ")
    ]


def test_column_parallel(multidevice_test):
    # nvfuser_direct's test_column_parallel_grouped_mm: the weight [G, N, K]
    # with N on mesh_x, permuted to [G, K, N]; the output stays sharded on N.
    test = multidevice_test
    d, g, k = test.size, 4, 16
    n = 8 * d
    sizes = group_sizes(g, seed=1)
    m = sum(sizes)
    mesh = DeviceMesh(torch.arange(d))
    with FusionDefinition() as fd:
        inp = fd.define_tensor([-1, k], dtype=test.mdfuser_dtype)
        w = fd.define_tensor([g, n, k], dtype=test.mdfuser_dtype)
        offsets = fd.define_tensor([g], dtype=DataType.Int32)
        fd.add_output(fd.ops.grouped_mm(inp, fd.ops.permute(w, [0, 2, 1]), offsets))
        for tv in (inp, w, offsets):
            tv.set_device_mesh(mesh)
        shard_on_mesh_x(w, 1, d)
    x, weight = small_integers([m, k], 2, test.dtype), small_integers([g, n, k], 3, test.dtype)
    offs = offsets_of(sizes)
    (out,) = fd.execute([x.to(test.device), test.shard(weight, w), offs.to(test.device)])
    expected = reference(x, weight.transpose(1, 2), offs)
    part = n // d
    assert torch.equal(out.cpu(), expected[:, test.rank * part : (test.rank + 1) * part])
    assert communications(fd) == [], fd.last_host_ir()


def test_row_parallel(multidevice_test):
    # nvfuser_direct's test_row_parallel_grouped_mm: K on mesh_x in the
    # tokens and the weight; the partial sums are summed by an allreduce.
    test = multidevice_test
    d, g, n = test.size, 4, 8
    k = 4 * d
    sizes = group_sizes(g, seed=4)
    m = sum(sizes)
    mesh = DeviceMesh(torch.arange(d))
    with FusionDefinition() as fd:
        inp = fd.define_tensor([-1, k], dtype=test.mdfuser_dtype)
        w = fd.define_tensor([g, n, k], dtype=test.mdfuser_dtype)
        offsets = fd.define_tensor([g], dtype=DataType.Int32)
        fd.add_output(fd.ops.grouped_mm(inp, fd.ops.permute(w, [0, 2, 1]), offsets))
        for tv in (inp, w, offsets):
            tv.set_device_mesh(mesh)
        shard_on_mesh_x(inp, 1, d)
        shard_on_mesh_x(w, 2, d)
    x, weight = small_integers([m, k], 5, test.dtype), small_integers([g, n, k], 6, test.dtype)
    offs = offsets_of(sizes)
    (out,) = fd.execute([test.shard(x, inp), test.shard(weight, w), offs.to(test.device)])
    assert torch.equal(out.cpu(), reference(x, weight.transpose(1, 2), offs))
    assert [c for c in communications(fd) if "type=Allreduce" in c], fd.last_host_ir()


@pytest.mark.parametrize("tokens_sharded_out", [False, True], ids=["replicated", "token_sharded"])
def test_expert_sharded_weight(multidevice_test, tokens_sharded_out):
    # The group axis of the weight on mesh_x: each device holds G / d
    # experts and computes their tokens' rows; the others are zero in its
    # partial result, which an allreduce sums (a reduce-scatter when the
    # output is sharded on its tokens). The weight is never gathered.
    test = multidevice_test
    d, k, n = test.size, 8, 6
    g = 2 * d
    sizes = group_sizes(g, seed=7)
    sizes[0] += (-sum(sizes)) % d  # tokens a multiple of d
    m = sum(sizes)
    mesh = DeviceMesh(torch.arange(d))
    with FusionDefinition() as fd:
        inp = fd.define_tensor([m, k], dtype=test.mdfuser_dtype)
        w = fd.define_tensor([g, k, n], dtype=test.mdfuser_dtype)
        offsets = fd.define_tensor([g], dtype=DataType.Int32)
        out = fd.ops.grouped_mm(inp, w, offsets)
        fd.add_output(out)
        for tv in (inp, w, offsets, out):
            tv.set_device_mesh(mesh)
        shard_on_mesh_x(w, 0, d)
        if tokens_sharded_out:
            shard_on_mesh_x(out, 0, d)
    x, weight = small_integers([m, k], 8, test.dtype), small_integers([g, k, n], 9, test.dtype)
    offs = offsets_of(sizes)
    (got,) = fd.execute([x.to(test.device), test.shard(weight, w), offs.to(test.device)])
    expected = reference(x, weight, offs)
    if tokens_sharded_out:
        rows = m // d
        expected = expected[test.rank * rows : (test.rank + 1) * rows]
    assert torch.equal(got.cpu(), expected)
    kinds = " ".join(communications(fd))
    assert "Allgather" not in kinds, fd.last_host_ir()
    wanted = "type=ReduceScatter" if tokens_sharded_out else "type=Allreduce"
    assert wanted in kinds, fd.last_host_ir()


def test_expert_sharded_columns(multidevice_test):
    # [G, M, K] @ [K, N] with the experts of the first operand on mesh_x:
    # each device fills its experts' columns.
    test = multidevice_test
    d, m, k = test.size, 5, 8
    g = 2 * d
    sizes = group_sizes(g, seed=10)
    n = sum(sizes)
    mesh = DeviceMesh(torch.arange(d))
    with FusionDefinition() as fd:
        a = fd.define_tensor([g, m, k], dtype=test.mdfuser_dtype)
        b = fd.define_tensor([k, n], dtype=test.mdfuser_dtype)
        offsets = fd.define_tensor([g], dtype=DataType.Int32)
        fd.add_output(fd.ops.grouped_mm(a, b, offsets))
        for tv in (a, b, offsets):
            tv.set_device_mesh(mesh)
        shard_on_mesh_x(a, 0, d)
    x, y = small_integers([g, m, k], 11, test.dtype), small_integers([k, n], 12, test.dtype)
    offs = offsets_of(sizes)
    (got,) = fd.execute([test.shard(x, a), y.to(test.device), offs.to(test.device)])
    assert torch.equal(got.cpu(), reference(x, y, offs))


def swiglu_experts(inp, gate_w, up_w, down_w, offsets):
    """The grouped MLP in plain torch."""
    gate = reference(inp, gate_w, offsets)
    up = reference(inp, up_w, offsets)
    return reference(F.silu(gate) * up, down_w, offsets)


def define_grouped_mlp(fd, dtype, g, k, n):
    """nvfuser_direct's test_grouped_mlp: gate and up [G, K, N], down
    [G, N, K], the gate's product in Float through silu."""
    inp = fd.define_tensor([-1, k], dtype=dtype)
    gate_w = fd.define_tensor([g, k, n], dtype=dtype)
    up_w = fd.define_tensor([g, k, n], dtype=dtype)
    down_w = fd.define_tensor([g, n, k], dtype=dtype)
    offsets = fd.define_tensor([g], dtype=DataType.Int32)
    gate = fd.ops.cast(fd.ops.grouped_mm(inp, gate_w, offsets), DataType.Float)
    up = fd.ops.grouped_mm(inp, up_w, offsets)
    hidden = fd.ops.cast(fd.ops.mul(fd.ops.silu(gate), up), dtype)
    fd.add_output(fd.ops.grouped_mm(hidden, down_w, offsets))
    return inp, gate_w, up_w, down_w, offsets


def schedule_grouped_mlp(tvs, mesh, d: int, parallelism: str) -> None:
    inp, gate_w, up_w, down_w, offsets = tvs
    for tv in tvs:
        tv.set_device_mesh(mesh)
    if parallelism == "tensor":
        # Column-parallel gate and up, row-parallel down.
        shard_on_mesh_x(gate_w, 2, d)
        shard_on_mesh_x(up_w, 2, d)
        shard_on_mesh_x(down_w, 1, d)
    else:
        # Every device holds G / d experts whole.
        for w in (gate_w, up_w, down_w):
            shard_on_mesh_x(w, 0, d)


@pytest.mark.parametrize("parallelism", ["tensor", "expert"])
def test_grouped_mlp(multidevice_test, parallelism):
    test = multidevice_test
    d, k = test.size, 16
    g, n = (4, 4 * d) if parallelism == "tensor" else (2 * d, 12)
    sizes = group_sizes(g, seed=13)
    mesh = DeviceMesh(torch.arange(d))
    with FusionDefinition() as fd:
        tvs = define_grouped_mlp(fd, test.mdfuser_dtype, g, k, n)
        schedule_grouped_mlp(tvs, mesh, d, parallelism)
    generator = torch.Generator().manual_seed(14)
    inputs = {
        "inp": torch.randn(sum(sizes), k, generator=generator),
        "gate_w": torch.randn(g, k, n, generator=generator) / 4,
        "up_w": torch.randn(g, k, n, generator=generator) / 4,
        "down_w": torch.randn(g, n, k, generator=generator) / 4,
    }
    offs = offsets_of(sizes)
    expected, torch_result = test.references(lambda **t: swiglu_experts(**t, offsets=offs), inputs)
    shards = [test.shard(t.to(test.dtype), tv) for t, tv in zip(inputs.values(), tvs)]
    (out,) = fd.execute(shards + [offs.to(test.device)])
    test.assert_close(out, expected, test.tolerance(expected, torch_result), parallelism)
    kinds = " ".join(communications(fd))
    assert "type=Allreduce" in kinds and "Allgather" not in kinds, fd.last_host_ir()


def define_grouped_mlp_backward(fd, dtype, g, k, n):
    """The grouped MLP's gradients, each product a grouped_mm on transposed
    operands: the tokens' gradients with the weights transposed, the
    weights' gradients with the tokens transposed (offsets on K)."""
    inp = fd.define_tensor([-1, k], dtype=dtype)
    gate_w = fd.define_tensor([g, k, n], dtype=dtype)
    up_w = fd.define_tensor([g, k, n], dtype=dtype)
    down_w = fd.define_tensor([g, n, k], dtype=dtype)
    offsets = fd.define_tensor([g], dtype=DataType.Int32)
    grad_out = fd.define_tensor([-1, k], dtype=dtype)

    def t2(tv):
        return fd.ops.permute(tv, [1, 0])

    def t3(tv):
        return fd.ops.permute(tv, [0, 2, 1])

    def low(tv):
        # Arithmetic on bf16 returns Float (doc/ops.md); a grouped_mm
        # takes its operands in one dtype.
        return fd.ops.cast(tv, dtype)

    gate = fd.ops.grouped_mm(inp, gate_w, offsets)
    up = fd.ops.grouped_mm(inp, up_w, offsets)
    sig = fd.ops.sigmoid(gate)
    act = fd.ops.mul(gate, sig)
    hidden = low(fd.ops.mul(act, up))

    grad_hidden = fd.ops.grouped_mm(grad_out, t3(down_w), offsets)
    grad_down_w = fd.ops.grouped_mm(t2(hidden), grad_out, offsets)
    grad_up = fd.ops.mul(grad_hidden, act)
    grad_act = fd.ops.mul(grad_hidden, up)
    one = fd.define_scalar(1.0)
    # silu'(x) = sigmoid(x) * (1 + x * (1 - sigmoid(x)))
    dsilu = fd.ops.mul(sig, fd.ops.add(one, fd.ops.mul(gate, fd.ops.sub(one, sig))))
    grad_gate = fd.ops.mul(grad_act, dsilu)
    grad_gate, grad_up = low(grad_gate), low(grad_up)
    grad_gate_w = fd.ops.grouped_mm(t2(inp), grad_gate, offsets)
    grad_up_w = fd.ops.grouped_mm(t2(inp), grad_up, offsets)
    grad_inp = fd.ops.add(
        fd.ops.grouped_mm(grad_gate, t3(gate_w), offsets),
        fd.ops.grouped_mm(grad_up, t3(up_w), offsets),
    )
    for out in (grad_inp, grad_gate_w, grad_up_w, grad_down_w):
        fd.add_output(out)
    return inp, gate_w, up_w, down_w, offsets, grad_out


def test_grouped_mlp_backward_tensor_parallel(multidevice_test):
    # Column-parallel gate and up, row-parallel down: the weights'
    # gradients stay sharded like the weights, the tokens' gradient is
    # summed by an allreduce.
    test = multidevice_test
    d, g, k = test.size, 3, 8
    n = 4 * d
    sizes = group_sizes(g, seed=15)
    m = sum(sizes)
    mesh = DeviceMesh(torch.arange(d))
    with FusionDefinition() as fd:
        tvs = define_grouped_mlp_backward(fd, test.mdfuser_dtype, g, k, n)
        schedule_grouped_mlp(tvs[:5], mesh, d, "tensor")
        tvs[5].set_device_mesh(mesh)
    generator = torch.Generator().manual_seed(16)
    inputs = {
        "inp": torch.randn(m, k, generator=generator),
        "gate_w": torch.randn(g, k, n, generator=generator) / 4,
        "up_w": torch.randn(g, k, n, generator=generator) / 4,
        "down_w": torch.randn(g, n, k, generator=generator) / 4,
        "grad_out": torch.randn(m, k, generator=generator),
    }
    offs = offsets_of(sizes)

    def gradients(inp, gate_w, up_w, down_w, grad_out):
        leaves = [t.detach().requires_grad_() for t in (inp, gate_w, up_w, down_w)]
        swiglu_experts(*leaves, offsets=offs).backward(grad_out)
        return [t.grad for t in leaves]

    expected, torch_result = test.references(gradients, inputs)
    shards = [test.shard(t.to(test.dtype), tv) for t, tv in zip(list(inputs.values())[:4], tvs)]
    got = fd.execute(
        shards + [offs.to(test.device), inputs["grad_out"].to(test.device, test.dtype)]
    )
    # grad_inp whole; the weights' gradients sharded on N like the weights.
    part = n // d
    own = slice(test.rank * part, (test.rank + 1) * part)
    local = [expected[0], expected[1][..., own], expected[2][..., own], expected[3][:, own]]
    local_torch = [
        torch_result[0],
        torch_result[1][..., own],
        torch_result[2][..., own],
        torch_result[3][:, own],
    ]
    names = ["grad_inp", "grad_gate_w", "grad_up_w", "grad_down_w"]
    for out, exp, tr, name in zip(got, local, local_torch, names):
        test.assert_close(out, exp, test.tolerance(exp, tr), name)
    kinds = " ".join(communications(fd))
    assert "type=Allreduce" in kinds and "Allgather" not in kinds, fd.last_host_ir()
