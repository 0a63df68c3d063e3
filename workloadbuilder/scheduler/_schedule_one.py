"""Schedule one entity (kube-scheduler's ``schedule_one.go`` and
``schedule_one_podgroup.go``): a single pod, a pod group all-or-nothing, or a
CompositePodGroup tree, on a fresh :class:`~._snapshot.Snapshot`.

Each attempt is two steps, as upstream's ``podGroupSchedulingAlgorithm`` ->
``submitPodGroupAlgorithmResult``: the pod, group and tree *algorithms* here compute one
:mod:`~workloadbuilder.scheduler._result` value (bind these placements, nominate and preempt
victims, unschedulable with a message, an error, requeue, nothing to do), and the *submit*
step (:class:`~workloadbuilder.scheduler._submit.Submit`) applies it: bind, nominate,
preempt, requeue, write the status, ``queue.done``. PodGroupPostFilter plugins still act
through the handle below during the algorithm (DefaultPreemption actuates its victims
there)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
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
from workloadbuilder.scheduler._result import (
    CompositeResult,
    GroupBind,
    GroupError,
    GroupResult,
    GroupUnschedulable,
    NothingToDo,
    PodBind,
    PodResult,
    PodUnschedulable,
    Preempt,
    Requeue,
    TreeBind,
    TreeError,
    TreeInvalid,
    TreeUnschedulable,
)
from workloadbuilder.scheduler._snapshot import Snapshot
from workloadbuilder.scheduler._status import StatusWriter
from workloadbuilder.scheduler._submit import Submit
from workloadbuilder.scheduler._tree import TreeNode, build_tree, find_root

__all__ = ["ScheduleOne"]

_log = logging.getLogger(__name__)

# the results that carry nothing of the attempt are shared, not allocated per attempt
_NOTHING = NothingToDo()
_NOTHING_REFRESH_GROUP = NothingToDo("group")
_NOTHING_REFRESH_NAMESPACE = NothingToDo("namespace")
_REQUEUE_GROUP = Requeue()


class ScheduleOne(Submit):
    """One scheduling attempt per popped queue entity: an algorithm computes its result,
    :meth:`~workloadbuilder.scheduler._submit.Submit.submit` applies it.

    ``frameworks``: the profiles served, by schedulerName. Each attempt runs the framework of
    its entity's profile (kube-scheduler's ``frameworkForPod`` / ``frameworkForPodGroup``: a
    pod's ``spec.schedulerName``, a group's or tree's first pending pod's); it is
    :attr:`framework` while the attempt (and the plugins' handle calls in it) runs."""

    def __init__(
        self,
        cache: Cache,
        queue: SchedulingQueue,
        frameworks: Mapping[str, Framework],
        enqueuer: Enqueuer,
        binder: Binder,
        status: StatusWriter,
        config: SchedulerConfig,
    ) -> None:
        self.cache = cache
        self.queue = queue
        self.frameworks = frameworks
        #: the framework of the attempt in progress (the first profile's between attempts)
        self.framework = next(iter(frameworks.values()))
        self.enqueuer = enqueuer
        self.binder = binder
        self.status = status
        self.config = config
        #: ``(namespace, podgroup)`` -> the last Unschedulable / SchedulerError message
        self.explanations: dict[tuple[str, str], str] = {}
        #: the group cycle in progress: (group key, pending pods, already scheduled)
        self._cycle: tuple[tuple[str, str], list[PodInfo], int] | None = None
        if config.preemption:
            for fw in frameworks.values():
                fw.set_handle(self)

    def _use(self, p: PodInfo) -> Framework:
        """Run the attempt with the framework of ``p``'s profile (a pending pod: served)."""
        fw = self.frameworks.get(p.scheduler_name)
        if fw is not None:
            self.framework = fw
        return self.framework

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
        self._actuate(
            f"pod group {group.namespace}/{group.name}",
            nominations,
            victims,
            on_failure,
            nominations[0][0].scheduler_name if nominations else None,
        )

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
    ) -> tuple[str | None, Preempt | None]:
        """Workload-aware preemption for a CompositePodGroup tree whose cycle failed (as
        kube-scheduler v1.37.2 does for a root CompositePodGroup): the message to append
        (``DefaultPreemption: preempting ...`` when victims are chosen), or None; and the
        victims to preempt (by the submit step), or None."""
        plugin = self._preemption()
        cpg = tree.cpg
        if plugin is None or cpg is None:
            return None, None
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
            return got.message or None, None
        victims, assignments, text = got
        nominations = [(p, snap.node_name(row)) for p, row in assignments]
        root_key = tree.key
        preempt = Preempt(
            f"composite pod group {tree.namespace}/{tree.name}",
            nominations,
            victims,
            lambda: plugin.forget_tree(root_key),
            profile=nominations[0][0].scheduler_name if nominations else None,
        )
        return f"{DefaultPreemption.name}: {text}", preempt

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
        self.submit(e, self._pod_algorithm(e))

    def _pod_algorithm(self, e: QueuedEntity) -> PodResult:
        key = (e.key[1], e.key[2])
        p = self.cache.pods.get(key)
        if p is None or p.group is not None or not self.enqueuer.is_pending(p):
            return _NOTHING
        t0 = time.perf_counter()
        fw = self._use(p)
        snap = Snapshot(self.cache)
        self._reserve_nominated(snap, self.cache.pod_priority(p), None, p.key)
        res = run_pod_group_cycle(fw, snap, [p], min_count=1, scheduled=0, gang=False)
        snap.revert()
        result = "scheduled" if res.status.ok else "unschedulable"
        ATTEMPT_DURATION.labels(result=result, profile=p.scheduler_name).observe(
            time.perf_counter() - t0
        )
        POD_ATTEMPTS.labels(result=result, profile=p.scheduler_name).inc()
        if res.status.ok:
            return PodBind(res)
        preempt: Preempt | None = None
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
                who = f"pod {p.namespace}/{p.name}"  # the submit step preempts the victims
                preempt = Preempt(
                    who,
                    ((p, node),),
                    victims,
                    lambda: plugin.forget_pod(key),
                    single_pod=True,
                    profile=p.scheduler_name,
                )
                outcome = "error"  # room is being made: retry after the backoff
        snap.revert()
        return PodUnschedulable(p, message, preempt, error=outcome == "error")

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

    def schedule_group(self, e: QueuedEntity) -> None:
        """The pod-group cycle: every pending member at once, all-or-nothing to minCount."""
        self.submit(e, self._group_algorithm(e))

    def _group_algorithm(self, e: QueuedEntity) -> GroupResult:
        gk = (e.key[1], e.key[2])
        g = self.cache.groups.get(gk)
        members = [p for p in self.cache.members(g)] if g is not None else []
        pending = [p for p in members if self.enqueuer.is_pending(p)]
        if g is None or not pending:
            return _NOTHING
        if g.pod_group is not None and g.pod_group.spec.parent_composite_pod_group_name:
            return _NOTHING_REFRESH_GROUP  # scheduled with its tree's root
        self._use(self.enqueuer.first_pending(pending) or pending[0])
        st = self.framework.run_pre_enqueue(g, self.cache)
        if not st.ok:
            _log.debug("pod group %s/%s waiting: %s", *gk, st.message)
            return _REQUEUE_GROUP
        live = [p for p in members if not p.deleting and self.cache.visible(p)]
        error = self._validate_group(g, live)
        if error is not None:
            PODGROUP_ATTEMPTS.labels(result="error").inc()
            return GroupError(g, error, pending)
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
            return GroupUnschedulable(g, message, ())  # the group only: no pod is told
        t0 = time.perf_counter()
        snap = Snapshot(self.cache)
        self._reserve_nominated(snap, self.cache.group_priority(g), gk)
        placements = self.framework.run_placement_generate(g, snap)
        if isinstance(placements, Status):
            if placements.code is Code.ERROR:
                snap.revert()
                PODGROUP_ATTEMPTS.labels(result="error").inc()
                return GroupError(g, placements.message, pending)
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
            return GroupBind(
                g,
                res,
                canary=g.is_gang and scheduled < g.min_count,
                # pods left behind are retried at once only when preemption may help them
                retry=bool(res.unplaced) and self._preemption() is not None,
            )
        message = res.explanation or res.status.message
        error_ = False
        if post is not None:
            if post.ok:
                error_ = True  # room is being made (victims nominated): retry after backoff
                if post.message:
                    message = f"{message}; {post.plugin}: {post.message}"
            elif post.code is Code.ERROR:
                _log.warning("PodGroupPostFilter %s for %s/%s: %s", post.plugin, *gk, post.message)
                error_ = True
            elif post.message:
                message = f"{message}; {post.message}"
        return GroupUnschedulable(
            g, message, pending, condition=scheduled < g.min_count, error=error_
        )

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

    def schedule_tree(self, e: QueuedEntity) -> None:
        """The cycle of a CompositePodGroup tree: top-down, all-or-nothing to the root's
        ``minGroupCount`` (see ``workloadbuilder.scheduler._composite``)."""
        self.submit(e, self._tree_algorithm(e))

    def _tree_algorithm(self, e: QueuedEntity) -> CompositeResult:
        ns, root = e.key[1], e.key[2]
        ref = find_root(self.cache, ns, "CompositePodGroup", root)
        if ref.name != root or ref.waiting:
            return _NOTHING_REFRESH_NAMESPACE
        tree = build_tree(self.cache, ns, root) if not ref.invalid else ref.invalid
        if isinstance(tree, str):
            PODGROUP_ATTEMPTS.labels(result="error").inc()
            return TreeInvalid(ns, root, tree)
        members = list(tree.members(self.cache))
        pending = [p for p in members if self.enqueuer.is_pending(p)]
        if not pending:
            return _NOTHING
        self._use(self.enqueuer.first_pending(pending) or pending[0])
        st = self.framework.run_pre_enqueue_tree(tree, self.cache)
        if not st.ok:
            return Requeue(ref)
        live = [p for p in members if not p.deleting and self.cache.visible(p)]
        error = self._validate_tree(tree, live)
        if error is not None:
            PODGROUP_ATTEMPTS.labels(result="error").inc()
            return TreeError(tree, error, pending)
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
        preempt: Preempt | None = None
        if not res.ok:
            preempted, preempt = self._preempt_for_tree(tree, snap, members, by_group, scheduled)
        snap.revert()
        result = "scheduled" if res.ok else "unschedulable"
        PODGROUP_ATTEMPT_DURATION.labels(result=result).observe(time.perf_counter() - t0)
        PODGROUP_ATTEMPTS.labels(result=result).inc()
        if res.ok:
            return TreeBind(tree, ref, res, pending, by_group, self._preemption() is not None)
        message = res.explanations.get(root_ref, "the tree does not fit")
        error_ = False
        per_node = res.explanations
        if preempted is not None:
            message = f"{message}; {preempted}"
            # every level's condition says what preemption does for the tree
            per_node = {k: f"{v}; {preempted}" for k, v in per_node.items()}
            if preempted.startswith(f"{DefaultPreemption.name}: preempting"):
                error_ = True  # room is being made: retry after the backoff
        return TreeUnschedulable(tree, message, pending, per_node, preempt, error_)
