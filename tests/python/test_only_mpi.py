# SPDX-License-Identifier: MIT
"""--only-mpi, the option nvFuser's multidevice tests are run with
(pytest-mpi's): accepted, it skips the tests not marked mpi."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pytest_child(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_only_mpi_skips_the_tests_not_marked_mpi():
    result = pytest_child("tests/python/test_scalar_operations.py", "--only-mpi")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "--only-mpi runs the tests marked mpi only" in result.stdout
    assert " passed" not in result.stdout, result.stdout


def test_the_benchmarks_are_marked_mpi():
    result = pytest_child(
        "tests/python/multidevice/test_overlap_benchmarks.py",
        "-m",
        "mpi",
        "-k",
        "benchmark",
        "--collect-only",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "6 tests collected" in result.stdout, result.stdout
