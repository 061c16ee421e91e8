# SPDX-License-Identifier: MIT
import os
import sys

import pytest

# Lets tests import the shared helpers as `helpers`, and the examples (the
# transformer blocks) by their module names.
sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))


def pytest_addoption(parser):
    # nvFuser's multidevice tests run under mpirun with pytest-mpi's
    # --only-mpi; accepted here where that plugin is not installed.
    try:
        parser.addoption(
            "--only-mpi",
            action="store_true",
            default=False,
            help="run only the tests marked mpi (as pytest-mpi's option)",
        )
    except ValueError:
        pass  # pytest-mpi's own


def pytest_configure(config):
    config.addinivalue_line("markers", "mpi: a test every process of an mpirun job runs")


def pytest_collection_modifyitems(config, items):
    if config.pluginmanager.hasplugin("pytest_mpi") or not config.getoption("--only-mpi"):
        return
    skip = pytest.mark.skip(reason="--only-mpi runs the tests marked mpi only")
    for item in items:
        if "mpi" not in item.keywords:
            item.add_marker(skip)
