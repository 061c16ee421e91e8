# SPDX-License-Identifier: MIT
"""A stream chunk count left to mdfuser (outer_split without a factor).

mdfuser compiles each count worth trying (the divisors of the split axis,
up to 16) through the fusion passes and picks the fastest under the
machine's model; every rank reads the same model, so they run the same
program. Results compare with torch on the same global inputs."""

from __future__ import annotations

import re
import time

import pytest
import torch
from helpers import row_parallel_linear

from mdfuser import DataType, FusionDefinition, ParallelType, calibration
from mdfuser.multidevice import DeviceMesh, shard_tensor

# 4H splits evenly over 1, 2, 3, 4 and 8 ranks; sums of small integers
# stay exact in bf16.
H, T = 12, 24


@pytest.fixture
def machine_model(multidevice_test):
    """Sets this process's model of the test's device type (the CPU, or
    the GPUs) for one test, then puts back the one it had (every rank sets
    the same)."""
    kind = multidevice_test.device.type
    before = calibration.machine_model(kind)
    yield lambda **fields: calibration.set_machine_model(kind, {**MODEL, **fields})
    if before is not None:
        calibration.set_machine_model(kind, before)


MODEL = {
    "gemm_flops": 1e11,
    "gemm_half_outputs": 0.0,
    "memory_bytes": 1e10,
    "link_bytes": 1e9,
    "statement_seconds": 0.0,
    "move_seconds": 0.0,
}


def run(test, fd, dtype=torch.bfloat16):
    generator = torch.Generator().manual_seed(3)
    inp = torch.randint(-2, 3, (T, 4 * H), generator=generator).to(dtype)
    w = torch.randint(-2, 3, (H, 4 * H), generator=generator).to(dtype)
    inp_tv, w_tv = fd.fusion.inputs()
    (out,) = fd.execute([test.shard(inp, inp_tv), test.shard(w, w_tv)])
    expected = torch.nn.functional.linear(inp.double(), w.double()).to(dtype)
    assert torch.equal(out.cpu(), expected)


def chunks_in(host_ir: str) -> set[int]:
    return {int(n) for n in re.findall(r"istreamIdx\d+\{(\d+)\}", host_ir)}


def test_the_measured_model_chooses_a_count_that_divides_the_rows(
    multidevice_test, tmp_path, monkeypatch
):
    """One rank measures the model (cached in MDFUSER_CACHE_DIR), the
    others read it; the count divides the 24 rows."""
    monkeypatch.setenv("MDFUSER_CACHE_DIR", str(tmp_path))
    test = multidevice_test
    fd = row_parallel_linear(test.size, None, H)
    assert fd.fusion.chooses_stream_chunks
    assert "istreamIdx" in str(fd.fusion.inputs()[0]) and "{auto}" in str(fd.fusion.inputs()[0])
    run(test, fd)
    (count,) = chunks_in(fd.last_host_ir())
    assert T % count == 0 and 1 <= count <= 16
    model = calibration.machine_model(test.device.type)
    assert model is not None and all(model[k] >= 0 for k in calibration.FIELDS)


def test_ensure_finds_the_model_last_set(multidevice_test, machine_model):
    """execute asks for the model at every call: ensure_machine_model
    answers from what this process set last, the same as the runtime's."""
    device = multidevice_test.device
    machine_model(statement_seconds=1.0)
    first = calibration.ensure_machine_model(device)
    assert first["statement_seconds"] == 1.0
    machine_model(statement_seconds=2.0)
    second = calibration.ensure_machine_model(device)
    assert second["statement_seconds"] == 2.0
    assert calibration.machine_model(device.type)["statement_seconds"] == 2.0


def test_free_chunks_give_the_most_chunks(multidevice_test, machine_model):
    """With free statements and steps, more chunks hide more of the
    allreduce: 12 is the largest divisor of 24 up to 16. On one device the
    allreduce moves nothing, so there is nothing to hide and one chunk
    (the smaller count of a tie) wins."""
    machine_model(statement_seconds=0.0)
    d = multidevice_test.size
    fd = row_parallel_linear(d, None, H)
    run(multidevice_test, fd)
    assert chunks_in(fd.last_host_ir()) == ({12} if d > 1 else {1})


def test_costly_statements_give_one_chunk(multidevice_test, machine_model):
    machine_model(statement_seconds=1.0)
    fd = row_parallel_linear(multidevice_test.size, None, H)
    run(multidevice_test, fd)
    assert chunks_in(fd.last_host_ir()) == {1}


def test_costly_collective_steps_give_one_chunk(multidevice_test, machine_model):
    """Each chunk's allreduce takes 2 (d - 1) steps that wait for each
    other: steps of a second make one chunk fastest, where free ones give
    12 (above)."""
    d = multidevice_test.size
    if d == 1:
        pytest.skip("on one device the allreduce takes no step")
    machine_model(move_seconds=1.0)
    fd = row_parallel_linear(d, None, H)
    run(multidevice_test, fd)
    assert chunks_in(fd.last_host_ir()) == {1}


def test_an_explicit_factor_is_kept(multidevice_test, machine_model):
    machine_model(statement_seconds=1.0)
    fd = row_parallel_linear(multidevice_test.size, 3, H)
    assert not fd.fusion.chooses_stream_chunks
    run(multidevice_test, fd)
    assert chunks_in(fd.last_host_ir()) == {3}


def test_a_count_left_to_mdfuser_on_an_axis_off_streams_is_a_value_error(
    multidevice_test, machine_model
):
    machine_model()
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, 4], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.neg(x))
        x.outer_split(0)
    with pytest.raises(
        ValueError,
        match=r"outer_split without a factor lets mdfuser choose the number of stream "
        r"chunks, but its outer part iS\d+\{auto\} .* is not parallelized; parallelize it "
        r"on ParallelType.stream, or give the split a factor",
    ):
        fd.execute([torch.ones(6, 4)])
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, 4], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.neg(x))
        x.outer_split(0)
        x.axis(0).parallelize(ParallelType.stream)
    (out,) = fd.execute([torch.arange(24.0).view(6, 4)])
    assert torch.equal(out, -torch.arange(24.0).view(6, 4))


def test_a_count_that_would_lay_out_the_shards_is_a_value_error(multidevice_test, machine_model):
    """Tokens in chunks, each chunk across the devices: which rows a shard
    holds would depend on the count, which the user cannot know."""
    test = multidevice_test
    machine_model()
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, 4], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.neg(x))
        x.set_device_mesh(DeviceMesh(torch.arange(test.size)))
        x.outer_split(0)
        x.axis(0).parallelize(ParallelType.stream)
        x.outer_split(1, test.size)
        x.axis(1).parallelize(ParallelType.mesh_x)
    message = r"stream chunks above its split across devices \(mesh_x\)"
    with pytest.raises(ValueError, match=message):
        shard_tensor(torch.ones(4 * test.size, 4), x)
    with pytest.raises(ValueError, match=message):
        fd.execute([torch.ones(4, 4)])


def test_a_model_published_just_before_its_rank_fails_is_read(multidevice_test):
    """The rank that measures the model publishes it and then fails (as a
    user error after the measurement makes it do): the ranks already
    waiting read what it published instead of stopping on its failure."""
    test = multidevice_test
    test.require(2)
    key = "test/published_then_failed"
    if test.rank == 0:
        assert test.comm._claim_once(key)
        time.sleep(0.5)  # the others are waiting by now
        test.comm._publish(key, "the model")
        test.comm.report_failure("rank 0 failed after publishing")
        return
    assert test.comm._await_published(key, "reading the test's value") == "the model"
