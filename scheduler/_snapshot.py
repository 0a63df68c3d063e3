"""The cycle's view of the cluster: the cache's node tables plus an undo log.

A scheduling cycle is synchronous (no ``await``), so the cache cannot change under it and the
snapshot can work on the cache's arrays in place: :meth:`Snapshot.assume` adds a pod's
request to a node row and logs it, :meth:`Snapshot.revert` unwinds to a :meth:`mark`. The
same log restores candidate *victims* removed with :meth:`remove` (preemption) and restricts
evaluation to a placement's node subset. Per-signature filter results that depend only on
node objects are cached across cycles until a node changes (``NodeTable.epoch``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from scheduler._resources import PodRequirements

if TYPE_CHECKING:
    from scheduler._cache import Cache, NodeTable, PodInfo
    from scheduler._framework import Framework

__all__ = ["Snapshot", "StaticFilterCache"]

Mask = npt.NDArray[np.bool_]


class StaticFilterCache:
    """Node-only filter verdicts per signature, valid for one node epoch."""

    def __init__(self) -> None:
        self._epoch = -1
        self._masks: dict[PodRequirements, Mask] = {}

    def mask(self, fw: Framework, req: PodRequirements, table: NodeTable) -> Mask:
        """A boolean per row: present and passing every node-only filter."""
        if table.epoch != self._epoch:
            self._masks.clear()
            self._epoch = table.epoch
        m = self._masks.get(req)
        if m is None:
            m = table.present.copy()
            vec = table.vector(req.requests)
            for f in fw.static_filters:
                rows = np.flatnonzero(m)
                if rows.size == 0:
                    break
                ok = f.filter(req, vec, table, rows)
                m[rows[~ok]] = False
            if table.epoch != self._epoch:  # a new resource column appeared
                self._masks.clear()
                self._epoch = table.epoch
            self._masks[req] = m
        return m


class Snapshot:
    """Assume/revert on the cache's node usage for one cycle."""

    def __init__(self, cache: Cache, static: StaticFilterCache) -> None:
        self.cache = cache
        self.table = cache.nodes
        self.static = static
        self._log: list[tuple[int, npt.NDArray[np.int64], PodInfo | None, int]] = []

    def mark(self) -> int:
        """A point to :meth:`revert` to."""
        return len(self._log)

    def assume(self, pod: PodInfo, row: int, vec: npt.NDArray[np.int64]) -> None:
        """Reserve ``vec`` on node ``row`` for ``pod`` (tentatively)."""
        self.table.used[row] += vec
        self._log.append((row, vec, pod, +1))

    def remove(self, pod: PodInfo) -> bool:
        """Tentatively remove a running pod (a preemption victim); False if not counted."""
        row = pod.counted_node
        if row is None:
            return False
        vec = self.table.vector(pod.req.requests)
        self.table.used[row] -= vec
        self._log.append((row, vec, pod, -1))
        return True

    def revert(self, mark: int = 0) -> None:
        """Undo everything after ``mark`` (newest first)."""
        while len(self._log) > mark:
            row, vec, _, sign = self._log.pop()
            if sign > 0:
                self.table.used[row] -= vec
            else:
                self.table.used[row] += vec

    def assumed_since(self, mark: int) -> list[tuple[PodInfo, int]]:
        """``(pod, row)`` of the pods assumed after ``mark``."""
        return [(p, row) for row, _, p, sign in self._log[mark:] if sign > 0 and p is not None]

    def node_name(self, row: int) -> str:
        """Name of the node in ``row``."""
        name = self.table.names[row]
        assert name is not None
        return name
