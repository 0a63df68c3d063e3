"""The simulator's contract: the invariants it checks after every scheduling round
(docs/simulator.md, "The gang invariant"), each a function over the recorded
:class:`._world.World` that returns what it finds broken, with its message.

They count what the scheduler did, not what the scenario did (pods it bound itself with
``spec.nodeName``); a gang (or composite) that lost pods to preemption is exempt from the gang
and composite checks until the scheduler binds pods of it again.

* :func:`gang_min_count`: a gang of which the scheduler bound a pod has ``minCount`` live
  bound pods (reported every round it is broken);
* :func:`composite_min_group_count`: no CompositePodGroup gang has between 1 and
  ``minGroupCount - 1`` children with pods the scheduler bound (once per object);
* :func:`topology_one_domain`: a group (or composite tree) with a topology constraint has its
  bound pods in one domain of its key (once per object);
* :func:`preemption_order`: no victim of priority >= its preemptor's, no
  ``disruptionMode: all`` unit preempted in part (once per victim unit and kind).

:class:`ViolationLog` keeps the violations in the order found and reports each "once"
finding once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import attrs

from workloadbuilder.simulator._preemption import PreemptionRecord
from workloadbuilder.simulator._result import Violation
from workloadbuilder.simulator._world import Key, World

__all__ = [
    "Finding",
    "ViolationLog",
    "check_round",
    "composite_min_group_count",
    "gang_min_count",
    "preemption_order",
    "topology_one_domain",
]


@attrs.frozen(kw_only=True)
class Finding:
    """A broken invariant: the violation, and the key it is reported once under per object
    (``once``; None: every time it is found)."""

    violation: Violation
    once: str | None = None


class ViolationLog:
    """The violations found so far, in order; a finding with a ``once`` key is kept only the
    first time for its object."""

    def __init__(self) -> None:
        self.violations: list[Violation] = []
        self._reported: set[tuple[str, str, str]] = set()

    def reported(self, once: str, key: Key) -> bool:
        """A finding of ``once`` about ``key`` was already kept."""
        return (once, *key) in self._reported

    def add(self, findings: Iterable[Finding]) -> None:
        """Keep ``findings`` (in order), minus the repeats of "once" ones."""
        for f in findings:
            v = f.violation
            if f.once is not None:
                if (f.once, v.namespace, v.name) in self._reported:
                    continue
                self._reported.add((f.once, v.namespace, v.name))
            self.violations.append(v)


def _found(
    t: float,
    kind: str,
    key: Key,
    message: str,
    *,
    min_count: int = 0,
    bound: int = 0,
    tag: str = "",
) -> Finding:
    violation = Violation(
        time=t,
        namespace=key[0],
        name=key[1],
        min_count=min_count,
        bound=bound,
        type=kind,
        message=message,
    )
    return Finding(violation=violation, once=kind + tag)


def gang_min_count(world: World, t: float) -> list[Finding]:
    """A gang of which the scheduler bound a pod has at least ``minCount`` live bound pods
    (pods the scenario bound itself count towards it). Reported every round it is broken;
    the message is :attr:`Violation.text`'s default (``ns/name had 1 of minCount 3 pods
    bound``)."""
    out: list[Finding] = []
    for gkey, n in world.bound_count.items():
        g = world.groups.get(gkey)
        if g is None or n <= 0 or gkey in world.shrunk:
            continue
        total = n + max(0, world.prebound.get(gkey, 0))
        if g.policy == "gang" and g.min_count is not None and total < g.min_count:
            violation = Violation(
                time=t, namespace=gkey[0], name=gkey[1], min_count=g.min_count, bound=total
            )
            out.append(Finding(violation=violation))
    return out


def composite_min_group_count(world: World, t: float) -> list[Finding]:
    """No CompositePodGroup gang has between 1 and ``minGroupCount - 1`` children with pods
    the scheduler bound (a child counts when anything in its subtree was bound)."""
    out: list[Finding] = []
    if not world.composites:
        return out
    children = world.children()
    for ckey, c in world.composites.items():
        if c.policy != "gang" or c.min_group_count is None:
            continue
        started = []
        if any(g in world.shrunk for g in world.subtree_groups(ckey, children)):
            continue  # lost pods to preemption: checked again when they are rebound
        for what, key in children.get(ckey, ()):
            groups = [key] if what == "group" else world.subtree_groups(key, children)
            if any(world.bound_count.get(g, 0) > 0 for g in groups):
                started.append(key[1])
        if 0 < len(started) < c.min_group_count:
            message = (
                f"CompositePodGroup {ckey[0]}/{ckey[1]} had {len(started)} of minGroupCount "
                f"{c.min_group_count} children with pods bound ({', '.join(sorted(started))})"
            )
            out.append(
                _found(
                    t,
                    "composite",
                    ckey,
                    message,
                    min_count=c.min_group_count,
                    bound=len(started),
                )
            )
    return out


def topology_one_domain(
    world: World, t: float, *, skip: Callable[[Key], bool] = lambda key: False
) -> list[Finding]:
    """A PodGroup (or the tree under a CompositePodGroup) with a topology constraint of which
    the scheduler bound a pod has its bound pods in one domain of its key (pods the scenario
    pre-bound across domains are not the scheduler's doing). ``skip``: objects already
    reported (not looked at again)."""
    checks: list[tuple[str, Key, list[Key], str]] = [
        ("PodGroup", gkey, [gkey], g.key) for gkey, g in world.groups.items() if g.key
    ]
    if any(c.key for c in world.composites.values()):
        children = world.children()
        checks += [
            ("CompositePodGroup", ckey, world.subtree_groups(ckey, children), c.key)
            for ckey, c in world.composites.items()
            if c.key
        ]
    out: list[Finding] = []
    for kind, key, groups, tkey in checks:
        if skip(key):
            continue
        if not any(world.bound_count.get(g, 0) > 0 for g in groups):
            continue
        ours, pre = world.domains_of(groups, tkey)
        both = set(ours) | set(pre)
        if None not in ours and len(both) <= max(1, len(pre)):
            continue
        parts = ", ".join(
            f"{v if v is not None else '(no label)'}: {ours.get(v, 0) + pre.get(v, 0)}"
            for v in sorted(both, key=lambda v: (v is None, v or ""))
        )
        message = f"{kind} {key[0]}/{key[1]} has pods in {len(both)} domains of {tkey} ({parts})"
        out.append(_found(t, "topology", key, message))
    return out


def preemption_order(world: World, rec: PreemptionRecord, t: float) -> list[Finding]:
    """No victim of priority >= its preemptor's; no ``disruptionMode: all`` unit left partly
    running (one of its pods still bound, not finished, not preempted) after ``rec``."""
    out: list[Finding] = []
    who = f"{rec.preemptor.kind} {rec.preemptor.namespace}/{rec.preemptor.name}"
    for v in rec.victims:
        if rec.priority is not None and v.priority is not None and v.priority >= rec.priority:
            message = (
                f"{who} (priority {rec.priority}) preempted {v.kind} {v.namespace}/{v.name} "
                f"of priority {v.priority}"
            )
            out.append(_found(t, "preemption", (v.namespace, v.name), message))
        if v.kind == "Pod":
            continue
        if v.kind == "PodGroup":
            groups = [(v.namespace, v.name)]
        else:
            groups = world.subtree_groups((v.namespace, v.name), world.children())
        left = [
            st.name
            for g in groups
            for st in world.members.get(g, ())
            if st.node is not None
            and st.deleted is None
            and st.finished is None
            and st.preempted is None
        ]
        if left:
            message = (
                f"{who} preempted {v.kind} {v.namespace}/{v.name} (disruptionMode all) only "
                f"in part: {', '.join(sorted(left))} still running"
            )
            out.append(_found(t, "preemption", (v.namespace, v.name), message, tag="-partial"))
    return out


def check_round(world: World, log: ViolationLog, t: float) -> None:
    """The checks after a scheduling round at ``t`` (gang, composite, topology), into
    ``log``."""
    log.add(gang_min_count(world, t))
    if world.composites:
        log.add(composite_min_group_count(world, t))
    log.add(topology_one_domain(world, t, skip=lambda key: log.reported("topology", key)))
