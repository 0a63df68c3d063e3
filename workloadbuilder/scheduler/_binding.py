"""Binding: assume a placed batch in the cache, then bind it asynchronously through the
framework's Bind plugins; a failure forgets the assumption and requeues the entity.

Batches are bound **one burst at a time, in the order they were placed**: a free bind slot
(at most ``concurrency`` binds in flight) goes to the oldest batch that still has a pod to
send, and only when no open batch has one is the next batch opened (while canaries are in
flight, only if the free slots exceed their batches' rest). So at any moment only the
batches whose bursts overlap (about ``concurrency / batch size + 1``) are partially bound,
instead of every placed gang waiting behind one pod of every other."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Iterable

from workloadbuilder.cluster import Cluster
from workloadbuilder.scheduler._cache import Cache, GroupInfo, PodInfo
from workloadbuilder.scheduler._enqueue import Enqueuer
from workloadbuilder.scheduler._framework import Framework
from workloadbuilder.scheduler._metrics import BIND_RESULTS, SCHEDULED_PODS
from workloadbuilder.scheduler._queue import EntityKey, SchedulingQueue
from workloadbuilder.scheduler._status import REASON_SCHEDULED, REASON_SCHEDULER_ERROR, StatusWriter
from workloadbuilder.scheduler._tasks import Tasks

__all__ = ["Binder"]

_log = logging.getLogger(__name__)

#: the labelled children, looked up once (``labels()`` takes a lock and builds a key per call)
_BIND_OK = BIND_RESULTS.labels(result="ok")
_BIND_ERROR = BIND_RESULTS.labels(result="error")


class _Batch:
    """One placed batch on its way to the API server."""

    __slots__ = ("canary", "done", "ekey", "failed", "framework", "group", "next", "pairs")

    def __init__(
        self,
        ekey: EntityKey,
        pairs: list[tuple[PodInfo, str]],
        group: GroupInfo | None,
        canary: bool,
        framework: Framework,
    ) -> None:
        self.ekey = ekey
        self.pairs = pairs
        self.group = group
        #: the profile whose Bind (and Unreserve) plugins bind the batch
        self.framework = framework
        #: the first pod is bound alone first; the rest wait for its outcome
        self.canary = canary and len(pairs) > 1
        #: index of the next pod to send
        self.next = 0
        #: pods whose bind returned, and how many of them failed
        self.done = 0
        self.failed = 0

    def sendable(self) -> bool:
        """Whether a pod of this batch can be sent now."""
        if self.next >= len(self.pairs):
            return False
        return not (self.canary and self.next > 0)  # the canary has not returned yet


class Binder:
    """Assume and bind placed pods, one batch's burst at a time."""

    def __init__(
        self,
        cluster: Cluster,
        cache: Cache,
        queue: SchedulingQueue,
        framework: Framework,
        enqueuer: Enqueuer,
        status: StatusWriter,
        tasks: Tasks,
        *,
        concurrency: int,
        on_bound: Callable[[], None],
    ) -> None:
        self.cluster = cluster
        self.cache = cache
        self.queue = queue
        self.framework = framework
        self.enqueuer = enqueuer
        self.status = status
        self.tasks = tasks
        self.concurrency = concurrency
        self.on_bound = on_bound
        #: placed batches not opened yet, in placement order
        self._waiting: deque[_Batch] = deque()
        #: opened batches with a pod still to send or in flight, oldest first
        self._open: list[_Batch] = []
        self._in_flight = 0

    def reset(self) -> None:
        """Forget batches and bind slots of a previous start (maybe on another event loop)."""
        self._waiting.clear()
        self._open.clear()
        self._in_flight = 0

    @property
    def in_flight(self) -> int:
        """Bind slots taken (a binding sent, or its ``Scheduled`` event waiting for room)."""
        return self._in_flight

    def waiting(self) -> bool:
        """Whether a placed pod waits for a bind slot (or for its gang's canary)."""
        return bool(self._waiting) or any(b.next < len(b.pairs) for b in self._open)

    @property
    def pending(self) -> int:
        """Batches placed and not completely answered yet."""
        return len(self._waiting) + len(self._open)

    def assume_and_bind(
        self,
        ekey: EntityKey,
        assignments: Iterable[tuple[PodInfo, str]],
        *,
        group: GroupInfo | None = None,
        canary: bool = False,
        framework: Framework | None = None,
    ) -> None:
        """Assume every pod of the batch (before any bind is sent), then queue its binds
        through ``framework`` (the batch's profile; default: the binder's).

        With ``canary`` (a gang whose quorum depends on the batch) one pod is bound first:
        if that fails (node gone, pod deleted, no permission...) nothing of the gang is
        bound, the whole batch is forgotten and retried, so a systematic failure never
        leaves a gang partially bound. The rest are then bound concurrently; a later failure
        forgets that pod and requeues the group with its remaining need."""
        pairs = list(assignments)
        if not pairs:
            return
        for p, node in pairs:
            self.cache.assume(p, node)
        self._waiting.append(_Batch(ekey, pairs, group, canary, framework or self.framework))
        self._pump()

    # ---- dispatching -----------------------------------------------------------------

    def _next_batch(self) -> _Batch | None:
        """The batch the next free slot goes to: the oldest open one with a pod to send;
        else a newly opened one -- but only while the free slots exceed what the open
        batches whose canary is in flight will send when it returns (their rest comes
        next). So small gangs' canaries go out together (before, one canary in flight
        stopped every other batch: gangs of 2 were bound one round trip per gang, whatever
        the concurrency), while a large gang's canary still holds the slots its burst
        will need."""
        reserved = 0
        for b in self._open:
            if b.sendable():
                return b
            if b.canary and b.next > 0:
                reserved += len(b.pairs) - 1
        if not self._waiting or self._in_flight + reserved >= self.concurrency:
            return None
        b = self._waiting.popleft()
        self._open.append(b)
        return b

    def _pump(self) -> None:
        """Fill the free bind slots."""
        while (work := self._take()) is not None:
            self.tasks.spawn(self._send(*work))

    def _take(self) -> tuple[_Batch, int] | None:
        """Take a free bind slot and the pod it sends next (None: no slot, or nothing to
        send)."""
        if self._in_flight >= self.concurrency:
            return None
        b = self._next_batch()
        if b is None:
            return None
        i = b.next
        b.next += 1
        self._in_flight += 1
        return b, i

    async def _send(self, b: _Batch, i: int) -> None:
        """Bind ``b.pairs[i]``, then -- while there is more to send -- the next pod a free
        slot would take, in this task (one task per slot in use, not one per pod)."""
        while True:
            p, node = b.pairs[i]
            try:
                try:
                    ok = await self._bind_one(b.framework, p, node)
                except Exception:  # a plugin bug must not stall the batches behind this one
                    _log.exception("binding %s/%s to %s failed", p.namespace, p.name, node)
                    if self.cache.pods.get(p.key) is p:
                        self.cache.forget(p)
                    ok = False
                if ok:
                    # answered first (a canary releases the rest of its gang to the free
                    # slots), then the event: when the event queue is full this slot stays
                    # taken until there is room, so bindings cannot outrun their events
                    self._answered(b, ok)
                    self._pump()
                    await self.status.scheduled(p, node)
            finally:
                self._in_flight -= 1
                if not self._in_flight:  # the events held back behind the bindings
                    self.status.bindings_done()
            if not ok:
                self._answered(b, ok)
            work = self._take()  # what _pump would hand to a new task first
            self._pump()
            if work is None:
                return
            b, i = work
            await asyncio.sleep(0)  # where that task's first step would run

    def _answered(self, b: _Batch, ok: bool) -> None:
        b.done += 1
        if not ok:
            b.failed += 1
        if b.canary:
            b.canary = False
            if not ok:  # nothing of the gang is bound: forget and retry the whole batch
                for p, _ in b.pairs[1:]:
                    if self.cache.pods.get(p.key) is p:
                        self.cache.forget(p)
                self._open.remove(b)
                self.tasks.spawn(self._release_then_retry(b))
                return
            if b.group is not None:
                self.status.group_condition(b.group, "True", REASON_SCHEDULED, "")
        if b.done < len(b.pairs):
            return
        if b.group is not None and b.failed < b.done:
            self.status.group_condition(b.group, "True", REASON_SCHEDULED, "")
        self._close(b, failed=b.failed > 0)

    def _close(self, b: _Batch, *, failed: bool) -> None:
        self._open.remove(b)
        if failed:
            self._retry(b)

    def _retry(self, b: _Batch) -> None:
        for p, _ in b.pairs:
            self.enqueuer.refresh_for(p)
        self.queue.requeue_after_failure(b.ekey)

    async def _release_then_retry(self, b: _Batch) -> None:
        """After a failed canary: release what Reserve plugins (DRA) hold for the pods never
        sent, then retry the batch (the release comes first so the retry sees the devices)."""
        for p, _ in b.pairs[1:]:
            await b.framework.run_unreserve(self.cluster, p)
        self._retry(b)

    async def _bind_one(self, framework: Framework, p: PodInfo, node: str) -> bool:
        """Bind one pod (a bind slot is held); on failure forget its assumption."""
        st = await framework.run_bind(self.cluster, p, node)
        if st.ok:
            _BIND_OK.inc()
            SCHEDULED_PODS.inc()
            self.on_bound()
            return True
        _BIND_ERROR.inc()
        if self.cache.pods.get(p.key) is p:
            self.cache.forget(p)
        _log.info("binding %s/%s to %s failed: %s", p.namespace, p.name, node, st.message)
        if self.cache.pods.get(p.key) is p:
            self.status.pod_failed(p, REASON_SCHEDULER_ERROR, st.message)
        return False
