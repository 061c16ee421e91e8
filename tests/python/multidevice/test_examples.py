# SPDX-License-Identifier: MIT
"""The examples run as their documentation says, on every process of the
job."""

from __future__ import annotations

import transformer_blocks


def test_transformer_blocks_example(multidevice_test, capsys):
    transformer_blocks.main()
    printed = capsys.readouterr().out
    if multidevice_test.rank == 0:
        d = multidevice_test.size
        assert f"MLP TP on {d} devices" in printed
        assert f"MLP SP on {d} devices" in printed
