# SPDX-License-Identifier: MIT
"""How an output of a compiled fusion is laid out across devices
(``fd.get_output_shardings()``); mdfuser.multidevice exports it."""

from __future__ import annotations

from mdfuser._C import TensorView


class Sharding:
    """How one output of a compiled fusion is laid out: its mesh and, per
    device parallel type, the tensor axis sharded on it."""

    def __init__(self, tv: TensorView) -> None:
        self.mesh = tv.device_mesh
        # Every parallel type that shards an axis, also where several shard
        # one axis (on an N-D mesh).
        self._axes = {pt: axis for pt, axis, _, _ in tv._device_axes()}

    def axis_sharded_on(self, parallel_type) -> int:
        """The axis sharded on `parallel_type`, or -1 when none is."""
        return self._axes.get(parallel_type, -1)

    def __repr__(self) -> str:
        return f"Sharding(mesh={self.mesh!r}, axes={self._axes})"
