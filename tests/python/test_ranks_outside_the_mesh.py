# SPDX-License-Identifier: MIT
"""Ranks outside a fusion's mesh, in jobs of fresh processes: they take no
part and get empty outputs while the ranks of the mesh compute, also when
this is the first thing each process does; a mesh that names a rank the
world does not have is a ValueError on every rank, at once."""

from __future__ import annotations

import time

from helpers import ALLGATHER_FUSION, run_world

# Every rank runs an allgather of a [2 * len(mesh), 4] tensor on `mesh`
# and prints its output, or its error.
ALLGATHER = (
    """
import sys
mesh = {mesh}
"""
    + ALLGATHER_FUSION
    + """
full = torch.arange(8.0 * len(mesh)).reshape(-1, 4)
try:
    (out,) = fd.execute([shard_tensor(full, x)])
except ValueError as e:
    print("ValueError:", e)
    sys.exit(0)
print("empty" if out.numel() == 0 else "full" if torch.equal(out, full) else f"wrong {{out}}")
"""
)


def test_ranks_outside_a_mesh_get_empty_outputs_from_the_start():
    # Rank 0 serves the rendezvous store but is outside the mesh.
    results = run_world(ALLGATHER.format(mesh=[1, 2]), 3)
    for result in results:
        assert result.returncode == 0, result.stderr
    assert [r.stdout.strip() for r in results] == ["empty", "full", "full"]


def test_a_mesh_naming_a_rank_the_world_lacks_fails_on_every_rank_at_once():
    start = time.monotonic()
    results = run_world(ALLGATHER.format(mesh=[0, 2]), 2, {"MDFUSER_TIMEOUT_S": "30"})
    # Well within the timeout: no rank waits for a peer.
    assert time.monotonic() - start < 25
    for result in results:
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == (
            "ValueError: DeviceMesh{0 2} names device 2, but the world has only 2 processes "
            "(ranks 0 to 1); launch at least 3 processes or use a smaller mesh"
        )
