"""Which pods and groups are pending, and keeping their queue entities current (upstream's
``schedulingQueue.Add/Update`` with the PreEnqueue gate)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from workloadbuilder.scheduler._cache import Cache, PodInfo
from workloadbuilder.scheduler._config import SchedulerConfig
from workloadbuilder.scheduler._framework import Framework
from workloadbuilder.scheduler._queue import EntityKey, SchedulingQueue
from workloadbuilder.scheduler._tree import RootRef, build_tree, find_root

__all__ = ["Enqueuer"]


class Enqueuer:
    """Upserts or removes the queue entity of a pod or group after anything changed.

    ``frameworks``: the profiles served, by schedulerName. A pod's PreEnqueue plugins are its
    profile's; a group's (or tree's) are the profile of its first pending pod (as
    kube-scheduler's ``frameworkForPodGroup``; pods of one group naming different profiles
    are refused by the cycle)."""

    def __init__(
        self,
        cache: Cache,
        queue: SchedulingQueue,
        frameworks: Mapping[str, Framework],
        config: SchedulerConfig,
    ) -> None:
        self.cache = cache
        self.queue = queue
        self.frameworks = frameworks
        self.config = config
        #: PodGroup in a tree -> the root entity it was last queued under
        self._roots: dict[tuple[str, str], EntityKey] = {}

    def root_entity(self, gk: tuple[str, str]) -> EntityKey:
        """The queue entity a PodGroup's pods are scheduled with (itself, or its tree's
        root CompositePodGroup)."""
        g = self.cache.groups.get(gk)
        if (
            g is not None
            and g.pod_group is not None
            and g.pod_group.spec.parent_composite_pod_group_name
        ):
            ref = find_root(self.cache, gk[0], "PodGroup", gk[1])
            return ("CompositePodGroup", ref.namespace, ref.name)
        return ("PodGroup", gk[0], gk[1])

    def refresh_namespace_trees(self, namespace: str) -> None:
        """A CompositePodGroup appeared, changed or went: every tree of the namespace."""
        for gk, g in list(self.cache.groups.items()):
            if (
                gk[0] == namespace
                and g.pod_group is not None
                and (g.pod_group.spec.parent_composite_pod_group_name or gk in self._roots)
            ):
                self.refresh_group(gk)

    def refresh_root_key(self, ekey: EntityKey) -> None:
        """Re-evaluate a root entity by key (e.g. after a member left it)."""
        ref = find_root(self.cache, ekey[1], "CompositePodGroup", ekey[2])
        if ref.name != ekey[2] or ref.waiting:
            self.queue.remove(ekey)
            if ref.name == ekey[2]:
                return
        self.refresh_tree(ref, None)

    def refresh_tree(self, ref: RootRef, member: tuple[str, str] | None) -> None:
        """The root entity of a tree: gated by the tree's PreEnqueue (a missing parent or too
        few ready children), removed when no pod of the tree is pending."""
        ekey: EntityKey = ("CompositePodGroup", ref.namespace, ref.name)
        if member is not None:
            previous = self._roots.get(member)
            self._roots[member] = ekey
            if previous is not None and previous != ekey:
                self.refresh_root_key(previous)
        if ref.waiting:
            g = self.cache.groups.get(member) if member is not None else None
            if g is None or not any(self.is_pending(p) for p in self.cache.members(g)):
                self.queue.remove(ekey)
                return
            self.queue.upsert(
                ekey, priority=0, first_seen=g.first_seen, seq=g.seq, gate=ref.waiting
            )
            return
        tree = build_tree(self.cache, ref.namespace, ref.name) if not ref.invalid else ref.invalid
        if isinstance(tree, str):  # invalid: the cycle reports it
            g = self.cache.groups.get(member) if member is not None else None
            if g is not None:
                self.queue.upsert(ekey, priority=0, first_seen=g.first_seen, seq=g.seq, gate=None)
            return
        leaves = [leaf.group for leaf in tree.leaves() if leaf.group is not None]
        first = self.first_pending(p for g in leaves for p in self.cache.members(g))
        if first is None:
            self.queue.remove(ekey)
            return
        st = self.frameworks[first.scheduler_name].run_pre_enqueue_tree(tree, self.cache)
        cpg = tree.cpg
        assert cpg is not None
        self.queue.upsert(
            ekey,
            priority=self.cache.resolve_priority(cpg.spec.priority, cpg.spec.priority_class_name),
            first_seen=min(g.first_seen for g in leaves),
            seq=min(g.seq for g in leaves),
            gate=None if st.ok else st.message,
        )

    def is_pending(self, p: PodInfo) -> bool:
        """Ours (its schedulerName names a profile we serve), unassigned, not being deleted
        and without scheduling gates."""
        return (
            p.node_name is None
            and p.assumed_node is None
            and not p.deleting
            and not p.gated
            and p.scheduler_name in self.frameworks
        )

    def first_pending(self, pods: Iterable[PodInfo]) -> PodInfo | None:
        """The first pending pod of ``pods``, or None; with several profiles the first to
        arrive (its profile schedules their entity)."""
        if len(self.frameworks) == 1:
            return next((p for p in pods if self.is_pending(p)), None)
        return min((p for p in pods if self.is_pending(p)), key=_arrival, default=None)

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
        st = self.frameworks[p.scheduler_name].run_pre_enqueue_pod(p, self.cache)
        self.queue.upsert(
            ekey,
            priority=self.cache.pod_priority(p),
            first_seen=p.first_seen,
            seq=p.seq,
            gate=None if st.ok else st.message,
        )

    def refresh_group(self, gk: tuple[str, str]) -> None:
        """A group's entity, gated by PreEnqueue (the root's, for a PodGroup in a tree)."""
        ekey: EntityKey = ("PodGroup", gk[0], gk[1])
        g = self.cache.groups.get(gk)
        if (
            g is not None
            and g.pod_group is not None
            and g.pod_group.spec.parent_composite_pod_group_name
        ):
            self.queue.remove(ekey)
            self.refresh_tree(find_root(self.cache, gk[0], "PodGroup", gk[1]), gk)
            return
        old_root = self._roots.pop(gk, None)
        if old_root is not None:
            self.refresh_root_key(old_root)
        first = self.first_pending(self.cache.members(g)) if g is not None else None
        if g is None or first is None:
            self.queue.remove(ekey)
            return
        st = self.frameworks[first.scheduler_name].run_pre_enqueue(g, self.cache)
        self.queue.upsert(
            ekey,
            priority=self.cache.group_priority(g),
            first_seen=g.first_seen,
            seq=g.seq,
            gate=None if st.ok else st.message,
        )


def _arrival(p: PodInfo) -> int:
    return p.seq
