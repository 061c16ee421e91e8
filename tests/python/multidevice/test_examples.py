# SPDX-License-Identifier: MIT
"""The examples run as their documentation says, on every process of the
job."""

from __future__ import annotations

import dtensor_mlp
import ring_decomposition
import transformer_blocks


def test_transformer_blocks_example(multidevice_test, capsys):
    transformer_blocks.main()
    printed = capsys.readouterr().out
    if multidevice_test.rank == 0:
        d = multidevice_test.size
        assert f"MLP TP on {d} devices" in printed
        assert f"MLP SP on {d} devices" in printed


def test_dtensor_mlp_example(dtensor_test, capsys):
    dtensor_mlp.main()
    printed = capsys.readouterr().out
    if dtensor_test.test.rank == 0:
        assert f"MLP from DTensors on {dtensor_test.test.size} devices" in printed
        assert "output (Replicate(),), matches torch" in printed


def test_ring_decomposition_example(multidevice_test, capsys):
    ring_decomposition.main()
    printed = capsys.readouterr().out
    if multidevice_test.rank == 0:
        d = multidevice_test.size
        for pair in ("allgather + linear", "linear + reduce-scatter"):
            for way in ("collectives", "rings"):
                assert f"{pair} with {way} on {d} devices" in printed
