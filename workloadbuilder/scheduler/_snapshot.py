"""The cycle's view of the cluster: the cache's node tables plus an undo log.

A scheduling cycle is synchronous (no ``await``), so the cache cannot change under it and the
snapshot can work on the cache's arrays in place: :meth:`Snapshot.assume` adds a pod's
request to a node row and logs it, :meth:`Snapshot.revert` unwinds to a :meth:`mark`. The
same log restores candidate *victims* removed with :meth:`remove` (preemption) and restricts
evaluation to a placement's node subset. The snapshot is what plugins see: it implements the
framework's :class:`~._interface.SharedLister` protocol (structurally; this module
imports nothing of the framework).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from workloadbuilder.scheduler._cache import Cache, GroupInfo, NodeTable, PodInfo, PodKey

__all__ = ["Snapshot"]

_NONE: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)


class Snapshot:
    """Assume/revert on the cache's node usage for one cycle."""

    def __init__(self, cache: Cache) -> None:
        self.cache = cache
        self._table = cache.nodes
        self._log: list[tuple[int, npt.NDArray[np.int64], PodInfo | None, int]] = []
        #: log position -> (payload, undo) of plugin reservations (DRA allocations)
        self._records: dict[int, tuple[Any, Callable[[], None]]] = {}
        #: running pods tentatively removed (preemption victims) and a counter of changes
        self.removed: dict[PodKey, PodInfo] = {}
        self.removed_version = 0
        #: the pods this cycle assumed that the cache does not count yet, with their rows, in
        #: order (the pods placed earlier in a gang cycle: the pod-constraint plugins count
        #: them as existing pods)
        self.placed: list[tuple[PodInfo, int]] = []
        #: how many times each key is in ``placed``
        self._placed_keys: dict[PodKey, int] = {}

    # ---- SharedLister ----------------------------------------------------------------

    @property
    def table(self) -> NodeTable:
        """The node rows (usage includes what this cycle assumed)."""
        return self._table

    def node_name(self, row: int) -> str:
        """Name of the node in ``row``."""
        name = self._table.names[row]
        assert name is not None
        return name

    def get_pod(self, key: PodKey) -> PodInfo | None:
        """A pod by ``(namespace, name)``."""
        return self.cache.pods.get(key)

    def group_members(self, group: GroupInfo) -> Iterator[PodInfo]:
        """The group's known non-terminal pods."""
        return self.cache.members(group)

    def quorum_pods(self, group: GroupInfo) -> int:
        """The group's pods that count for its quorum."""
        return self.cache.quorum_pods(group)

    # ---- the undo log ----------------------------------------------------------------

    def mark(self) -> int:
        """A point to :meth:`revert` to."""
        return len(self._log)

    def assume(self, pod: PodInfo, row: int, vec: npt.NDArray[np.int64]) -> None:
        """Reserve ``vec`` on node ``row`` for ``pod`` (tentatively). A removed pod put back
        (a reprieved victim) is no longer removed."""
        self._table.used[row] += vec
        if self.removed and self.removed.get(pod.key) is pod:
            del self.removed[pod.key]
            self.removed_version += 1
            self._log.append((row, vec, pod, +2))
            return
        self._log.append((row, vec, pod, +1))
        if pod.counted_node is None:
            self.placed.append((pod, row))
            key = pod.key
            self._placed_keys[key] = self._placed_keys.get(key, 0) + 1

    def remove(self, pod: PodInfo) -> bool:
        """Tentatively remove a running pod (a preemption victim); False if not counted."""
        row = pod.counted_node
        if row is None:
            return False
        vec = self._table.vector(pod.req.requests)
        self._table.used[row] -= vec
        self._log.append((row, vec, pod, -1))
        self.removed[pod.key] = pod
        self.removed_version += 1
        return True

    def record(self, payload: Any, undo: Callable[[], None]) -> None:
        """Log a plugin's tentative reservation (``undo`` runs on :meth:`revert`)."""
        self._records[len(self._log)] = (payload, undo)
        self._log.append((-1, _NONE, None, 0))

    def records_since(self, mark: int) -> list[Any]:
        r"""The payloads :meth:`record`\ ed after ``mark``, oldest first."""
        return [self._records[i][0] for i in range(mark, len(self._log)) if i in self._records]

    def revert(self, mark: int = 0) -> None:
        """Undo everything after ``mark`` (newest first)."""
        while len(self._log) > mark:
            row, vec, pod, sign = self._log.pop()
            if sign == 0:
                _, undo = self._records.pop(len(self._log))
                undo()
            elif sign > 0:
                self._table.used[row] -= vec
                if sign == 1 and self.placed and self.placed[-1][0] is pod:
                    self.placed.pop()
                    key = pod.key
                    left = self._placed_keys[key] - 1
                    if left:
                        self._placed_keys[key] = left
                    else:
                        del self._placed_keys[key]
                if sign == 2 and pod is not None:  # the reprieved victim is removed again
                    self.removed[pod.key] = pod
                    self.removed_version += 1
            else:
                self._table.used[row] += vec
                if pod is not None and self.removed.pop(pod.key, None) is not None:
                    self.removed_version += 1

    def is_placed(self, key: PodKey) -> bool:
        """Whether a pod of ``key`` is in :attr:`placed`."""
        return key in self._placed_keys

    def assumed_since(self, mark: int) -> list[tuple[PodInfo, int]]:
        """``(pod, row)`` of the pods assumed after ``mark``."""
        return [(p, row) for row, _, p, sign in self._log[mark:] if sign > 0 and p is not None]
