"""Binding: assume a placed batch in the cache, then bind it asynchronously through the
framework's Bind plugins (bounded concurrency); a failure forgets the assumption and
requeues the entity."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from scheduler._cache import Cache, GroupInfo, PodInfo
from scheduler._enqueue import Enqueuer
from scheduler._framework import Framework
from scheduler._metrics import BIND_RESULTS, SCHEDULED_PODS
from scheduler._queue import EntityKey, SchedulingQueue
from scheduler._status import REASON_SCHEDULED, REASON_SCHEDULER_ERROR, StatusWriter
from scheduler._tasks import Tasks
from workloadbuilder.cluster import Cluster

__all__ = ["Binder"]

_log = logging.getLogger(__name__)


class Binder:
    """Assume and bind placed pods."""

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
        self._sem: asyncio.Semaphore | None = None

    def reset(self) -> None:
        """Forget the concurrency semaphore (a new start, maybe on another event loop)."""
        self._sem = None

    def assume_and_bind(
        self,
        ekey: EntityKey,
        assignments: Iterable[tuple[PodInfo, str]],
        *,
        group: GroupInfo | None = None,
        canary: bool = False,
    ) -> None:
        """Assume every pod of the batch (before any bind is sent), then bind them."""
        pairs = list(assignments)
        for p, node in pairs:
            self.cache.assume(p, node)
        self.tasks.spawn(self._bind_all(ekey, pairs, group, canary))

    async def _bind_all(
        self,
        ekey: EntityKey,
        pairs: list[tuple[PodInfo, str]],
        group: GroupInfo | None,
        canary: bool,
    ) -> None:
        """Bind a placed batch. For a gang whose quorum depends on the batch, one pod is bound
        first: if that fails (node gone, pod deleted, no permission...) nothing of the gang is
        bound and the whole batch is forgotten and retried, so a systematic failure never
        leaves a gang partially bound. The rest are then bound concurrently; a later failure
        forgets that pod and requeues the group with its remaining need."""
        results: list[bool] = []
        if canary and len(pairs) > 1:
            first = await self._bind_one(*pairs[0])
            if not first:
                for p, _ in pairs[1:]:
                    if self.cache.pods.get(p.key) is p:
                        self.cache.forget(p)
                    await self.framework.run_unreserve(self.cluster, p)  # DRA: release
                for p, _ in pairs:
                    self.enqueuer.refresh_for(p)
                self.queue.requeue_after_failure(ekey)
                return
            results.append(first)
            pairs_left = pairs[1:]
        else:
            pairs_left = pairs
        if group is not None and results:
            self.status.group_condition(group, "True", REASON_SCHEDULED, "")
        results.extend(await asyncio.gather(*(self._bind_one(p, n) for p, n in pairs_left)))
        if group is not None and any(results):
            self.status.group_condition(group, "True", REASON_SCHEDULED, "")
        if not all(results):
            for p, _ in pairs:
                self.enqueuer.refresh_for(p)
            self.queue.requeue_after_failure(ekey)

    async def _bind_one(self, p: PodInfo, node: str) -> bool:
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.concurrency)
        async with self._sem:
            st = await self.framework.run_bind(self.cluster, p, node)
        if st.ok:
            BIND_RESULTS.labels(result="ok").inc()
            SCHEDULED_PODS.inc()
            self.on_bound()
            self.status.scheduled(p, node)
            return True
        BIND_RESULTS.labels(result="error").inc()
        if self.cache.pods.get(p.key) is p:
            self.cache.forget(p)
        _log.info("binding %s/%s to %s failed: %s", p.namespace, p.name, node, st.message)
        if self.cache.pods.get(p.key) is p:
            self.status.pod_failed(p, REASON_SCHEDULER_ERROR, st.message)
        return False
