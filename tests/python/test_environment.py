# SPDX-License-Identifier: MIT
"""What the environment controls: dumps, and a world whose peers never come.

Each test runs a fresh interpreter, because both are read once per process.
"""

from __future__ import annotations

import os
import time

import pytest
from helpers import free_port, run_python

TESTS_DIR = os.path.dirname(__file__)

# Runs the row-parallel linear on the world the environment describes.
RUN_ROW_PARALLEL = f"""
import sys, torch
sys.path.insert(0, {TESTS_DIR!r})
from helpers import row_parallel_linear
from mdfuser.multidevice import Communicator, shard_tensor
d = Communicator.instance().size()
fd = row_parallel_linear(d, 2, 8)
inp_tv, w_tv = fd.fusion.inputs()
inp = torch.ones(4, 32, dtype=torch.bfloat16)
w = torch.ones(8, 32, dtype=torch.bfloat16)
fd.execute([shard_tensor(inp, inp_tv), shard_tensor(w, w_tv)])
print("done")
"""


@pytest.mark.parametrize("variable", ["NVFUSER_DUMP", "MDFUSER_DUMP"])
def test_host_ir_dump(variable):
    result = run_python(RUN_ROW_PARALLEL, {variable: "host_ir"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("%HostIrContainer {") == 1
    assert "Communication 0 (type=Allreduce, team=(0)" in result.stdout


def test_fusion_and_pass_dumps():
    result = run_python(RUN_ROW_PARALLEL, {"NVFUSER_DUMP": "fusion_ir,host_ir_passes"})
    assert result.returncode == 0, result.stderr
    assert "%Fusion {" in result.stdout
    assert "After AllocateAndDeallocate:" in result.stdout
    assert "After AssignStreams:" in result.stdout


def test_unknown_dump_name_lists_the_valid_ones():
    result = run_python(RUN_ROW_PARALLEL, {"NVFUSER_DUMP": "host_ir,kernel"})
    assert result.returncode != 0
    assert (
        "ValueError: unknown dump option 'kernel' in NVFUSER_DUMP/MDFUSER_DUMP; valid options "
        "are: fusion_ir, fusion_ir_passes, host_ir, host_ir_passes"
    ) in result.stderr


def test_rank_that_never_arrives_is_reported_within_the_timeout():
    port = free_port()
    start = time.monotonic()
    result = run_python(
        RUN_ROW_PARALLEL,
        {
            "WORLD_SIZE": "2",
            "RANK": "0",
            "LOCAL_RANK": "0",
            "MDFUSER_PORT": str(port),
            "MDFUSER_TIMEOUT_S": "3",
        },
    )
    assert time.monotonic() - start < 60
    assert result.returncode != 0
    assert (
        f"TimeoutError: only 1 of 2 ranks joined the rendezvous at localhost:{port} "
        "within 3 s (this is rank 0)"
    ) in result.stderr


def test_rank_zero_that_never_arrives_is_reported_within_the_timeout():
    port = free_port()
    result = run_python(
        RUN_ROW_PARALLEL,
        {
            "WORLD_SIZE": "2",
            "RANK": "1",
            "LOCAL_RANK": "1",
            "MDFUSER_PORT": str(port),
            "MDFUSER_TIMEOUT_S": "3",
        },
    )
    assert result.returncode != 0
    assert (
        f"TimeoutError: rank 1 of a world of 2 could not reach the rendezvous store at "
        f"localhost:{port} within 3 s"
    ) in result.stderr
