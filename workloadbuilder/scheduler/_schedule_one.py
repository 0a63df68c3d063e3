"""Schedule one entity (kube-scheduler's ``schedule_one.go``): a single pod, or a pod group
all-or-nothing, on a fresh :class:`~._snapshot.Snapshot`; success assumes and hands
the batch to the binder, failure runs PodGroupPostFilter and writes the explanation."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Literal

from workloadbuilder.scheduler._binding import Binder
from workloadbuilder.scheduler._cache import Cache, GroupInfo, PodInfo
from workloadbuilder.scheduler._composite import SearchConfig, place_tree
from workloadbuilder.scheduler._config import SchedulerConfig
from workloadbuilder.scheduler._cycle import CycleResult, run_pod_group_cycle
from workloadbuilder.scheduler._enqueue import Enqueuer
from workloadbuilder.scheduler._framework import Framework
from workloadbuilder.scheduler._interface import Code, Placement, Status
from workloadbuilder.scheduler._metrics import (
    ATTEMPT_DURATION,
    POD_ATTEMPTS,
    PODGROUP_ATTEMPT_DURATION,
    PODGROUP_ATTEMPTS,
)
from workloadbuilder.scheduler._preemption import DefaultPreemption, PreemptionHandle, Victim
from workloadbuilder.scheduler._queue import QueuedEntity, SchedulingQueue
from workloadbuilder.scheduler._snapshot import Snapshot
from workloadbuilder.scheduler._status import (
    REASON_INVALID,
    REASON_SCHEDULED,
    REASON_SCHEDULER_ERROR,
    REASON_UNSCHEDULABLE,
    StatusWriter,
)
from workloadbuilder.scheduler._tree import TreeNode, build_tree, find_root

__all__ = ["ScheduleOne"]

_log = logging.getLogger(__name__)


class ScheduleOne:
    """One scheduling attempt per popped queue entity."""

    def __init__(
        self,
        cache: Cache,
        queue: SchedulingQueue,
        framework: Framework,
        enqueuer: Enqueuer,
        binder: Binder,
        status: StatusWriter,
        config: SchedulerConfig,
    ) -> None:
        self.cache = cache
        self.queue = queue
        self.framework = framework
        self.enqueuer = enqueuer
        self.binder = binder
        self.status = status
        self.config = config
        #: ``(namespace, podgroup)`` -> the last Unschedulable / SchedulerError message
        self.explanations: dict[tuple[str, str], str] = {}
        #: the group cycle in progress: (group key, pending pods, already scheduled)
        self._cycle: tuple[tuple[str, str], list[PodInfo], int] | None = None
        if config.preemption:
            framework.set_handle(self)

    # ---- preemption (the plugins' handle) ----------------------------------------------

    def _reserve_nominated(
        self,
        snap: Snapshot,
        priority: int,
        exclude: tuple[str, str] | None,
        exclude_pod: tuple[str, str] | None = None,
        exclude_groups: frozenset[tuple[str, str]] = frozenset(),
    ) -> None:
        """Hold the nodes nominated for preemptors of at least ``priority`` (other than the
        group ``exclude`` and the pod ``exclude_pod``): lower-priority work does not take
        the room preemption made."""
        for p, row in self.cache.nominated():
            if (exclude is not None and p.group_key == exclude) or p.key == exclude_pod:
                continue
            if p.group_key is not None and p.group_key in exclude_groups:
                continue
            if self.cache.pod_priority(p) >= priority:
                snap.assume(p, row, snap.table.vector(p.req.requests))

    def placements(self, group: GroupInfo, snap: Snapshot) -> list[Placement]:
        """The group's candidate placements (the handle of PodGroupPostFilter plugins)."""
        out = self.framework.run_placement_generate(group, snap)
        return [] if isinstance(out, Status) else list(out)

    def place_group(
        self, group: GroupInfo, snap: Snapshot, placements: Sequence[Placement] | None = None
    ) -> list[tuple[PodInfo, int]] | None:
        """The group's placement on ``snap`` (the handle of PodGroupPostFilter plugins)."""
        if self._cycle is None or self._cycle[0] != group.key:
            return None
        _, pending, scheduled = self._cycle
        if placements is None:
            generated = self.framework.run_placement_generate(group, snap)
            if isinstance(generated, Status):
                return None
            placements = generated
        res = run_pod_group_cycle(
            self.framework,
            snap,
            pending,
            min_count=group.min_count,
            scheduled=scheduled,
            gang=group.is_gang,
            placements=placements,
            group=group,
        )
        if not res.status.ok:
            return None
        index = snap.table.index
        return [(p, index[n]) for p, n in res.assignments]

    def claims_fit(self, snap: Snapshot, assignments: Sequence[tuple[PodInfo, int]]) -> bool:
        """The handle's DRA check: reserve every assigned pod's claims at its row, in order,
        on the snapshot (and give them back)."""
        if not self.framework.reserve:
            return True
        mark = snap.mark()
        try:
            return all(self.framework.run_reserve_all(p, snap, row) for p, row in assignments)
        finally:
            snap.revert(mark)

    def actuate(
        self,
        group: GroupInfo,
        nominations: Sequence[tuple[PodInfo, str]],
        victims: Sequence[Victim],
        on_failure: Callable[[], None],
    ) -> None:
        """Preempt the victims, nominate the preemptor's pods. When a victim cannot be
        preempted the nominations are dropped and ``on_failure`` runs (the group may try
        again after its backoff)."""
        self._actuate(f"pod group {group.namespace}/{group.name}", nominations, victims, on_failure)

    def _actuate(
        self,
        who: str,
        nominations: Sequence[tuple[PodInfo, str]],
        victims: Sequence[Victim],
        on_failure: Callable[[], None],
    ) -> None:
        _log.info(
            "%s preempts %s",
            who,
            ", ".join(f"{v.kind} {v.namespace}/{v.name} ({len(v.pods)} pods)" for v in victims),
        )
        for p, node in nominations:
            self.cache.nominations[p.key] = node
            self.status.nominate(p, node)
        keys = [p.key for p, _ in nominations]

        def failed() -> None:
            for k in keys:
                self.cache.nominations.pop(k, None)
            on_failure()

        for v in victims:
            for victim in v.pods:
                self.status.preempt(victim, who, failed)

    def actuate_for_pod(
        self, p: PodInfo, node: str, victims: Sequence[Victim], on_failure: Callable[[], None]
    ) -> None:
        """Preempt the victims of a single pod and nominate it."""
        who = f"pod {p.namespace}/{p.name}"
        _log.info(
            "%s preempts %s", who, ", ".join(f"{v.kind} {v.namespace}/{v.name}" for v in victims)
        )
        self.cache.nominations[p.key] = node
        self.status.nominate(p, node)

        def failed() -> None:
            self.cache.nominations.pop(p.key, None)
            on_failure()

        for v in victims:
            for victim in v.pods:
                self.status.preempt(victim, who, failed)

    def _preemption(self) -> DefaultPreemption | None:
        if not self.config.preemption:
            return None
        return self.framework.post_filter_plugin(DefaultPreemption)

    def _preempt_for_tree(
        self,
        tree: TreeNode,
        snap: Snapshot,
        members: Sequence[PodInfo],
        by_group: dict[tuple[str, str], list[PodInfo]],
        scheduled: dict[tuple[str, str], int],
    ) -> str | None:
        """Workload-aware preemption for a CompositePodGroup tree whose cycle failed (as
        kube-scheduler v1.37.2 does for a root CompositePodGroup): the message to append
        (``DefaultPreemption: preempting ...`` when victims are being preempted), or None."""
        plugin = self._preemption()
        cpg = tree.cpg
        if plugin is None or cpg is None:
            return None
        fw = self.framework
        cache = self.cache
        search = SearchConfig(
            mode=fw.composite_search, budget=fw.search_budget, deadline=fw.search_deadline
        )
        index = snap.table.index

        def place(placements: Sequence[Placement] | None) -> list[tuple[PodInfo, int]] | None:
            root = placements[0] if placements else None
            r = place_tree(fw, snap, tree, by_group, scheduled, search=search, root=root)
            return [(p, index[n]) for p, n in r.assignments] if r.ok else None

        key = tree.topology_key

        def domains() -> list[Placement]:
            assert key is not None
            got = fw.run_placement_generate_for(key, tree.name, list(members), snap)
            return [] if isinstance(got, Status) else [pl for pl in got if pl.domain]

        policy = cpg.spec.preemption_policy or next(
            (p.preemption_policy for p in members if p.preemption_policy), "PreemptLowerPriority"
        )
        got = plugin.choose(
            snap,
            key=tree.key,
            waiting=plugin.waiting_trees,
            policy=policy,
            priority=cache.resolve_priority(cpg.spec.priority, cpg.spec.priority_class_name),
            members=members,
            exclude=frozenset(leaf.key for leaf in tree.leaves()),
            place=place,
            domains=domains if key is not None else None,
        )
        if isinstance(got, Status):
            return got.message or None
        victims, assignments, text = got
        nominations = [(p, snap.node_name(row)) for p, row in assignments]
        root_key = tree.key
        self._actuate(
            f"composite pod group {tree.namespace}/{tree.name}",
            nominations,
            victims,
            lambda: plugin.forget_tree(root_key),
        )
        return f"{DefaultPreemption.name}: {text}"

    def _is_a_handle(self) -> PreemptionHandle:  # mypy checks the protocol
        return self

    def __call__(self, e: QueuedEntity) -> None:
        """Schedule the entity ``e`` (popped, in flight)."""
        if e.kind == "Pod":
            self.schedule_pod(e)
        elif e.kind == "CompositePodGroup":
            self.schedule_tree(e)
        else:
            self.schedule_group(e)

    # ---- single pods -----------------------------------------------------------------

    def schedule_pod(self, e: QueuedEntity) -> None:
        """The pod cycle: Filter and Score over all nodes, then assume and bind."""
        key = (e.key[1], e.key[2])
        p = self.cache.pods.get(key)
        if p is None or p.group is not None or not self.enqueuer.is_pending(p):
            self.queue.remove(e.key)
            self.queue.done(e, "success")
            return
        t0 = time.perf_counter()
        snap = Snapshot(self.cache)
        self._reserve_nominated(snap, self.cache.pod_priority(p), None, p.key)
        res = run_pod_group_cycle(self.framework, snap, [p], min_count=1, scheduled=0, gang=False)
        snap.revert()
        result = "scheduled" if res.status.ok else "unschedulable"
        ATTEMPT_DURATION.labels(result=result, profile=self.config.scheduler_name).observe(
            time.perf_counter() - t0
        )
        POD_ATTEMPTS.labels(result=result, profile=self.config.scheduler_name).inc()
        if res.status.ok:
            self.framework.run_commit(res.reservations)
            self.binder.assume_and_bind(e.key, res.assignments)
            self.queue.remove(e.key)
            self.queue.done(e, "success")
            return
        diag = res.diagnoses.get(p.req)
        message = diag.pod_message() if diag else res.explanation or res.status.message
        outcome: Literal["unschedulable", "error"] = "unschedulable"
        plugin = self.framework.post_filter_plugin(DefaultPreemption)
        if self.config.preemption and plugin is not None:
            got = plugin.preempt_pod(self.framework, snap, p)
            if isinstance(got, str):
                message = f"{message} preemption: {got}."
            elif got is not None:
                node, victims = got
                key = p.key
                names = ", ".join(f"{v.kind} {v.namespace}/{v.name}" for v in victims)
                message = f"{message} preemption: preempting {names} on {node}."
                self.actuate_for_pod(p, node, victims, lambda: plugin.forget_pod(key))
                outcome = "error"  # room is being made: retry after the backoff
        snap.revert()
        self.status.pod_failed(p, REASON_UNSCHEDULABLE, message)
        self.queue.done(e, outcome)

    # ---- pod groups ------------------------------------------------------------------

    def _validate_group(self, g: GroupInfo, members: Sequence[PodInfo]) -> str | None:
        names = sorted({p.scheduler_name for p in members})
        if len(names) > 1:
            return (
                f"pods of pod group {g.name!r} have different scheduler names: {', '.join(names)}"
            )
        prio = self.cache.group_priority(g)
        for p in sorted(members, key=lambda m: m.name):
            pp = self.cache.pod_priority(p)
            if pp != prio:
                return (
                    f"pod {p.name!r} has priority {pp} but pod group {g.name!r} has priority {prio}"
                )
        policy = g.pod_group.spec.preemption_policy if g.pod_group is not None else None
        if policy:  # kube-scheduler v1.37.2: the pods' policy must equal the group's
            for p in sorted(members, key=lambda m: m.name):
                own = p.preemption_policy or "PreemptLowerPriority"
                if own != policy:
                    return (
                        f"pod {p.name!r} has preemptionPolicy {own} but pod group {g.name!r} "
                        f"has preemptionPolicy {policy}"
                    )
        return None

    def _group_error(
        self, e: QueuedEntity, g: GroupInfo, pending: Sequence[PodInfo], error: str
    ) -> None:
        """``SchedulerError`` on the group and its pending pods; back off."""
        PODGROUP_ATTEMPTS.labels(result="error").inc()
        _log.info("pod group %s/%s rejected (SchedulerError): %s", *g.key, error)
        self.explanations[g.key] = error
        self.status.group_condition(g, "False", REASON_SCHEDULER_ERROR, error)
        for p in pending:
            self.status.pod_failed(p, REASON_SCHEDULER_ERROR, error)
        self.queue.done(e, "error")

    def schedule_group(self, e: QueuedEntity) -> None:
        """The pod-group cycle: every pending member at once, all-or-nothing to minCount."""
        gk = (e.key[1], e.key[2])
        g = self.cache.groups.get(gk)
        members = [p for p in self.cache.members(g)] if g is not None else []
        pending = [p for p in members if self.enqueuer.is_pending(p)]
        if g is None or not pending:
            self.queue.remove(e.key)
            self.queue.done(e, "success")
            return
        if g.pod_group is not None and g.pod_group.spec.parent_composite_pod_group_name:
            self.queue.remove(e.key)  # scheduled with its tree's root
            self.queue.done(e, "success")
            self.enqueuer.refresh_group(gk)
            return
        st = self.framework.run_pre_enqueue(g, self.cache)
        if not st.ok:
            _log.debug("pod group %s/%s waiting: %s", *gk, st.message)
            self.queue.done(e, "unschedulable")
            self.enqueuer.refresh_group(gk)
            return
        live = [p for p in members if not p.deleting and self.cache.visible(p)]
        error = self._validate_group(g, live)
        if error is not None:
            self._group_error(e, g, pending, error)
            return
        prio = {p.key: self.cache.pod_priority(p) for p in pending}
        pending.sort(key=lambda p: (-prio[p.key], p.first_seen, p.seq, p.name))
        scheduled = sum(1 for p in live if p.scheduled)
        if scheduled + len(pending) < g.min_count:  # quorum impossible before any placement
            gated = sum(1 for p in live if p.gated and not p.scheduled)
            message = (
                f"minCount {g.min_count}: only {scheduled + len(pending)} pods can be scheduled "
                f"({scheduled} scheduled, {len(pending)} pending, {gated} with scheduling gates)"
            )
            PODGROUP_ATTEMPTS.labels(result="unschedulable").inc()
            _log.info("pod group %s/%s unschedulable: %s", *gk, message)
            self.explanations[gk] = message
            self.status.group_condition(g, "False", REASON_UNSCHEDULABLE, message)
            self.queue.done(e, "unschedulable")
            return
        t0 = time.perf_counter()
        snap = Snapshot(self.cache)
        self._reserve_nominated(snap, self.cache.group_priority(g), gk)
        placements = self.framework.run_placement_generate(g, snap)
        if isinstance(placements, Status):
            if placements.code is Code.ERROR:
                snap.revert()
                self._group_error(e, g, pending, placements.message)
                return
            res = CycleResult(
                status=placements, unplaced=tuple(pending), explanation=placements.message
            )
        else:
            res = run_pod_group_cycle(
                self.framework,
                snap,
                pending,
                min_count=g.min_count,
                scheduled=scheduled,
                gang=g.is_gang,
                placements=placements,
                group=g,
            )
        post = None
        if not res.status.ok:
            self._cycle = (gk, pending, scheduled)
            try:
                post = self.framework.run_pod_group_post_filter(g, snap, res.explanation)
            finally:
                self._cycle = None
        snap.revert()
        result = "scheduled" if res.status.ok else "unschedulable"
        PODGROUP_ATTEMPT_DURATION.labels(result=result).observe(time.perf_counter() - t0)
        PODGROUP_ATTEMPTS.labels(result=result).inc()
        if res.status.ok:
            _log.info("pod group %s/%s scheduled: %d pods", *gk, len(res.assignments))
            _log.debug(
                "pod group %s/%s placement: %s", *gk, dict((p.name, n) for p, n in res.assignments)
            )
            self.framework.run_commit(res.reservations)
            # a gang whose quorum depends on this batch binds one pod first (see Binder)
            self.binder.assume_and_bind(
                e.key, res.assignments, group=g, canary=g.is_gang and scheduled < g.min_count
            )
            left_behind = False
            for p in res.unplaced:
                diag = res.diagnoses.get(p.req)
                if diag is not None:
                    left_behind = True
                    self.status.pod_failed(p, REASON_UNSCHEDULABLE, diag.pod_message())
            self.queue.done(e, "success")
            if left_behind and self._preemption() is not None:
                # Pods that found no node in a successful cycle (a basic group's, a gang's
                # above its quorum) are retried at once: that cycle places nothing new, so it
                # fails and runs PodGroupPostFilter for them, as kube-scheduler v1.37.2's
                # next attempt does. In the unschedulable pool they would wait for an event
                # that only the preemption they need can cause.
                self.queue.move(e.key)
            self.enqueuer.refresh_group(gk)
            return
        message = res.explanation or res.status.message
        outcome: str = "unschedulable"
        if post is not None:
            if post.ok:
                outcome = "error"  # room is being made (victims nominated): retry after backoff
                if post.message:
                    message = f"{message}; {post.plugin}: {post.message}"
            elif post.code is Code.ERROR:
                _log.warning("PodGroupPostFilter %s for %s/%s: %s", post.plugin, *gk, post.message)
                outcome = "error"
            elif post.message:
                message = f"{message}; {post.message}"
        _log.info("pod group %s/%s unschedulable: %s", *gk, message)
        self.explanations[gk] = message
        if scheduled < g.min_count:
            # A group whose quorum is already bound or assumed (its bindings in flight, the
            # True condition not yet written) was initially scheduled: leftover pods that do
            # not fit must not flip it to False (upstream writes True in the cycle itself).
            self.status.group_condition(g, "False", REASON_UNSCHEDULABLE, message)
        pod_message = f'pod group "{g.name}" is unschedulable: {message}'
        for p in pending:
            self.status.pod_failed(p, REASON_UNSCHEDULABLE, pod_message)
        self.queue.done(e, "error" if outcome == "error" else "unschedulable")

    # ---- CompositePodGroup trees -----------------------------------------------------

    def _validate_tree(self, tree: TreeNode, live: Sequence[PodInfo]) -> str | None:
        names = sorted({p.scheduler_name for p in live})
        if len(names) > 1:
            return (
                f"pods of composite pod group {tree.name!r} have different scheduler names: "
                f"{', '.join(names)}"
            )
        cpg = tree.cpg
        assert cpg is not None
        prio = self.cache.resolve_priority(cpg.spec.priority, cpg.spec.priority_class_name)
        for node in tree.composites():
            assert node.cpg is not None
            pp = self.cache.resolve_priority(
                node.cpg.spec.priority, node.cpg.spec.priority_class_name
            )
            if pp != prio:
                return (
                    f"composite pod group {node.name!r} has priority {pp} but the tree's root "
                    f"{tree.name!r} has priority {prio}"
                )
        for leaf in tree.leaves():
            assert leaf.group is not None
            gp = self.cache.group_priority(leaf.group)
            if gp != prio:
                return (
                    f"pod group {leaf.name!r} has priority {gp} but the tree's root "
                    f"{tree.name!r} has priority {prio}"
                )
        for p in sorted(live, key=lambda m: m.name):
            pp = self.cache.pod_priority(p)
            if pp != prio:
                return f"pod {p.name!r} has priority {pp} but the tree's root has priority {prio}"
        policy = cpg.spec.preemption_policy
        if policy:  # kube-scheduler v1.37.2: one preemption policy in a hierarchy
            levels: list[tuple[str, str | None]] = [
                (f"composite pod group {node.name!r}", node.cpg.spec.preemption_policy)
                for node in tree.composites()
                if node.cpg is not None
            ]
            levels += [
                (f"pod group {leaf.name!r}", leaf.group.pod_group.spec.preemption_policy)
                for leaf in tree.leaves()
                if leaf.group is not None and leaf.group.pod_group is not None
            ]
            levels += [
                (f"pod {p.name!r}", p.preemption_policy) for p in sorted(live, key=lambda m: m.name)
            ]
            for what, own in sorted(levels, key=lambda w: not w[0].startswith("composite")):
                if (own or "PreemptLowerPriority") != policy:
                    return (
                        f"{what} has preemptionPolicy {own or 'PreemptLowerPriority'} but the "
                        f"tree's root {tree.name!r} has preemptionPolicy {policy}"
                    )
        return None

    def _tree_failed(
        self,
        e: QueuedEntity,
        tree: TreeNode,
        pending: Sequence[PodInfo],
        reason: str,
        message: str,
        per_node: dict[tuple[str, str], str] | None = None,
        outcome: Literal["unschedulable", "error"] = "unschedulable",
    ) -> None:
        per_node = per_node or {}
        self.explanations[tree.key] = message
        for node in tree.composites():
            assert node.cpg is not None
            self.status.composite_condition(
                node.cpg, "False", reason, per_node.get((node.kind, node.name), message)
            )
        for leaf in tree.leaves():
            assert leaf.group is not None
            if not any(p.scheduled for p in self.cache.members(leaf.group)):
                text = per_node.get((leaf.kind, leaf.name), message)
                self.explanations[leaf.key] = text
                self.status.group_condition(leaf.group, "False", reason, text)
        pod_message = f'composite pod group "{tree.name}" is unschedulable: {message}'
        for p in pending:
            self.status.pod_failed(
                p, reason, pod_message if reason == REASON_UNSCHEDULABLE else message
            )
        self.queue.done(e, outcome)

    def _tell_invalid_leaves(self, ns: str, root: str, message: str) -> None:
        """An invalid hierarchy (a cycle, too deep) is never scheduled: say so on each of its
        PodGroups and pending pods too (CompositePodGroup conditions may be off), so that
        the gang does not wait silently."""
        for (gns, name), g in list(self.cache.groups.items()):
            if gns != ns:
                continue
            ref = find_root(self.cache, ns, "PodGroup", name)
            if ref.name != root or not ref.invalid:
                continue
            self.explanations[(ns, name)] = message
            members = list(self.cache.members(g))
            if not any(p.scheduled for p in members):
                self.status.group_condition(g, "False", REASON_UNSCHEDULABLE, message)
            for p in members:
                if self.enqueuer.is_pending(p):
                    self.status.pod_failed(
                        p, REASON_UNSCHEDULABLE, f'pod group "{name}" is unschedulable: {message}'
                    )

    def schedule_tree(self, e: QueuedEntity) -> None:
        """The cycle of a CompositePodGroup tree: top-down, all-or-nothing to the root's
        ``minGroupCount`` (see ``workloadbuilder.scheduler._composite``)."""
        ns, root = e.key[1], e.key[2]
        ref = find_root(self.cache, ns, "CompositePodGroup", root)
        if ref.name != root or ref.waiting:
            self.queue.remove(e.key)
            self.queue.done(e, "success")
            self.enqueuer.refresh_namespace_trees(ns)
            return
        tree = build_tree(self.cache, ns, root) if not ref.invalid else ref.invalid
        if isinstance(tree, str):
            PODGROUP_ATTEMPTS.labels(result="error").inc()
            self.explanations[(ns, root)] = tree
            cpg = self.cache.composite_groups.get((ns, root))
            if cpg is not None:
                self.status.composite_condition(cpg, "False", REASON_INVALID, tree)
            self._tell_invalid_leaves(ns, root, tree)
            self.queue.done(e, "error")
            return
        members = list(tree.members(self.cache))
        pending = [p for p in members if self.enqueuer.is_pending(p)]
        if not pending:
            self.queue.remove(e.key)
            self.queue.done(e, "success")
            return
        st = self.framework.run_pre_enqueue_tree(tree, self.cache)
        if not st.ok:
            self.queue.done(e, "unschedulable")
            self.enqueuer.refresh_tree(ref, None)
            return
        live = [p for p in members if not p.deleting and self.cache.visible(p)]
        error = self._validate_tree(tree, live)
        if error is not None:
            PODGROUP_ATTEMPTS.labels(result="error").inc()
            self._tree_failed(e, tree, pending, REASON_SCHEDULER_ERROR, error, outcome="error")
            return
        prio = {p.key: self.cache.pod_priority(p) for p in pending}
        pending.sort(key=lambda p: (-prio[p.key], p.first_seen, p.seq, p.name))
        by_group: dict[tuple[str, str], list[PodInfo]] = {}
        for p in pending:
            assert p.group_key is not None
            by_group.setdefault(p.group_key, []).append(p)
        scheduled: dict[tuple[str, str], int] = {}
        for p in live:
            if p.scheduled and p.group_key is not None:
                scheduled[p.group_key] = scheduled.get(p.group_key, 0) + 1
        t0 = time.perf_counter()
        snap = Snapshot(self.cache)
        self._reserve_nominated(
            snap,
            self.cache.pod_priority(pending[0]),
            None,
            exclude_groups=frozenset(leaf.key for leaf in tree.leaves()),
        )
        fw = self.framework
        res = place_tree(
            fw,
            snap,
            tree,
            by_group,
            scheduled,
            search=SearchConfig(
                mode=fw.composite_search, budget=fw.search_budget, deadline=fw.search_deadline
            ),
        )
        root_ref = ("CompositePodGroup", tree.name)
        preempted: str | None = None
        if not res.ok:
            preempted = self._preempt_for_tree(tree, snap, members, by_group, scheduled)
        snap.revert()
        result = "scheduled" if res.ok else "unschedulable"
        PODGROUP_ATTEMPT_DURATION.labels(result=result).observe(time.perf_counter() - t0)
        PODGROUP_ATTEMPTS.labels(result=result).inc()
        if not res.ok:
            message = res.explanations.get(root_ref, "the tree does not fit")
            outcome: Literal["unschedulable", "error"] = "unschedulable"
            per_node = res.explanations
            if preempted is not None:
                message = f"{message}; {preempted}"
                # every level's condition says what preemption does for the tree
                per_node = {k: f"{v}; {preempted}" for k, v in per_node.items()}
                if preempted.startswith(f"{DefaultPreemption.name}: preempting"):
                    outcome = "error"  # room is being made: retry after the backoff
            self._tree_failed(
                e, tree, pending, REASON_UNSCHEDULABLE, message, per_node, outcome=outcome
            )
            return
        self.binder.assume_and_bind(e.key, res.assignments, canary=tree.is_gang)
        self.explanations.pop(tree.key, None)
        for node in tree.composites():
            assert node.cpg is not None
            ref_n = (node.kind, node.name)
            if ref_n in res.succeeded:
                self.status.composite_condition(node.cpg, "True", REASON_SCHEDULED, "")
            else:
                text = res.explanations.get(ref_n, "not placed")
                self.status.composite_condition(node.cpg, "False", REASON_UNSCHEDULABLE, text)
        placed = {p.key for p, _ in res.assignments}
        for leaf in tree.leaves():
            assert leaf.group is not None
            ref_l = (leaf.kind, leaf.name)
            if ref_l in res.succeeded:
                self.status.group_condition(leaf.group, "True", REASON_SCHEDULED, "")
                continue
            text = res.explanations.get(ref_l, "not placed")
            self.explanations[leaf.key] = text
            if not any(p.scheduled for p in self.cache.members(leaf.group)):
                self.status.group_condition(leaf.group, "False", REASON_UNSCHEDULABLE, text)
            for p in by_group.get(leaf.key, ()):
                self.status.pod_failed(
                    p, REASON_UNSCHEDULABLE, f'pod group "{leaf.name}" is unschedulable: {text}'
                )
        for p in pending:
            if p.key not in placed and p.group_key is not None:
                leaf_ok = ("PodGroup", p.group_key[1]) in res.succeeded
                diag = res.diagnoses.get(p.req)
                if leaf_ok and diag is not None:
                    self.status.pod_failed(p, REASON_UNSCHEDULABLE, diag.pod_message())
        self.queue.done(e, "success")
        if self._preemption() is not None and any(p.key not in placed for p in pending):
            # As for a flat group (schedule_group): pods of a tree whose cycle succeeded
            # without them (a leaf left out above the root's quorum, a leaf's pods above its
            # minCount, a leaf that grew) are retried at once; that cycle places nothing new,
            # fails and preempts for them, as kube-scheduler v1.37.2's next attempt does.
            self.queue.move(e.key)
        self.enqueuer.refresh_tree(ref, None)
