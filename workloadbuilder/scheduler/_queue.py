"""The scheduling queue: entities are single pods, root PodGroups and root
CompositePodGroups (a whole tree).

Sub-queues as upstream: *gated* (PreEnqueue rejected), *active* (a heap ordered by priority,
then first-seen), *backoff* (exponential, ``initial * 2^(attempts-1)`` capped at ``max``) and
the *unschedulable* pool, left on relevant cluster events (moved to backoff or active) or
flushed after ``max_in_unschedulable`` seconds. Which events are relevant is not decided
here: :meth:`SchedulingQueue.on_event` asks the enabled plugins (their registered events and
queueing hints, through ``hints_for``). An event seen while an entity is in flight
sends it to backoff instead of the unschedulable pool (upstream's move-request cycle).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal

import attrs

if TYPE_CHECKING:
    from workloadbuilder.scheduler._interface import ClusterEvent, QueueingHint

__all__ = ["EntityKey", "QueuedEntity", "SchedulingQueue"]

EntityKind = Literal["Pod", "PodGroup", "CompositePodGroup"]
EntityKey = tuple[EntityKind, str, str]
State = Literal["gated", "active", "backoff", "unschedulable", "inflight"]


@attrs.define(slots=True, eq=False)
class QueuedEntity:
    """One queue entry."""

    key: EntityKey
    priority: int
    first_seen: float
    seq: int
    state: State = "gated"
    attempts: int = 0
    last_attempt: float = 0.0
    unschedulable_since: float = 0.0
    gate_message: str = ""
    moved_while_inflight: bool = False
    removed: bool = False
    version: int = 0

    @property
    def kind(self) -> EntityKind:
        """``Pod``, ``PodGroup`` or ``CompositePodGroup`` (the root of a tree)."""
        return self.key[0]


class SchedulingQueue:
    """Gated / active / backoff / unschedulable, driven by a clock."""

    def __init__(
        self,
        now: Callable[[], float],
        *,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        max_in_unschedulable: float = 300.0,
        hints_for: Callable[[ClusterEvent], Sequence[QueueingHint | None]] | None = None,
    ) -> None:
        self._now = now
        #: event -> the hints of every plugin registration matching it (None: no hint,
        #: always relevant); an empty answer means no enabled plugin cares
        self.hints_for: Callable[[ClusterEvent], Sequence[QueueingHint | None]] = hints_for or (
            lambda event: (None,)
        )
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_in_unschedulable = max_in_unschedulable
        self.entities: dict[EntityKey, QueuedEntity] = {}
        self._active: list[tuple[int, float, int, int, EntityKey]] = []
        self._backoff: list[tuple[float, int, int, EntityKey]] = []
        #: (unschedulable since, seq, version, key): the periodic flush without a scan of
        #: every entity (stale entries are skipped when they come up)
        self._unschedulable: list[tuple[float, int, int, EntityKey]] = []
        #: called whenever something becomes active or enters backoff (wakes the run loop)
        self.on_active: Callable[[], None] = lambda: None

    # ---- bookkeeping -----------------------------------------------------------------

    def backoff_duration(self, attempts: int) -> float:
        """Upstream ``calculateBackoffDuration``."""
        d = self.initial_backoff
        for _ in range(1, max(attempts, 1)):
            d *= 2
            if d >= self.max_backoff:
                return self.max_backoff
        return min(d, self.max_backoff)

    def backoff_expiry(self, e: QueuedEntity) -> float:
        """When the entity's backoff ends (0 before the first attempt)."""
        if e.attempts == 0:
            return 0.0
        return e.last_attempt + self.backoff_duration(e.attempts)

    def _to_active(self, e: QueuedEntity) -> None:
        e.state = "active"
        e.version += 1
        heapq.heappush(self._active, (-e.priority, e.first_seen, e.seq, e.version, e.key))
        self.on_active()

    def _to_backoff(self, e: QueuedEntity) -> None:
        expiry = self.backoff_expiry(e)
        if expiry <= self._now():
            self._to_active(e)
            return
        e.state = "backoff"
        e.version += 1
        heapq.heappush(self._backoff, (expiry, e.seq, e.version, e.key))
        self.on_active()  # the next wakeup may be earlier now

    def _to_unschedulable(self, e: QueuedEntity) -> None:
        e.state = "unschedulable"
        e.version += 1
        e.unschedulable_since = self._now()
        heapq.heappush(self._unschedulable, (e.unschedulable_since, e.seq, e.version, e.key))

    # ---- API used by the scheduler ---------------------------------------------------

    def upsert(
        self,
        key: EntityKey,
        *,
        priority: int,
        first_seen: float,
        seq: int,
        gate: str | None,
    ) -> QueuedEntity:
        """Add an entity or update it; ``gate`` is the PreEnqueue rejection (None = pass)."""
        e = self.entities.get(key)
        if e is None:
            e = QueuedEntity(key=key, priority=priority, first_seen=first_seen, seq=seq)
            self.entities[key] = e
        e.removed = False
        if e.priority != priority and e.state == "active":
            e.priority = priority
            self._to_active(e)
        e.priority = priority
        if e.state == "inflight":
            e.gate_message = gate or ""
            return e
        if gate is not None:
            e.gate_message = gate
            if e.state != "gated":
                e.state = "gated"
                e.version += 1
            return e
        e.gate_message = ""
        if e.state == "gated":
            self._to_backoff(e)
        return e

    def remove(self, key: EntityKey) -> None:
        """Drop an entity (nothing left to schedule)."""
        e = self.entities.get(key)
        if e is None:
            return
        if e.state == "inflight":
            e.removed = True
            return
        del self.entities[key]
        e.version += 1
        self._compact()

    def _compact(self) -> None:
        """Rebuild the heaps without their stale entries once those outnumber the live
        entities: an entry goes stale when its entity moves on or is removed, and without
        this the unschedulable pool's entries of deleted groups stayed until the
        ``max_in_unschedulable`` flush reached them (and ``_active`` / ``_backoff`` until
        popped), so the heaps grew with the churn rate. Amortised O(1) per removal."""
        limit = 2 * len(self.entities) + 64
        ents = self.entities

        def live(version: int, key: EntityKey, state: str) -> bool:
            e = ents.get(key)
            return e is not None and e.version == version and e.state == state

        if len(self._unschedulable) > limit:
            self._unschedulable = [
                t for t in self._unschedulable if live(t[2], t[3], "unschedulable")
            ]
            heapq.heapify(self._unschedulable)
        if len(self._backoff) > limit:
            self._backoff = [t for t in self._backoff if live(t[2], t[3], "backoff")]
            heapq.heapify(self._backoff)
        if len(self._active) > limit:
            self._active = [t for t in self._active if live(t[3], t[4], "active")]
            heapq.heapify(self._active)

    def move(self, key: EntityKey) -> bool:
        """A relevant event for one entity: leave the unschedulable pool."""
        e = self.entities.get(key)
        if e is None:
            return False
        if e.state == "unschedulable":
            self._to_backoff(e)
            return True
        if e.state == "inflight":
            e.moved_while_inflight = True
        return False

    def on_event(
        self,
        event: ClusterEvent,
        old: Any = None,
        new: Any = None,
        *,
        target: EntityKey | None = None,
    ) -> int:
        """A cluster event: every waiting entity (only ``target`` when the event concerns one
        entity) that an enabled plugin says may now be schedulable leaves the unschedulable
        pool (or, in flight, will go to backoff). Returns how many moved."""
        hints = self.hints_for(event)
        if not hints:
            return 0
        always = any(h is None for h in hints)
        keys = [target] if target is not None else list(self.entities)
        n = 0
        for key in keys:
            e = self.entities.get(key)
            if e is None or e.state not in ("unschedulable", "inflight"):
                continue
            if not always and not any(h is not None and h(key, old, new) for h in hints):
                continue
            if self.move(key):
                n += 1
        return n

    def move_all(self) -> int:
        """A cluster-wide relevant event (node added/changed, resources freed)."""
        n = 0
        for e in list(self.entities.values()):
            if self.move(e.key):
                n += 1
        return n

    def flush(self) -> None:
        """Expired backoffs become active; entities unschedulable for too long are moved."""
        now = self._now()
        while self._backoff and self._backoff[0][0] <= now:
            _, _, version, key = heapq.heappop(self._backoff)
            e = self.entities.get(key)
            if e is not None and e.version == version and e.state == "backoff":
                self._to_active(e)
        heap = self._unschedulable
        while heap and now - heap[0][0] >= self.max_in_unschedulable:
            _, _, version, key = heapq.heappop(heap)
            e = self.entities.get(key)
            if e is not None and e.version == version and e.state == "unschedulable":
                self._to_backoff(e)

    def _live_top(
        self, heap: list[tuple[float, int, int, EntityKey]], state: str
    ) -> tuple[float, int, int, EntityKey] | None:
        """The first entry of ``heap`` that is still current (stale ones are dropped)."""
        while heap:
            top = heap[0]
            e = self.entities.get(top[3])
            if e is not None and e.version == top[2] and e.state == state:
                return top
            heapq.heappop(heap)
        return None

    def pop(self) -> QueuedEntity | None:
        """The next active entity (marked in flight), or None."""
        self.flush()
        while self._active:
            _, _, _, version, key = heapq.heappop(self._active)
            e = self.entities.get(key)
            if e is None or e.version != version or e.state != "active":
                continue
            e.state = "inflight"
            e.attempts += 1
            e.last_attempt = self._now()
            e.moved_while_inflight = False
            return e
        return None

    def done(self, e: QueuedEntity, outcome: Literal["success", "unschedulable", "error"]) -> None:
        """Finish an attempt. ``success`` with nothing left removes the entity (the scheduler
        calls :meth:`remove`); a success that left pods behind waits as unschedulable."""
        if e.removed:
            self.entities.pop(e.key, None)
            e.version += 1
            self._compact()
            return
        if e.state != "inflight":
            return
        if outcome == "success":
            e.attempts = 0
            self._to_unschedulable(e)
            if e.moved_while_inflight:
                self._to_backoff(e)
        elif outcome == "error" or e.moved_while_inflight:
            self._to_backoff(e)
        else:
            self._to_unschedulable(e)
        if e.gate_message:
            e.state = "gated"
            e.version += 1

    def requeue_after_failure(self, key: EntityKey) -> None:
        """Back to backoff after a failed binding (the group's remaining need is retried)."""
        e = self.entities.get(key)
        if e is None:
            return
        if e.state == "inflight":
            e.moved_while_inflight = True
            return
        e.attempts += 1
        e.last_attempt = self._now()
        self._to_backoff(e)

    # ---- inspection ------------------------------------------------------------------

    def next_wakeup(self) -> float | None:
        """When the next backoff expires or an unschedulable entity is due for the flush."""
        times: list[float] = []
        if (b := self._live_top(self._backoff, "backoff")) is not None:
            times.append(b[0])
        if (u := self._live_top(self._unschedulable, "unschedulable")) is not None:
            times.append(u[0] + self.max_in_unschedulable)
        return min(times) if times else None

    def has_active(self) -> bool:
        """Whether :meth:`pop` would return something now."""
        self.flush()
        return any(
            (e := self.entities.get(k)) is not None and e.version == v and e.state == "active"
            for _, _, _, v, k in self._active
        )

    def counts(self) -> dict[str, dict[str, int]]:
        """``{kind: {state: n}}`` for metrics."""
        out: dict[str, dict[str, int]] = {"Pod": {}, "PodGroup": {}, "CompositePodGroup": {}}
        for e in self.entities.values():
            d = out[e.kind]
            d[e.state] = d.get(e.state, 0) + 1
        return out

    def __iter__(self) -> Iterator[QueuedEntity]:
        return iter(list(self.entities.values()))
