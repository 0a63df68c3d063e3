"""Preemptions as the simulator sees them: which pods the scheduler preempted, for whom, and
the invariants about them.

The simulator does not ask the scheduler: a victim is a pod the scheduler marked
``DisruptionTarget`` (reason ``PreemptionByScheduler``, whose message names the preemptor:
``... preempting to accommodate pod group ns/name``) and then deleted. The victims of one
preemptor at one time are grouped into units the way workload-aware preemption defines them
(a pod, or a whole PodGroup / CompositePodGroup with ``disruptionMode: all``), from the
objects in the cluster.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

__all__ = [
    "PREEMPTION_REASON",
    "PreemptionRecord",
    "Preemptor",
    "UnitResolver",
    "VictimPod",
    "VictimRecord",
    "disruption_preemptor",
    "record_preemption",
]

#: the ``DisruptionTarget`` reason kube-scheduler (and ours) writes on victims
PREEMPTION_REASON = "PreemptionByScheduler"

PreemptorKind = Literal["Pod", "PodGroup", "CompositePodGroup"]

_ACCOMMODATE = re.compile(r"to accommodate (pod group|composite pod group|pod) ([^/\s]+)/(\S+)")
_KINDS: dict[str, PreemptorKind] = {
    "pod group": "PodGroup",
    "composite pod group": "CompositePodGroup",
    "pod": "Pod",
}


@attrs.frozen(kw_only=True)
class Preemptor:
    """Who preempted: a PodGroup, a CompositePodGroup (a tree's root) or a single Pod."""

    kind: PreemptorKind
    namespace: str
    name: str


@attrs.frozen(kw_only=True)
class VictimRecord:
    """One preemption unit: a Pod, or a PodGroup / CompositePodGroup preempted whole."""

    kind: PreemptorKind
    namespace: str
    name: str
    pods: int
    priority: int | None


@attrs.frozen(kw_only=True)
class PreemptionRecord:
    """The victims one preemptor made at one time, and the domain of the preemptor's topology
    key they were in (None without a constraint, or when they spread over several)."""

    at: float
    preemptor: Preemptor
    priority: int | None
    victims: tuple[VictimRecord, ...]
    domain: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The ``preemptions[]`` entry of ``-o json``."""
        return {
            "at": round(self.at, 6),
            "preemptor": {
                "kind": self.preemptor.kind,
                "namespace": self.preemptor.namespace,
                "name": self.preemptor.name,
            },
            "victims": [
                {
                    "kind": v.kind,
                    "namespace": v.namespace,
                    "name": v.name,
                    "pods": v.pods,
                    "priority": v.priority,
                }
                for v in self.victims
            ],
            "domain": self.domain,
        }

    def text(self, names: Mapping[tuple[str, str], str] | None = None) -> str:
        """One line: ``preemptor preempted units (pods) in domain``; ``names``: display names
        of PodGroups by ``(namespace, name)`` (else ``Kind name``)."""
        shown = names or {}

        def name(kind: str, namespace: str, n: str) -> str:
            if kind == "PodGroup" and (namespace, n) in shown:
                return shown[(namespace, n)]
            return f"{kind} {n}"

        p = self.preemptor
        units = ", ".join(
            f"{name(v.kind, v.namespace, v.name)} ({v.pods} pod{'' if v.pods == 1 else 's'})"
            for v in self.victims
        )
        where = f" in {self.domain}" if self.domain else ""
        return f"{name(p.kind, p.namespace, p.name)} preempted {units}{where}"


def disruption_preemptor(
    patch: Mapping[str, Any] | Sequence[Mapping[str, Any]], namespace: str
) -> Preemptor | None:
    """The preemptor named by a pod status patch that sets ``DisruptionTarget``
    (``PreemptionByScheduler``), or None for any other patch."""
    if not isinstance(patch, Mapping):
        return None
    status = patch.get("status")
    conds = status.get("conditions") if isinstance(status, Mapping) else None
    for c in conds or ():
        if not isinstance(c, Mapping):
            continue
        if c.get("type") != "DisruptionTarget" or c.get("reason") != PREEMPTION_REASON:
            continue
        m = _ACCOMMODATE.search(str(c.get("message") or ""))
        if m is None:
            return Preemptor(kind="Pod", namespace=namespace, name="?")
        return Preemptor(kind=_KINDS[m.group(1)], namespace=m.group(2), name=m.group(3))
    return None


@attrs.frozen(kw_only=True)
class VictimPod:
    """A preempted pod as the simulator knew it."""

    namespace: str
    name: str
    group: str | None
    node: str | None
    priority: int | None


def _all(mode: Any) -> bool:
    return mode is not None and getattr(mode, "all", None) is not None


def _topology_key(constraints: Any) -> str | None:
    topo = getattr(constraints, "topology", None) if constraints is not None else None
    return str(topo[0].key) if topo else None


class UnitResolver:
    """Reads PodGroups and CompositePodGroups (memoised, for one preemption) to group victims
    into units and to find priorities and topology keys."""

    def __init__(self, cluster: Any) -> None:
        self._cluster = cluster
        self._memo: dict[tuple[str, str, str], Any] = {}

    async def _get(self, kind: str, namespace: str, name: str) -> Any:
        key = (kind, namespace, name)
        if key not in self._memo:
            from workloadbuilder.errors import NotFound

            try:
                self._memo[key] = await self._cluster.get(kind, name, namespace)
            except NotFound:
                self._memo[key] = None
        return self._memo[key]

    async def unit_of(
        self, namespace: str, group: str
    ) -> tuple[tuple[PreemptorKind, str] | None, int | None]:
        """``(unit, priority)`` of a pod of PodGroup ``group``: the highest level with
        ``disruptionMode: all`` (None: the pod alone), the top-most level's priority."""
        pg = await self._get("PodGroup", namespace, group)
        if pg is None:
            return None, None
        unit: tuple[PreemptorKind, str] | None = (
            ("PodGroup", group) if _all(pg.spec.disruption_mode) else None
        )
        prio = pg.spec.priority
        parent = pg.spec.parent_composite_pod_group_name
        for _ in range(8):
            if not parent:
                break
            cpg = await self._get("CompositePodGroup", namespace, parent)
            if cpg is None:
                break
            prio = cpg.spec.priority
            if _all(cpg.spec.disruption_mode):
                unit = ("CompositePodGroup", parent)
            parent = cpg.spec.parent_composite_pod_group_name
        return unit, prio

    async def preemptor_info(self, p: Preemptor) -> tuple[int | None, str | None]:
        """``(priority, topology key)`` of a group preemptor (``(None, None)`` for others)."""
        if p.kind == "Pod":
            return None, None
        obj = await self._get(p.kind, p.namespace, p.name)
        if obj is None:
            return None, None
        return obj.spec.priority, _topology_key(obj.spec.scheduling_constraints)


async def record_preemption(
    resolver: UnitResolver,
    at: float,
    preemptor: Preemptor,
    victims: Sequence[VictimPod],
    node_labels: Mapping[str, Mapping[str, str]],
    preemptor_priority: int | None = None,
) -> PreemptionRecord:
    """One :class:`PreemptionRecord` from the pods a preemptor preempted at ``at``."""
    units: dict[tuple[PreemptorKind, str, str], list[VictimPod]] = {}
    prio: dict[tuple[PreemptorKind, str, str], int | None] = {}
    for v in victims:
        unit, p = (None, v.priority)
        if v.group:
            unit, gp = await resolver.unit_of(v.namespace, v.group)
            p = gp if gp is not None else v.priority
        key: tuple[PreemptorKind, str, str] = (
            (unit[0], v.namespace, unit[1]) if unit is not None else ("Pod", v.namespace, v.name)
        )
        units.setdefault(key, []).append(v)
        prio[key] = p
    records = tuple(
        VictimRecord(kind=k[0], namespace=k[1], name=k[2], pods=len(pods), priority=prio[k])
        for k, pods in sorted(units.items(), key=lambda kv: (kv[0][0] == "Pod", kv[0]))
    )
    own, tkey = await resolver.preemptor_info(preemptor)
    domain = None
    if tkey is not None:
        values: set[str | None] = set()
        for v in victims:
            labels = node_labels.get(v.node or "")
            values.add(labels.get(tkey) if labels is not None else None)
        if len(values) == 1:
            domain = next(iter(values))
    return PreemptionRecord(
        at=at,
        preemptor=preemptor,
        priority=own if own is not None else preemptor_priority,
        victims=records,
        domain=domain,
    )
