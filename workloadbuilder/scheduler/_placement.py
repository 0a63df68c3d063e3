"""The placement plugins: DefaultPlacement, TopologyPlacementGenerator (one candidate
placement per domain of a group's topology key) and PodGroupPodsCount (placements scored by
how many of the group's pods they hold)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from workloadbuilder.scheduler._interface import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    Placement,
    PlacementSet,
    Rows,
    SharedLister,
    Status,
)

if TYPE_CHECKING:
    from workloadbuilder.scheduler._cache import GroupInfo, NodeTable, PodInfo

__all__ = [
    "DefaultPlacement",
    "PodGroupPodsCount",
    "TopologyPlacementGenerator",
    "rows_of",
    "same_group",
    "topology_key",
]


def same_group(key: tuple[str, str, str], old: Any, new: Any) -> bool:
    """Hint: the event's pod (``new``, a PodInfo) belongs to the rejected group ``key`` (a
    CompositePodGroup root only receives the events of its own tree: always relevant)."""
    if key[0] == "CompositePodGroup":
        return True
    return key[0] == "PodGroup" and getattr(new, "group_key", None) == (key[1], key[2])


class DefaultPlacement:
    """One placement: every node, whatever the group's constraints (not a default plugin:
    TopologyPlacementGenerator gives all nodes to unconstrained groups)."""

    name = "DefaultPlacement"

    def generate(self, group: GroupInfo, lister: SharedLister) -> list[Placement]:
        """``[all nodes]``."""
        return [Placement()]


def topology_key(group: GroupInfo) -> str | None:
    """The group's ``schedulingConstraints.topology[0].key`` (None without a constraint)."""
    pg = group.pod_group
    if pg is None or pg.spec.scheduling_constraints is None:
        return None
    topology = pg.spec.scheduling_constraints.topology
    return topology[0].key if topology else None


def rows_of(placement: Placement, table: NodeTable) -> Rows:
    if placement.rows is not None:
        return placement.rows
    if placement.mask is not None:
        return np.flatnonzero(placement.mask[: table.capacity] & table.present)
    return table.present_rows()


def _in_placement(placement: Placement, row: int | None) -> bool:
    if row is None:
        return False
    return placement.mask is None or bool(placement.mask[row])


class TopologyPlacementGenerator:
    """PlacementGenerate for topology constraints (``TopologyAwareWorkloadScheduling``): one
    placement per distinct value of ``schedulingConstraints.topology[0].key`` among the
    nodes (nodes without the label are in none), in value order. A group with pods already
    bound (or assumed) gets only the domain of those pods. Without a constraint: all nodes."""

    name = "TopologyPlacementGenerator"

    def __init__(
        self,
        *,
        tie_break_seed: int = 0,
        composite_search: str = "bounded",
        search_budget: int = 512,
        search_deadline: float = 1.0,
    ) -> None:
        #: seed of the deterministic tie-break between equally scored placements, and the
        #: CompositePodGroup search (copied to the ``Framework`` by the profile loader)
        self.tie_break_seed = tie_break_seed
        self.composite_search = composite_search
        self.search_budget = search_budget
        self.search_deadline = search_deadline
        self._cache: dict[str, tuple[int, int, dict[str, Placement]]] = {}
        #: the groups with a topology constraint this plugin generated placements for
        self._constrained: set[tuple[str, str]] = set()

    def _is_constrained(self, key: tuple[str, str, str], old: Any, new: Any) -> bool:
        return key[0] == "PodGroup" and (key[1], key[2]) in self._constrained

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """For groups with a topology constraint: nodes added or relabelled (a domain may
        appear or grow), a bound member deleted (the group is no longer held in its
        domain)."""
        return [
            ClusterEventWithHint(
                ClusterEvent("Node", ActionType.ADD | ActionType.UPDATE_NODE), self._is_constrained
            ),
            ClusterEventWithHint(ClusterEvent("AssignedPod", ActionType.DELETE), same_group),
        ]

    def domains(self, key: str, table: NodeTable) -> dict[str, Placement]:
        """``{value: placement}`` of every value of ``key`` (cached per node epoch)."""
        cached = self._cache.get(key)
        if cached is not None and cached[0] == table.epoch and cached[1] == table.capacity:
            return cached[2]
        by_value: dict[str, list[int]] = {}
        for row in table.present_rows():
            value = table.labels[row].get(key)
            if value is not None:
                by_value.setdefault(value, []).append(int(row))
        out: dict[str, Placement] = {}
        for value in sorted(by_value):
            rows = np.array(by_value[value], dtype=np.intp)
            mask = np.zeros(table.capacity, dtype=bool)
            mask[rows] = True
            out[value] = Placement(
                name=f"{key}={value}", mask=mask, rows=rows, domain=((key, value),)
            )
        self._cache[key] = (table.epoch, table.capacity, out)
        return out

    def generate(self, group: GroupInfo, lister: SharedLister) -> list[Placement] | Status:
        """The candidate domains of the group."""
        key = topology_key(group)
        if key is None:
            self._constrained.discard(group.key)
            return [Placement()]
        self._constrained.add(group.key)
        if len(self._constrained) > 100_000:  # bound the set in long-running schedulers
            self._constrained = {group.key}
        return self.generate_for(key, group.name, lister.group_members(group), lister)

    def generate_for(
        self, key: str, name: str, members: Iterable[PodInfo], lister: SharedLister
    ) -> list[Placement] | Status:
        """The domains of ``key`` for a group (or a CompositePodGroup's whole subtree) whose
        pods are ``members``: only the domain of those already bound or assumed, if any."""
        table = lister.table
        domains = self.domains(key, table)
        held: set[str] = set()
        for p in members:
            node = p.node_name or p.assumed_node
            row = table.index.get(node) if node is not None else None
            if row is None:
                continue
            value = table.labels[row].get(key)
            if value is None:
                return Status(
                    code=Code.ERROR,
                    message=(
                        f"pod {p.name!r} of {name!r} is on node {node!r}, which has no "
                        f"{key!r} label"
                    ),
                )
            held.add(value)
        if len(held) > 1:
            return Status(
                code=Code.ERROR,
                message=(
                    f"pods of {name!r} are already in {len(held)} {key} domains "
                    f"({', '.join(sorted(held))})"
                ),
            )
        if held:
            return [domains[held.pop()]]
        if not domains:
            return Status(
                code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                message=f"{key}: no node has the topology label {key!r}",
            )
        return list(domains.values())


class PodGroupPodsCount:
    """PlacementScore: the share of the group's pods that the placement holds (bound,
    assumed and proposed), 0..100 — placements where more of a basic group fits win."""

    name = "PodGroupPodsCount"

    def __init__(self, *, weight: int = 1) -> None:
        self.weight = weight

    def _inside(self, group: GroupInfo, placement: Placement, lister: SharedLister) -> int:
        return sum(
            1
            for p in lister.group_members(group)
            if p.scheduled and _in_placement(placement, p.counted_node)
        )

    def score_placement(
        self,
        group: GroupInfo,
        placement: Placement,
        assigned: Sequence[tuple[PodInfo, int]],
        lister: SharedLister,
    ) -> float:
        """``100 * pods in the placement / pods of the group``."""
        total = max(1, lister.quorum_pods(group))
        inside = self._inside(group, placement, lister) + sum(
            1 for p, row in assigned if not p.scheduled and _in_placement(placement, row)
        )
        return 100.0 * min(inside, total) / total

    def score_placement_bounds(
        self,
        group: GroupInfo,
        candidates: PlacementSet,
        upper: Sequence[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]],
        lister: SharedLister,
    ) -> npt.NDArray[np.float64]:
        """Per candidate: as if every pod that could fit did."""
        total = max(1, lister.quorum_pods(group))
        table = lister.table
        marks = np.zeros(table.capacity, dtype=np.int64)
        for p in lister.group_members(group):
            if p.scheduled and p.counted_node is not None:
                marks[p.counted_node] += 1
        inside = candidates.sums(marks)
        for _, n in upper:
            inside = inside + n
        out: npt.NDArray[np.float64] = 100.0 * np.minimum(inside, total) / total
        return out


#: statuses of a failed request that may still have been carried out: no answer at all (the
#: connection dropped or timed out after the request went out), or the server's own
#: failure or timeout while handling it
