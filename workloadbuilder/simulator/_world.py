"""The simulated cluster's state as the simulator records it: the pods (when they were
created, bound, finished, deleted, where they ran), the PodGroups and CompositePodGroups (their
policy, tree and status), the nodes, and the counts the loop and the invariants read.

The engine (:mod:`._engine`) changes it from what it does and what it observes; the invariants
(:mod:`._invariants`) and the result (:mod:`._assembly`) only read it. Nothing here talks to
the cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from workloadbuilder.api import CompositePodGroup, PodGroup, Workload
from workloadbuilder.cluster import KubeObject
from workloadbuilder.simulator._controllers import JobRun
from workloadbuilder.simulator._result import NodeRecord, PodRecord
from workloadbuilder.simulator._scenario import DURATION_ANNOTATION, ScenarioObject
from workloadbuilder.simulator._units import parse_duration

__all__ = [
    "Children",
    "CompositeState",
    "GroupState",
    "Key",
    "PodState",
    "World",
]

#: (namespace, name)
Key = tuple[str, str]
#: CompositePodGroup -> its children (``("group" | "composite", key)``)
Children = dict[Key, list[tuple[str, Key]]]

_CONDITION = "PodGroupInitiallyScheduled"
_COMPOSITE_CONDITION = "CompositePodGroupInitiallyScheduled"
#: deeper composite trees are cycles (the scheduler marks them Invalid)
_MAX_DEPTH = 8


@attrs.define(kw_only=True)
class PodState:
    """One pod as the simulation recorded it (times in simulation seconds)."""

    namespace: str
    name: str
    group: str | None
    owner: str
    created: float
    duration: float | None
    ours: bool
    requests: dict[str, float]
    run: JobRun | None = None
    origin: ScenarioObject | None = None
    node: str | None = None
    bound: float | None = None
    finished: float | None = None
    deleted: float | None = None
    preassigned: bool = False
    #: the manifest it was created from (a controller recreates a preempted pod from it)
    doc: dict[str, Any] | None = None
    priority: int | None = None
    preempted: float | None = None


@attrs.define(kw_only=True)
class GroupState:
    """One PodGroup as the simulation recorded it."""

    namespace: str
    name: str
    owner: str
    arrival: float
    policy: str = "basic"
    min_count: int | None = None
    priority: int | None = None
    scheduled_at: float | None = None
    initially_scheduled: bool = False
    reason: str | None = None
    message: str | None = None
    wait_message: str | None = None
    duration: float | None = None
    quorum_at: float | None = None
    template: str | None = None
    parent: str | None = None
    key: str | None = None
    deleted: float | None = None
    preempted_at: list[float] = attrs.field(factory=list)


@attrs.define(kw_only=True)
class CompositeState:
    """One CompositePodGroup as the simulation recorded it."""

    namespace: str
    name: str
    owner: str
    arrival: float
    policy: str = "basic"
    min_group_count: int | None = None
    template: str | None = None
    parent: str | None = None
    key: str | None = None
    initially_scheduled: bool = False
    scheduled_at: float | None = None
    reason: str | None = None
    message: str | None = None
    deleted: float | None = None


def _topology_key(constraints: Any) -> str | None:
    if constraints is None or not constraints.topology:
        return None
    return str(constraints.topology[0].key)


def update_group(state: GroupState, pg: PodGroup, t: float) -> None:
    """Copy what ``pg`` says (policy, tree, topology key, priority, the
    ``PodGroupInitiallyScheduled`` condition) into ``state``, seen at ``t``."""
    state.template = pg.spec.workload_ref.template_name if pg.spec.workload_ref else None
    state.parent = pg.spec.parent_composite_pod_group_name
    state.key = _topology_key(pg.spec.scheduling_constraints)
    policy = pg.spec.scheduling_policy
    if policy.gang is not None:
        state.policy = "gang"
        state.min_count = policy.gang.min_count
    else:
        state.policy = "basic"
        state.min_count = None
    if pg.spec.priority is not None:
        state.priority = pg.spec.priority
    conditions = pg.status.conditions if pg.status is not None else ()
    for c in conditions:
        if c.type != _CONDITION:
            continue
        state.reason = c.reason
        if c.status == "True":
            if not state.initially_scheduled:
                state.initially_scheduled = True
                state.scheduled_at = t
            state.message = c.message or None
        else:
            state.message = c.message or state.message
            if c.message:
                state.wait_message = c.message


def update_composite(state: CompositeState, cpg: CompositePodGroup, t: float) -> None:
    """Copy what ``cpg`` says (policy, tree, topology key, the
    ``CompositePodGroupInitiallyScheduled`` condition) into ``state``, seen at ``t``."""
    policy = cpg.spec.scheduling_policy
    state.policy = "gang" if policy.gang is not None else "basic"
    state.min_group_count = policy.gang.min_group_count if policy.gang is not None else None
    state.template = cpg.spec.workload_ref.template_name
    state.parent = cpg.spec.parent_composite_pod_group_name
    state.key = _topology_key(cpg.spec.scheduling_constraints)
    for c in cpg.status.conditions if cpg.status is not None else ():
        if c.type != _COMPOSITE_CONDITION:
            continue
        state.reason = c.reason
        state.message = c.message or state.message
        if c.status == "True" and not state.initially_scheduled:
            state.initially_scheduled = True
            state.scheduled_at = t


class World:
    """What the simulation recorded so far (see the module docstring)."""

    def __init__(self) -> None:
        self.pods: dict[Key, PodState] = {}
        self.groups: dict[Key, GroupState] = {}
        self.composites: dict[Key, CompositeState] = {}
        self.nodes: dict[str, NodeRecord] = {}
        #: PodGroup -> its pods, in creation order (deleted ones too)
        self.members: dict[Key, list[PodState]] = {}
        #: PodGroup -> live pods the scenario bound itself (``spec.nodeName``)
        self.prebound: dict[Key, int] = {}
        #: PodGroup -> live pods of ours the scheduler bound
        self.bound_count: dict[Key, int] = {}
        #: gangs that lost pods to preemption since their last binding (the gang invariant
        #: applies again when the scheduler binds their pods)
        self.shrunk: set[Key] = set()
        self.unbound: set[Key] = set()
        self.running: set[Key] = set()
        #: pods deleted so far
        self.deleted = 0

    # -- pods ---------------------------------------------------------------------------------

    def add_pod(self, st: PodState, node: str | None, t: float) -> None:
        """Record a new pod; ``node``: the scenario bound it itself at creation."""
        key = (st.namespace, st.name)
        self.pods[key] = st
        if st.group:
            self.members.setdefault((st.namespace, st.group), []).append(st)
        if node:
            st.node, st.bound = str(node), t
            if st.group:
                gkey = (st.namespace, st.group)
                self.prebound[gkey] = self.prebound.get(gkey, 0) + 1
        else:
            self.unbound.add(key)

    def prebind(self, st: PodState, node: str, t: float) -> None:
        """The scenario bound ``st`` itself (an update setting ``spec.nodeName``)."""
        st.node, st.bound, st.preassigned, st.ours = node, t, True, False
        self.unbound.discard((st.namespace, st.name))
        if st.group:
            gkey = (st.namespace, st.group)
            self.prebound[gkey] = self.prebound.get(gkey, 0) + 1

    def bind(self, st: PodState, node: str, t: float) -> Key | None:
        """The scheduler bound ``st`` to ``node`` at ``t``; returns its PodGroup's key."""
        self.unbound.discard((st.namespace, st.name))
        st.node = node
        st.bound = t
        if not st.group:
            return None
        gkey = (st.namespace, st.group)
        self.shrunk.discard(gkey)
        if st.ours:
            self.bound_count[gkey] = self.bound_count.get(gkey, 0) + 1
        return gkey

    def finish(self, st: PodState, t: float) -> None:
        """``st`` succeeded at ``t``."""
        st.finished = t
        self.running.discard((st.namespace, st.name))

    def vanished(self, st: PodState, t: float) -> None:
        """``st`` is gone from the cluster since ``t`` (deleted, preempted, collected)."""
        key = (st.namespace, st.name)
        st.deleted = t
        self.deleted += 1
        self.unbound.discard(key)
        self.running.discard(key)
        if st.node is not None and st.ours and st.group:
            gkey = (st.namespace, st.group)
            self.bound_count[gkey] = self.bound_count.get(gkey, 1) - 1
            if st.preempted is not None:
                self.shrunk.add(gkey)
        elif st.node is not None and st.preassigned and st.group:
            gkey = (st.namespace, st.group)
            self.prebound[gkey] = self.prebound.get(gkey, 1) - 1

    def anything_pending(self) -> bool:
        """A pod of ours waits for a node."""
        return any(p.ours and p.bound is None and p.deleted is None for p in self.pods.values())

    def mark_preempted(self, states: Iterable[PodState], t: float) -> None:
        """Note on their PodGroups that ``states`` were preempted at ``t``."""
        for st in states:
            if st.group and (st.namespace, st.group) in self.groups:
                g = self.groups[(st.namespace, st.group)]
                if not g.preempted_at or g.preempted_at[-1] != t:
                    g.preempted_at.append(t)

    # -- scheduling objects -------------------------------------------------------------------

    def register(
        self,
        stored: Workload | PodGroup | CompositePodGroup,
        t: float,
        *,
        owner: str,
        namespace: str,
    ) -> None:
        """Start recording a new PodGroup or CompositePodGroup."""
        if isinstance(stored, PodGroup):
            ns = stored.metadata.namespace or namespace
            name = stored.metadata.name or ""
            duration = None
            if stored.metadata.annotations.get(DURATION_ANNOTATION):
                try:
                    duration = parse_duration(stored.metadata.annotations[DURATION_ANNOTATION])
                except ValueError:
                    duration = None
            state = GroupState(
                namespace=ns,
                name=name,
                owner=owner,
                arrival=t,
                priority=stored.spec.priority,
                duration=duration,
            )
            update_group(state, stored, t)
            self.groups[(ns, name)] = state
        elif isinstance(stored, CompositePodGroup):
            ns = stored.metadata.namespace or namespace
            name = stored.metadata.name or ""
            cstate = CompositeState(namespace=ns, name=name, owner=owner, arrival=t)
            update_composite(cstate, stored, t)
            self.composites[(ns, name)] = cstate

    def absorb(
        self,
        written: Iterable[KubeObject],
        removed: Iterable[tuple[str, str, str]],
        t: float,
        owner_of: Callable[[PodGroup | CompositePodGroup], str],
    ) -> None:
        """Record the PodGroups and CompositePodGroups the Reconcilers wrote (new ones are
        registered with ``owner_of`` them) and deleted (``(kind, namespace, name)``)."""
        for item in written:
            if not isinstance(item, (PodGroup, CompositePodGroup)):
                continue
            key = (item.metadata.namespace or "default", item.metadata.name or "")
            if isinstance(item, PodGroup):
                state = self.groups.get(key)
                if state is not None:
                    update_group(state, item, t)
                    continue
            else:
                cstate = self.composites.get(key)
                if cstate is not None:
                    update_composite(cstate, item, t)
                    continue
            self.register(item, t, owner=owner_of(item), namespace=key[0])
        for kind, ns, name in removed:
            self.deleted_object(kind, (ns, name), t)

    def deleted_object(self, kind: str, key: Key, t: float) -> None:
        """A PodGroup or CompositePodGroup was deleted at ``t``."""
        if kind == "PodGroup" and key in self.groups:
            self.groups[key].deleted = t
        elif kind == "CompositePodGroup" and key in self.composites:
            self.composites[key].deleted = t

    def note_quorums(self, t: float) -> None:
        """The groups whose live bound pods (the scheduler's, at least one, and the
        scenario's) reach ``minCount`` (1 for basic groups) for the first time at ``t``."""
        for gkey, n in self.bound_count.items():
            g = self.groups.get(gkey)
            if g is None or n <= 0 or gkey in self.shrunk:
                continue
            total = n + max(0, self.prebound.get(gkey, 0))
            if g.quorum_at is None and total >= (g.min_count or 1):
                g.quorum_at = t

    # -- trees and domains --------------------------------------------------------------------

    def children(self) -> Children:
        """CompositePodGroup -> its children (``("group" | "composite", key)``)."""
        out: Children = {}
        for gkey, g in self.groups.items():
            if g.parent:
                out.setdefault((gkey[0], g.parent), []).append(("group", gkey))
        for ckey, c in self.composites.items():
            if c.parent:
                out.setdefault((ckey[0], c.parent), []).append(("composite", ckey))
        return out

    def subtree_groups(self, ckey: Key, children: Mapping[Key, list[tuple[str, Key]]]) -> list[Key]:
        """The PodGroups under CompositePodGroup ``ckey``, at any depth."""
        return _subtree(ckey, children, 0)

    def domains_of(
        self, groups: list[Key], key: str
    ) -> tuple[dict[str | None, int], dict[str | None, int]]:
        """Per domain of ``key``, the live bound pods of ``groups``: (bound by the scheduler,
        bound by the scenario)."""
        ours: dict[str | None, int] = {}
        pre: dict[str | None, int] = {}
        for st in (p for g in groups for p in self.members.get(g, ())):
            if st.node is None or st.deleted is not None:
                continue
            node = self.nodes.get(st.node)
            value = node.labels.get(key) if node is not None else None
            into = ours if st.ours else pre
            into[value] = into.get(value, 0) + 1
        return ours, pre

    def ancestor_keys(self, parent: str | None, ns: str) -> list[str | None]:
        """The topology keys of the CompositePodGroups above a child of ``parent``, the
        root's first."""
        out: list[str | None] = []
        seen: set[str] = set()
        while parent and parent not in seen:
            seen.add(parent)
            c = self.composites.get((ns, parent))
            if c is None:
                break
            out.insert(0, c.key)
            parent = c.parent
        return out

    def domain_values(
        self, pods: Sequence[PodRecord], keys: list[str | None]
    ) -> dict[str, str | list[str]]:
        """Per topology key, the domain (or the sorted domains) the bound ``pods`` are in."""
        out: dict[str, str | list[str]] = {}
        for key in dict.fromkeys(k for k in keys if k):
            values = sorted(
                {
                    v
                    for p in pods
                    if p.node is not None
                    and (
                        v := (self.nodes[p.node].labels.get(key) if p.node in self.nodes else None)
                    )
                    is not None
                }
            )
            if len(values) == 1:
                out[key] = values[0]
            elif values:
                out[key] = values
        return out


def _subtree(ckey: Key, children: Mapping[Key, list[tuple[str, Key]]], depth: int) -> list[Key]:
    out: list[Key] = []
    if depth > _MAX_DEPTH:  # a cycle: the scheduler marks such trees Invalid
        return out
    for what, key in children.get(ckey, ()):
        if what == "group":
            out.append(key)
        else:
            out.extend(_subtree(key, children, depth + 1))
    return out
