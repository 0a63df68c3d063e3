"""Workload-aware preemption (KEP-5710): the ``DefaultPreemption`` PodGroupPostFilter plugin.

When a root PodGroup's cycle fails, the plugin looks for *preemption units* of strictly lower
priority anywhere in the cluster (a single pod, or a whole PodGroup whose ``disruptionMode``
is ``all``), removes every one of them from the cycle's snapshot, runs the group's placement
once and, if the quorum then fits, reprieves units in order of importance (most important
first) while the placement found still fits with them back. What is left is preempted: the
:class:`PreemptionHandle` (the scheduler) marks the victims ``DisruptionTarget`` and deletes
them, and nominates the preemptor's pods on the nodes found. The group then waits, without
preempting again, until its victims are gone. Single pods preempt too
(:meth:`DefaultPreemption.preempt_pod`: one node per candidate, as upstream's default
preemption), taking a ``disruptionMode: all`` group only whole.

Beyond upstream (``topology_aware``, the default): a group with a topology constraint
chooses its victims inside one domain, the one whose victims cost least (fewest units, then
lowest highest priority, then fewest pods).

PodDisruptionBudgets (``status.disruptionsAllowed``, see :mod:`._pdb`): units whose
preemption would violate a budget are reprieved first, as upstream; the single-pod path
prefers the node with the fewest violations, the topology-aware choice the domain.

A CompositePodGroup tree preempts the same way (:meth:`DefaultPreemption.choose` with the
tree's placement; a tree with a topology constraint frees one domain of its root's key), and
a tree's pods are victims as one unit under the highest ancestor with ``disruptionMode:
all``, at the priority of the top of their hierarchy.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import Literal, Protocol

import attrs
import numpy as np
import numpy.typing as npt

from workloadbuilder.scheduler._cache import Cache, GroupInfo, GroupKey, PodInfo, PodKey
from workloadbuilder.scheduler._framework import Framework
from workloadbuilder.scheduler._interface import SUCCESS, Code, Placement, SharedLister, Status
from workloadbuilder.scheduler._metrics import (
    PODGROUP_PREEMPTION_ATTEMPTS,
    PODGROUP_PREEMPTION_DURATION,
    PODGROUP_PREEMPTION_VICTIMS,
    PREEMPTION_ATTEMPTS,
    PREEMPTION_VICTIMS,
)
from workloadbuilder.scheduler._pdb import DisruptionBudget, split_by_budget_violation
from workloadbuilder.scheduler._snapshot import Snapshot

__all__ = [
    "DISRUPTION_TARGET",
    "PREEMPTION_REASON",
    "DefaultPreemption",
    "PreemptionHandle",
    "Victim",
    "effective_preemption_policy",
    "is_terminating_by_preemption",
    "start_key",
    "victim_units",
]

#: the pod condition set on victims before they are deleted (upstream's values)
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_REASON = "PreemptionByScheduler"
_NEVER = "Never"


@attrs.frozen
class Victim:
    """A preemption unit: one pod, or every running pod of a ``disruptionMode: all`` group
    (a PodGroup, or the CompositePodGroup subtree of the highest ancestor with ``all``)."""

    kind: Literal["Pod", "PodGroup", "CompositePodGroup"]
    namespace: str
    name: str
    priority: int
    pods: tuple[PodInfo, ...]
    #: when its earliest pod started (:func:`start_key`: the start-time tie-break)
    start: tuple[float, float]

    @property
    def importance(self) -> tuple[int, int, int, tuple[float, float], int]:
        """Sort key, most important first: higher priority, a group before a pod, then pods
        older first, groups more members then older first."""
        if self.kind != "Pod":
            return (-self.priority, 0, -len(self.pods), self.start, 0)
        return (-self.priority, 1, 0, self.start, self.pods[0].seq)


def start_key(p: PodInfo) -> tuple[float, float]:
    """When ``p`` started, for ordering victims (earlier = older = more important): its
    ``status.startTime``; a pod without one counts as started now, after every pod that has
    one (as upstream's ``GetPodStartTime``), and among those the one the scheduler saw
    first is the older."""
    return (p.start_time if p.start_time is not None else float("inf"), p.first_seen)


class PreemptionHandle(Protocol):
    """What the plugin needs of the scheduler (upstream's framework handle and
    ``PodGroupSchedulingFunc``)."""

    def place_group(
        self, group: GroupInfo, snap: Snapshot, placements: Sequence[Placement] | None = None
    ) -> list[tuple[PodInfo, int]] | None:
        """Run the group's placement once on ``snap`` (victims removed), over
        ``placements`` (default: what PlacementGenerate proposes): the assignments ``(pod,
        node row)`` when the quorum fits, else None. ``snap`` is left as it was."""
        ...

    def placements(self, group: GroupInfo, snap: Snapshot) -> list[Placement]:
        """The group's candidate placements (PlacementGenerate; empty on failure)."""
        ...

    def claims_fit(self, snap: Snapshot, assignments: Sequence[tuple[PodInfo, int]]) -> bool:
        """Whether the pods' DRA claims can still be served at their assigned rows (a
        reprieved victim may hold the devices)."""
        ...

    def actuate(
        self,
        group: GroupInfo,
        nominations: Sequence[tuple[PodInfo, str]],
        victims: Sequence[Victim],
        on_failure: Callable[[], None],
    ) -> None:
        """Mark and delete the victims and nominate the preemptor's pods (in the
        background); ``on_failure`` when a victim could not be preempted."""
        ...


def effective_preemption_policy(cache: Cache, group: GroupInfo) -> str:
    """The PodGroup's ``preemptionPolicy`` when set, else its pods', else
    ``PreemptLowerPriority``. (The cycle's validation already requires the pods' policy to
    equal the group's, as kube-scheduler v1.37.2 does: a mismatch is a SchedulerError.)"""
    pg = group.pod_group
    if pg is not None and pg.spec.preemption_policy:
        return pg.spec.preemption_policy
    for p in cache.members(group):
        if p.preemption_policy:
            return p.preemption_policy
    return "PreemptLowerPriority"


def is_terminating_by_preemption(conditions: Sequence[dict[str, object]], deleting: bool) -> bool:
    """A pod being deleted with ``DisruptionTarget`` (``PreemptionByScheduler``)."""
    return deleting and any(
        c.get("type") == DISRUPTION_TARGET
        and c.get("status") == "True"
        and c.get("reason") == PREEMPTION_REASON
        for c in conditions
    )


_UnitKey = tuple[Literal["Pod", "PodGroup", "CompositePodGroup"], str, str]


class _Hierarchy:
    """Per call: each group's preemption unit and priority, walking
    ``parentCompositePodGroupName`` up (memoised)."""

    def __init__(self, cache: Cache) -> None:
        self.cache = cache
        self._memo: dict[GroupKey, tuple[_UnitKey | None, int] | None] = {}

    def of(self, g: GroupInfo) -> tuple[_UnitKey | None, int] | None:
        """``(unit, priority)`` for a pod of ``g``: the unit is the highest level (the
        PodGroup, or a CompositePodGroup above it) with ``disruptionMode: all`` (None: the
        pod is a unit of its own); the priority is the top-most level's (as upstream).
        None: ``g`` has no PodGroup object (the pod's own priority applies)."""
        if g.key in self._memo:
            return self._memo[g.key]
        pg = g.pod_group
        if pg is None:
            self._memo[g.key] = None
            return None
        cache = self.cache
        ns = g.key[0]
        mode = pg.spec.disruption_mode
        unit: _UnitKey | None = ("PodGroup", ns, g.key[1]) if mode and mode.all else None
        prio = cache.group_priority(g)
        for name, cpg in cache.composite_ancestors(ns, pg.spec.parent_composite_pod_group_name):
            prio = cache.resolve_priority(cpg.spec.priority, cpg.spec.priority_class_name)
            cmode = cpg.spec.disruption_mode
            if cmode is not None and cmode.all is not None:
                unit = ("CompositePodGroup", ns, name)
        out = (unit, prio)
        self._memo[g.key] = out
        return out


def _unit_priority(cache: Cache, p: PodInfo, h: _Hierarchy | None = None) -> int:
    g = cache.groups.get(p.group_key) if p.group_key is not None else None
    got = (h or _Hierarchy(cache)).of(g) if g is not None else None
    return got[1] if got is not None else cache.pod_priority(p)


def victim_units(
    cache: Cache, below: int, exclude: GroupKey | frozenset[GroupKey] | None = None
) -> list[Victim]:
    """Every preemption unit of priority strictly below ``below``: running (bound or
    assumed, not terminating) pods, a ``disruptionMode: all`` group (for a tree: the
    highest ancestor with ``all``) as one unit. Pods of the ``exclude`` groups (the
    preemptor's) are never victims. Only the running pods below ``below`` are visited
    (:meth:`Cache.running_below`): with nothing of lower priority running, no pod is."""
    candidates = cache.running_below(below)
    if not candidates:
        return []
    skip = frozenset((exclude,)) if isinstance(exclude, tuple) else exclude or frozenset()
    h = _Hierarchy(cache)
    singles: list[Victim] = []
    groups: dict[_UnitKey, list[PodInfo]] = {}
    prio_of: dict[_UnitKey, int] = {}
    for p in candidates:
        if p.counted_node is None or p.deleting:
            continue
        gk = p.group_key
        if gk is not None and gk in skip:
            continue
        g = cache.groups.get(gk) if gk is not None else None
        got = h.of(g) if g is not None else None
        prio = got[1] if got is not None else cache.pod_priority(p)
        if prio >= below:
            continue
        unit = got[0] if got is not None else None
        if unit is not None:
            groups.setdefault(unit, []).append(p)
            prio_of[unit] = prio
            continue
        singles.append(Victim("Pod", p.namespace, p.name, prio, (p,), start_key(p)))
    units = singles
    for key, pods in groups.items():
        pods.sort(key=lambda q: (start_key(q), q.seq))
        start = start_key(pods[0])
        units.append(Victim(key[0], key[1], key[2], prio_of[key], tuple(pods), start))
    units.sort(key=lambda v: v.importance)
    return units


class DefaultPreemption:
    """PodGroupPostFilter: pod-group preemption over the whole cluster (one domain), as
    kube-scheduler v1.37's ``PodGroupEvaluator``."""

    name = "DefaultPreemption"

    def __init__(self, *, topology_aware: bool = True) -> None:
        #: for a group with a topology constraint, choose the victims of the one domain
        #: that costs least (ours); False: one placement over every domain at once, the
        #: best-scored one (kube-scheduler v1.37.2)
        self.topology_aware = topology_aware
        #: set by the scheduler when ``SchedulerConfig.preemption`` is on
        self.handle: PreemptionHandle | None = None
        #: preemptor group -> the victims it chose that may still exist (key, uid)
        self.waiting: dict[GroupKey, set[tuple[PodKey, str]]] = {}
        #: the same for single pods
        self.waiting_pods: dict[PodKey, set[tuple[PodKey, str]]] = {}
        #: the same for CompositePodGroup trees (by root)
        self.waiting_trees: dict[GroupKey, set[tuple[PodKey, str]]] = {}

    def set_handle(self, handle: PreemptionHandle) -> None:
        """Wire the plugin to its scheduler."""
        self.handle = handle

    # ---- single pods (upstream's default preemption: one node per candidate) ------------

    def preempt_pod(
        self, fw: Framework, snap: Snapshot, pod: PodInfo
    ) -> tuple[str, list[Victim]] | str | None:
        """For a single pod that fits nowhere: ``(node, victims)`` to preempt, a reason it
        may not (``str``), or None when no victims would help. A unit of a
        ``disruptionMode: all`` group goes whole (its pods on other nodes too)."""
        PREEMPTION_ATTEMPTS.inc()
        cache = snap.cache
        if pod.preemption_policy == _NEVER:
            return "not eligible to preempt: preemptionPolicy Never"
        chosen_before = self.waiting_pods.get(pod.key)
        if chosen_before:
            for key, uid in list(chosen_before):
                q = cache.pods.get(key)
                if q is None or q.uid != uid:
                    chosen_before.discard((key, uid))
            if chosen_before:
                n = len(chosen_before)
                return f"waiting for {n} victim{'' if n == 1 else 's'} to terminate"
            del self.waiting_pods[pod.key]
        prio = cache.pod_priority(pod)
        units = victim_units(cache, prio)
        if not units:
            return None
        table = snap.table
        static = fw.run_static_filters(pod.req, table)
        vec = table.vector(pod.req.requests)
        by_row: dict[int, list[Victim]] = {}
        for u in units:  # most important first, kept per row
            for row in sorted({q.counted_node for q in u.pods if q.counted_node is not None}):
                by_row.setdefault(row, []).append(u)
        best: tuple[tuple[int, int, int, int, tuple[float, float], int], list[Victim]] | None
        best = None
        best_row = -1
        budgets = cache.budget_list()
        reserving, removable = fw.split_pods_removable(fw.reserving(pod))
        no_devices = 0  # candidate rows where the pod's claims cannot be allocated

        def fits() -> bool:
            return fw.run_usage_filters_one(pod.req, vec, table, row) and (
                not removable or fw.run_reserve_fits(removable, pod, snap, row)
            )

        for row, here in sorted(by_row.items()):
            if not static[row]:
                continue
            # DRA, as kube-scheduler v1.37.2: a node where the pod's claims cannot be
            # allocated now is not a candidate (its DynamicResources Filter failure is
            # UnschedulableAndUnresolvable, and it has no PreFilterExtensions, so removing
            # victims frees none of their devices)
            if reserving and not fw.run_reserve_fits(reserving, pod, snap, row):
                no_devices += 1
                continue
            mark = snap.mark()
            try:
                for u in here:
                    for q in u.pods:
                        snap.remove(q)
                # host ports, anti-affinity and spread see the victims removed
                if not fits():
                    continue
                chosen: list[Victim] = []
                violations = 0
                violating, fine = split_by_budget_violation(here, budgets)
                # PDB-violating units are reprieved first, then the rest (most important first)
                for u, n in [*violating, *((u, 0) for u in fine)]:
                    _add_back(snap, u.pods)
                    if fits():
                        continue
                    for q in u.pods:
                        snap.remove(q)
                    chosen.append(u)
                    violations += n
            finally:
                snap.revert(mark)
            if not chosen:
                continue
            chosen.sort(key=lambda v: v.importance)
            # upstream's pickOneNodeForPreemption: fewest PDB violations, lowest highest
            # victim priority, lowest sum of priorities (each offset by 2^31, as upstream:
            # so more victims weigh more), fewest victims, the latest-started highest-
            # priority victims, then the first node
            top = max(v.priority for v in chosen)
            cost = (
                violations,
                top,
                sum((v.priority + 2**31) * len(v.pods) for v in chosen),
                sum(len(v.pods) for v in chosen),
                _later_first(min(v.start for v in chosen if v.priority == top)),
                row,
            )
            if best is None or cost < best[0]:
                best, best_row = (cost, chosen), row
        if best is None:
            if no_devices:
                return (
                    f"the pod's resource claims cannot be allocated on {_n(no_devices, 'node')} "
                    "with lower-priority pods (a single pod's preemption frees no devices)"
                )
            return None
        victims = best[1]
        self.waiting_pods[pod.key] = {(q.key, q.uid) for v in victims for q in v.pods}
        PREEMPTION_VICTIMS.observe(sum(len(v.pods) for v in victims))
        return snap.node_name(best_row), victims

    def forget(self, key: GroupKey) -> None:
        """Stop waiting for the victims of ``key`` (their preemption failed)."""
        self.waiting.pop(key, None)

    def forget_tree(self, key: GroupKey) -> None:
        """Stop waiting for the victims of the tree rooted at ``key``."""
        self.waiting_trees.pop(key, None)

    def forget_pod(self, key: PodKey) -> None:
        """Stop waiting for the victims of the single pod ``key``."""
        self.waiting_pods.pop(key, None)

    def _still_there(
        self,
        cache: Cache,
        waiting: dict[GroupKey, set[tuple[PodKey, str]]],
        key: GroupKey,
        members: Sequence[PodInfo],
        prio: int,
    ) -> int:
        """How many victims the preemptor ``key`` chose still exist."""
        chosen = waiting.get(key)
        if chosen:
            for pk, uid in list(chosen):
                p = cache.pods.get(pk)
                if p is None or p.uid != uid:
                    chosen.discard((pk, uid))
            if not chosen:
                del waiting[key]
        n = len(waiting.get(key, ()))
        if n:
            return n
        # after a restart: lower-priority pods terminating by preemption on nominated nodes
        nodes: set[str] = set()
        for p in members:
            node = cache.nominations.get(p.key) or p.nominated_node
            if node:
                nodes.add(node)
        if not nodes:
            return 0
        h = _Hierarchy(cache)
        return sum(
            1
            for p in cache.pods.values()
            if (p.node_name or p.assumed_node) in nodes
            and is_terminating_by_preemption(p.conditions, p.deleting)
            and _unit_priority(cache, p, h) < prio
        )

    def post_filter(self, group: GroupInfo, lister: SharedLister, message: str) -> Status:
        """Choose victims and have them preempted; ``Success`` when room is being made."""
        if self.handle is None or not isinstance(lister, Snapshot):
            return Status(code=Code.UNSCHEDULABLE)
        snap = lister
        cache = snap.cache
        handle = self.handle
        prio = cache.group_priority(group)
        pg = group.pod_group
        constrained = pg is not None and bool(
            pg.spec.scheduling_constraints and pg.spec.scheduling_constraints.topology
        )

        def place(placements: Sequence[Placement] | None) -> list[tuple[PodInfo, int]] | None:
            return handle.place_group(group, snap, placements)

        def domains() -> list[Placement]:
            return [pl for pl in handle.placements(group, snap) if pl.domain]

        got = self.choose(
            snap,
            key=group.key,
            waiting=self.waiting,
            policy=effective_preemption_policy(cache, group),
            priority=prio,
            members=list(cache.members(group)),
            exclude=frozenset((group.key,)),
            place=place,
            domains=domains if constrained else None,
        )
        if isinstance(got, Status):
            return got
        chosen, assignments, text = got
        nominations = [(p, snap.node_name(row)) for p, row in assignments]
        key = group.key
        handle.actuate(group, nominations, chosen, lambda: self.forget(key))
        return attrs.evolve(SUCCESS, message=text)

    def choose(
        self,
        snap: Snapshot,
        *,
        key: GroupKey,
        waiting: dict[GroupKey, set[tuple[PodKey, str]]],
        policy: str,
        priority: int,
        members: Sequence[PodInfo],
        exclude: frozenset[GroupKey],
        place: Callable[[Sequence[Placement] | None], list[tuple[PodInfo, int]] | None],
        domains: Callable[[], list[Placement]] | None,
    ) -> Status | tuple[list[Victim], list[tuple[PodInfo, int]], str]:
        """The preemption decision of a pod group or a CompositePodGroup tree ``key``:
        ``(victims, the preemptor's assignments, a message)``, or an ``Unschedulable``
        status saying why not. ``place(placements)`` runs the preemptor's placement once on
        ``snap`` (over ``placements``, default all); ``domains`` (a topology-constrained
        preemptor, topology-aware choice) lists its candidate domains. The victims are
        recorded as ``waiting[key]``."""
        cache = snap.cache
        if policy == _NEVER:
            return Status(
                code=Code.UNSCHEDULABLE, message="not eligible to preempt: preemptionPolicy Never"
            )
        pending = self._still_there(cache, waiting, key, members, priority)
        if pending:
            s = "" if pending == 1 else "s"
            return Status(
                code=Code.UNSCHEDULABLE,
                message=f"waiting for {pending} victim{s} to terminate",
            )
        units = victim_units(cache, priority, exclude=exclude)
        if not units:
            return Status(code=Code.UNSCHEDULABLE)  # nothing to say: "no lower-priority units"
        PODGROUP_PREEMPTION_ATTEMPTS.inc()
        t0 = time.perf_counter()
        try:
            chosen, assignments = self._select(snap, units, place, domains)
        finally:
            PODGROUP_PREEMPTION_DURATION.observe(time.perf_counter() - t0)
        if chosen is None:
            n = sum(len(u.pods) for u in units)
            return Status(
                code=Code.UNSCHEDULABLE,
                message=(
                    f"preemption would not help: the quorum does not fit even without the "
                    f"{len(units)} lower-priority units ({n} pods)"
                ),
            )
        if not chosen:
            return Status(code=Code.UNSCHEDULABLE)
        pods = [p for v in chosen for p in v.pods]
        PODGROUP_PREEMPTION_VICTIMS.observe(len(pods))
        waiting[key] = {(p.key, p.uid) for p in pods}
        names = ", ".join(f"{v.kind} {v.namespace}/{v.name}" for v in chosen)
        text = f"preempting {_n(len(chosen), 'unit')} ({_n(len(pods), 'pod')}): {names}"
        return chosen, assignments, text

    def _select(
        self,
        snap: Snapshot,
        units: Sequence[Victim],
        place: Callable[[Sequence[Placement] | None], list[tuple[PodInfo, int]] | None],
        domains: Callable[[], list[Placement]] | None,
    ) -> tuple[list[Victim] | None, list[tuple[PodInfo, int]]]:
        """The victims (None: preemption cannot help) and the preemptor's assignments."""
        budgets = snap.cache.budget_list()
        if not (self.topology_aware and domains is not None):
            chosen, assignments, _ = self._select_in(snap, units, lambda: place(None), budgets)
            return chosen, assignments
        mark = snap.mark()
        for u in units:
            for p in u.pods:
                snap.remove(p)
        candidates = domains()
        snap.revert(mark)
        best: tuple[tuple[int, int, int, int, str], list[Victim], list[tuple[PodInfo, int]]] | None
        best = None
        for pl in candidates:  # one domain at a time: the cheapest victims win
            chosen, assignments, violations = self._select_in(
                snap, units, functools.partial(place, [pl]), budgets
            )
            if chosen is None:
                continue
            cost = (
                violations,
                len(chosen),
                max((v.priority for v in chosen), default=-(2**31)),
                sum(len(v.pods) for v in chosen),
                pl.name,
            )
            if best is None or cost < best[0]:
                best = (cost, chosen, assignments)
        if best is None:
            return None, []
        return best[1], best[2]

    def _select_in(
        self,
        snap: Snapshot,
        units: Sequence[Victim],
        place: Callable[[], list[tuple[PodInfo, int]] | None],
        budgets: Sequence[DisruptionBudget],
    ) -> tuple[list[Victim] | None, list[tuple[PodInfo, int]], int]:
        """Remove every unit, place once, reprieve the PDB-violating units first, then the
        others, most important first: ``(victims, assignments, PDB violations)``."""
        assert self.handle is not None
        handle = self.handle
        table = snap.table
        mark = snap.mark()
        try:
            for u in units:
                for p in u.pods:
                    snap.remove(p)
            assignments = place()
            if assignments is None:
                return None, [], 0
            load = np.zeros_like(table.used)
            for p, row in assignments:
                load[row] += table.vector(p.req.requests)
            need = load > 0
            chosen: list[Victim] = []
            violations = 0
            violating, fine = split_by_budget_violation(units, budgets)
            for u, n in [*violating, *((u, 0) for u in fine)]:
                rows = _add_back(snap, u.pods)
                if _fits(table.used, table.alloc, load, need, rows) and handle.claims_fit(
                    snap, assignments
                ):
                    continue
                for p in u.pods:  # not reprieved: take it out again
                    snap.remove(p)
                chosen.append(u)
                violations += n
            chosen.sort(key=lambda v: v.importance)
            return chosen, assignments, violations
        finally:
            snap.revert(mark)


def _later_first(start: tuple[float, float]) -> tuple[float, float]:
    """A sort key under which the later of two :func:`start_key` values comes first."""
    return (-start[0], -start[1])


def _n(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _add_back(snap: Snapshot, pods: Sequence[PodInfo]) -> list[int]:
    rows: list[int] = []
    for p in pods:
        row = p.counted_node
        if row is None:
            continue
        snap.assume(p, row, snap.table.vector(p.req.requests))
        rows.append(row)
    return rows


def _fits(
    used: npt.NDArray[np.int64],
    alloc: npt.NDArray[np.int64],
    load: npt.NDArray[np.int64],
    need: npt.NDArray[np.bool_],
    rows: Sequence[int],
) -> bool:
    """The preemptor's pods still fit on ``rows`` (each resource they request)."""
    for row in set(rows):
        over = (used[row] + load[row] > alloc[row]) & need[row]
        if bool(over.any()):
            return False
    return True
