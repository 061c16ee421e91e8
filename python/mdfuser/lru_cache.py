# SPDX-License-Identifier: MIT
"""LRUCache: executor caches shared among equal fusions, as nvfuser_direct's."""

from __future__ import annotations

from collections import OrderedDict

from mdfuser import _C
from mdfuser.executor_cache import FusionExecutorCache


class LRUCache:
    """At most ``max_fusions`` executor caches, one per distinct fusion.

    ``cache_compile(fusion)`` returns the FusionExecutorCache of a fusion
    equal to ``fusion`` (the same operations, shapes, dtypes and schedule:
    the same printed definition) if the cache holds one, and makes it the
    most recently used; otherwise it makes one, evicting the least recently
    used when full. Compilation itself happens at the first ``execute`` of
    each input signature, as for ``fd.execute``. Used as nvfuser_direct's
    tests use it::

        cache = LRUCache(max_fusions=16)
        with FusionDefinition() as fd:
            ...
        fd.fec = cache.cache_compile(fd.fusion)
        outputs = fd.execute(inputs)
    """

    def __init__(self, max_fusions: int) -> None:
        if isinstance(max_fusions, bool) or not isinstance(max_fusions, int):
            raise TypeError(f"LRUCache: max_fusions must be an int, got {max_fusions!r}")
        if max_fusions <= 0:
            raise ValueError(f"LRUCache: max_fusions must be positive, got {max_fusions}")
        self._max_fusions = max_fusions
        # Printed definition -> [executor cache, hits], most recent last.
        self._items: OrderedDict[str, list] = OrderedDict()
        self._lookups = 0
        self._hits = 0
        self._compiled = 0

    def cache_compile(self, fusion: _C.Fusion) -> FusionExecutorCache:
        """The executor cache of `fusion` (see the class)."""
        if not isinstance(fusion, _C.Fusion):
            raise TypeError(
                f"cache_compile: expected an mdfuser Fusion (fd.fusion), got "
                f"{type(fusion).__name__}"
            )
        key = str(fusion)
        self._lookups += 1
        item = self._items.get(key)
        if item is not None:
            self._hits += 1
            item[1] += 1
            self._items.move_to_end(key)
            return item[0]
        if len(self._items) == self._max_fusions:
            self._items.popitem(last=False)
        cache = FusionExecutorCache(fusion)
        self._items[key] = [cache, 0]
        self._compiled += 1
        return cache

    def num_fusions(self) -> int:
        """How many fusions the cache holds."""
        return len(self._items)

    def stats(self) -> str:
        """The capacity, the fusions held with their hits (most recently
        used first), lookups, hits and hit rate."""
        lines = [f"Max Fusions Allowed: {self._max_fusions}"]
        if not self._items:
            lines.append("The fusion cache is empty.")
            return "\n".join(lines) + "\n"
        lines.append(f"Total Fusions in Cache: {len(self._items)}")
        lines.append(f"Total Unique Fusions Compiled: {self._compiled}")
        lines.append("Cache Hits by LRU ordering:")
        for i, (_, hits) in enumerate(reversed(self._items.values())):
            lines.append(f"\t{i} -> {hits} hits")
        rate = 100.0 * self._hits / self._lookups
        lines.append(f"Cache Lookups: {self._lookups}")
        lines.append(f"Cache Hits: {self._hits}")
        lines.append(f"Hit Rate: {rate}%")
        return "\n".join(lines) + "\n"
