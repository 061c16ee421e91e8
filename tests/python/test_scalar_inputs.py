# SPDX-License-Identifier: MIT
"""Scalar inputs (define_scalar(None, dtype)) in one process: values given at
each execute, in their place among the inputs, against torch."""

from __future__ import annotations

import re

import pytest
import torch

from mdfuser import DataType, FusionDefinition
from mdfuser.multidevice import MultiDeviceExecutor


def scaled_shift() -> FusionDefinition:
    """x * a + k, a a Double input, k an Int input, defined between tensors."""
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, -1], dtype=DataType.Float)
        a = fd.define_scalar(None, dtype=DataType.Double)
        k = fd.define_scalar(None, dtype=DataType.Int)
        fd.add_output(fd.ops.add(fd.ops.mul(x, a), k))
    return fd


def test_values_change_from_run_to_run_with_one_program():
    fd = scaled_shift()
    x = torch.randn(3, 5)
    for a, k in [(2.0, 3), (0.5, -1), (4, 7), (-1.25, 0)]:
        (out,) = fd.execute([x, a, k])
        assert torch.equal(out, x * a + k), (a, k)
    assert fd._cache.num_programs == 1


def test_inputs_are_listed_in_the_order_defined():
    fd = scaled_shift()
    x, a, k = fd.fusion.inputs()
    assert x.is_tensor() and not a.is_tensor() and not k.is_tensor()
    assert a.is_symbolic() and a.value is None
    assert a.dtype() == DataType.Double and k.dtype() == DataType.Int
    constant = fd.define_scalar(2.0)
    assert not constant.is_symbolic() and constant.value == 2.0
    text = str(fd.fusion)
    assert f"inputs:\n  {x!r}\n  {a!r}\n  {k!r}\n" in text, text
    fd.execute([torch.ones(2, 2), 1.0, 1])
    assert fd.last_host_ir().startswith(f"%HostIrContainer {{ ({x!r}, {a!r}, {k!r}) -> "), (
        fd.last_host_ir()
    )


def test_a_scalar_input_promotes_as_a_python_number_does():
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1], dtype=DataType.BFloat16)
        a = fd.define_scalar(None, dtype=DataType.Double)
        fd.add_output(fd.ops.mul(x, a))
    x = torch.arange(6, dtype=torch.bfloat16)
    (out,) = fd.execute([x, 0.5])
    # Only through its category: BFloat16, then widened to Float as any
    # BFloat16 arithmetic (nvFuser's promotion).
    assert out.dtype == torch.float32
    assert torch.equal(out, x.float() * 0.5)


def test_operations_taking_scalars_read_the_value_at_run_time():
    with FusionDefinition() as fd:
        low = fd.define_scalar(None, dtype=DataType.Double)
        x = fd.define_tensor([-1, -1], dtype=DataType.Float)
        fill = fd.define_scalar(None, dtype=DataType.Float)
        e = fd.define_scalar(None, dtype=DataType.Int)
        flag = fd.define_scalar(None, dtype=DataType.Bool)
        fd.add_output(fd.ops.clamp(x, min=low))
        fd.add_output(fd.ops.full([2, 3], fill, DataType.Float))
        fd.add_output(fd.ops.pow(x, e))
        fd.add_output(fd.ops.where(fd.ops.gt(x, 0.0), flag, fd.ops.lt(x, -1.0)))
    x = torch.tensor([[-2.0, -0.5, 0.0], [0.5, 1.5, 3.0]])
    for low, fill, e, flag in [(-1.0, 2.5, 2, True), (0.25, -3, 3, False)]:
        clamped, full, power, chosen = fd.execute([low, x, fill, e, flag])
        assert torch.equal(clamped, torch.clamp(x, min=low))
        assert torch.equal(full, torch.full((2, 3), float(fill)))
        assert torch.equal(power, torch.pow(x, e))
        assert torch.equal(chosen, torch.where(x > 0, flag, x < -1))


def test_layer_norm_with_its_epsilon_given_at_execute():
    # The fused kernel needs eps when the program is built: with an input,
    # the layer norm runs as its primitives.
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1, 16], dtype=DataType.Float)
        eps = fd.define_scalar(None, dtype=DataType.Double)
        fd.add_output(fd.ops.layer_norm(x, 1, eps=eps))
    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(3))
    for eps in (1e-5, 0.5):
        (out,) = fd.execute([x, eps])
        torch.testing.assert_close(out, torch.nn.functional.layer_norm(x, (16,), eps=eps))
    assert "layer_norm(" not in fd.last_host_ir()


def test_bad_values_are_refused_naming_the_input():
    fd = scaled_shift()
    x = torch.ones(2, 2)
    with pytest.raises(ValueError, match="execute expected 3 inputs .* got 2"):
        fd.execute([x, 1.0])
    with pytest.raises(TypeError, match=r"input 1 is the scalar input s\d+ \(Double\): .* got str"):
        fd.execute([x, "2", 1])
    with pytest.raises(TypeError, match=r"input 2 is the scalar input .* got Tensor"):
        fd.execute([x, 1.0, torch.tensor(1)])
    with pytest.raises(TypeError, match=r"scalar input 1 \(s\d+\) has dtype Int but got 1.5"):
        fd.execute([x, 1.0, 1.5])
    with pytest.raises(TypeError, match=r"scalar input 0 \(s\d+\) has dtype Double but got true"):
        fd.execute([x, True, 1])
    with pytest.raises(TypeError, match="input 0 must be a torch.Tensor, got float"):
        fd.execute([1.0, 1.0, 1])
    # The failed runs left nothing behind.
    (out,) = fd.execute([x, 2.0, 1])
    assert torch.equal(out, x * 2 + 1)


def test_what_must_be_known_when_defining_refuses_a_scalar_input():
    with FusionDefinition() as fd:
        n = fd.define_scalar(None, dtype=DataType.Int)
        with pytest.raises(TypeError, match="an extent cannot be the scalar input"):
            fd.ops.full([n, 2], 0.0, DataType.Float)
        with pytest.raises(TypeError, match="rng_seed must be an int or an integer define_scalar"):
            fd.ops.uniform(0.0, 1.0, [2], rng_seed=fd.define_scalar(None), rng_offset=0)
        with pytest.raises(TypeError, match="a scalar input cannot be a UInt64"):
            fd.define_scalar(None, dtype=DataType.UInt64)
        with pytest.raises(TypeError, match="dtype must be an mdfuser.DataType"):
            fd.define_scalar(None, dtype=torch.float32)


def seeded_uniform(seed, offset) -> FusionDefinition:
    with FusionDefinition() as fd:
        x = fd.define_tensor([-1], dtype=DataType.Float)
        if seed is None:
            seed = fd.define_scalar(None, dtype=DataType.Int)
            offset = fd.define_scalar(None, dtype=DataType.Int)
        noise = fd.ops.uniform(0.0, 1.0, [4, 8], rng_seed=seed, rng_offset=offset)
        fd.add_output(noise)
        fd.add_output(fd.ops.add(x, 1.0))
    return fd


def test_random_values_seeded_at_execute():
    """rng_seed and rng_offset as scalar inputs: the values of a seed given
    at execute are those of the same seed given as constants."""
    given = seeded_uniform(None, None)
    x = torch.zeros(3)
    draws = {}
    for seed, offset in [(5, 0), (5, 1), (6, 0), (5, 0)]:
        (noise, _) = given.execute([x, seed, offset])
        (constant, _) = seeded_uniform(seed, offset).execute([x])
        assert torch.equal(noise, constant), (seed, offset)
        draws.setdefault((seed, offset), noise)
        assert torch.equal(draws[(seed, offset)], noise)
    assert not torch.equal(draws[(5, 0)], draws[(5, 1)])
    assert not torch.equal(draws[(5, 0)], draws[(6, 0)])
    assert given._cache.num_programs == 1
    printed = given.last_host_ir()
    assert re.search(r"rng_seed=s\d+,\s+rng_offset=s\d+\)", printed), printed


def test_the_multidevice_executor_takes_the_values_in_their_places():
    fd = scaled_shift()
    x = torch.randn(2, 3)
    (out,) = MultiDeviceExecutor(fd.fusion).run([x, 3.0, 2])
    assert torch.equal(out, x * 3 + 2)
