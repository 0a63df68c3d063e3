"""Which pods and groups are pending, and keeping their queue entities current (upstream's
``schedulingQueue.Add/Update`` with the PreEnqueue gate)."""

from __future__ import annotations

from scheduler._cache import Cache, PodInfo
from scheduler._config import SchedulerConfig
from scheduler._framework import Framework
from scheduler._queue import EntityKey, SchedulingQueue

__all__ = ["Enqueuer"]


class Enqueuer:
    """Upserts or removes the queue entity of a pod or group after anything changed."""

    def __init__(
        self, cache: Cache, queue: SchedulingQueue, framework: Framework, config: SchedulerConfig
    ) -> None:
        self.cache = cache
        self.queue = queue
        self.framework = framework
        self.config = config

    def is_pending(self, p: PodInfo) -> bool:
        """Ours, unassigned, not being deleted and without scheduling gates."""
        return (
            p.node_name is None
            and p.assumed_node is None
            and not p.deleting
            and not p.gated
            and p.scheduler_name == self.config.scheduler_name
        )

    def refresh_for(self, p: PodInfo) -> None:
        """Refresh the entity ``p`` belongs to (its group, or itself)."""
        gk = p.group_key
        if gk is not None:
            self.refresh_group(gk)
        else:
            self.refresh_pod(p.key)

    def refresh_pod(self, key: tuple[str, str]) -> None:
        """A single pod's entity."""
        ekey: EntityKey = ("Pod", key[0], key[1])
        p = self.cache.pods.get(key)
        if p is None or p.group is not None or not self.is_pending(p):
            self.queue.remove(ekey)
            return
        self.queue.upsert(
            ekey,
            priority=self.cache.pod_priority(p),
            first_seen=p.first_seen,
            seq=p.seq,
            gate=None,
        )

    def refresh_group(self, gk: tuple[str, str]) -> None:
        """A group's entity, gated by PreEnqueue."""
        ekey: EntityKey = ("PodGroup", gk[0], gk[1])
        g = self.cache.groups.get(gk)
        if g is None or not any(self.is_pending(p) for p in self.cache.members(g)):
            self.queue.remove(ekey)
            return
        st = self.framework.run_pre_enqueue(g, self.cache)
        self.queue.upsert(
            ekey,
            priority=self.cache.group_priority(g),
            first_seen=g.first_seen,
            seq=g.seq,
            gate=None if st.ok else st.message,
        )
