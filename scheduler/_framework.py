"""The scheduling framework: statuses, extension points and the plugin registry.

The extension points carry kube-scheduler's names: ``PreEnqueue`` (the queue's admission
barrier), ``Filter`` and ``Score`` (per pod, over nodes), ``PlacementGenerate`` and
``PlacementScore`` (candidate node subsets for a pod group), ``PlacementFeasible`` (the gang
quorum check during the cycle), ``PodGroupPostFilter`` (what to try when a group does not fit;
workload-aware preemption plugs in here) and ``Bind``.

Filters and scores are *vectorised*: they receive a pod's requirements and an array of node
rows of the :class:`~scheduler._cache.NodeTable` and answer for all rows at once. Filters that
only read node properties (``uses_node_usage = False``) are evaluated once per signature and
node epoch and cached; the others are re-evaluated incrementally as pods are assumed.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import attrs
import numpy as np
import numpy.typing as npt

from scheduler._resources import PodRequirements

if TYPE_CHECKING:
    from scheduler._cache import Cache, GroupInfo, NodeTable, PodInfo
    from scheduler._snapshot import Snapshot
    from workloadbuilder.cluster import Cluster

__all__ = [
    "BindPlugin",
    "Code",
    "FilterPlugin",
    "Framework",
    "Placement",
    "PlacementFeasiblePlugin",
    "PlacementGeneratePlugin",
    "PlacementScorePlugin",
    "PodGroupPostFilterPlugin",
    "PreEnqueuePlugin",
    "Rows",
    "ScorePlugin",
    "Status",
]

Rows = npt.NDArray[np.intp]
Mask = npt.NDArray[np.bool_]


class Code(enum.Enum):
    """Framework status codes (as upstream)."""

    SUCCESS = "Success"
    ERROR = "Error"
    UNSCHEDULABLE = "Unschedulable"
    UNSCHEDULABLE_AND_UNRESOLVABLE = "UnschedulableAndUnresolvable"
    WAIT = "Wait"


@attrs.frozen(kw_only=True)
class Status:
    """A plugin's verdict."""

    code: Code = Code.SUCCESS
    message: str = ""
    plugin: str = ""

    @property
    def ok(self) -> bool:
        """``code is SUCCESS``."""
        return self.code is Code.SUCCESS


SUCCESS = Status()


@attrs.frozen(kw_only=True)
class Placement:
    """A candidate set of nodes for a pod group (all nodes when ``mask`` is None)."""

    name: str = "all-nodes"
    mask: Mask | None = attrs.field(default=None, eq=False)


class PreEnqueuePlugin(Protocol):
    """Gate a group before it may enter the active queue."""

    name: str

    def pre_enqueue_group(self, group: GroupInfo, cache: Cache) -> Status:
        """Success lets the group in; anything else keeps it gated."""
        ...


class FilterPlugin(Protocol):
    """Decide which nodes can run a pod."""

    name: str
    #: False when the verdict depends only on the node object (cached per node epoch)
    uses_node_usage: bool

    def filter(
        self, req: PodRequirements, vec: npt.NDArray[np.int64], table: NodeTable, rows: Rows
    ) -> Mask:
        """One boolean per row: True when the node passes."""
        ...

    def diagnose(
        self, req: PodRequirements, vec: npt.NDArray[np.int64], table: NodeTable, rows: Rows
    ) -> list[tuple[str, str, int]]:
        """Why nodes in ``rows`` fail: ``(short reason, long reason, node count)`` items."""
        ...


class ScorePlugin(Protocol):
    """Rank feasible nodes for a pod (higher is better, 0..100)."""

    name: str
    weight: int

    def score(
        self,
        req: PodRequirements,
        vec: npt.NDArray[np.int64],
        table: NodeTable,
        rows: Rows,
        gang: bool,
    ) -> npt.NDArray[np.float64]:
        """One score per row."""
        ...


class PlacementGeneratePlugin(Protocol):
    """Propose candidate node subsets for a pod group (e.g. one per topology domain)."""

    name: str

    def generate(self, group: GroupInfo, snapshot: Snapshot) -> list[Placement]:
        """Candidate placements; an empty list means "no opinion"."""
        ...


class PlacementScorePlugin(Protocol):
    """Rank feasible placements of a pod group."""

    name: str
    weight: int

    def score_placement(
        self, placement: Placement, assigned: Sequence[tuple[PodInfo, int]], snapshot: Snapshot
    ) -> float:
        """Higher is better."""
        ...


class PlacementFeasiblePlugin(Protocol):
    """Quorum check before and after every pod of a pod-group cycle."""

    name: str

    def placement_feasible(self, min_count: int, scheduled: int, remaining: int) -> Status:
        """``Unschedulable`` aborts the cycle, ``Wait`` continues, ``Success`` is enough."""
        ...


class PodGroupPostFilterPlugin(Protocol):
    """Runs when a pod group does not fit (workload-aware preemption)."""

    name: str

    def post_filter(self, group: GroupInfo, snapshot: Snapshot, message: str) -> Status:
        """Success means "retry after the victims are gone" (nominated)."""
        ...


class BindPlugin(Protocol):
    """Bind a pod to its node."""

    name: str

    async def bind(self, cluster: Cluster, pod: PodInfo, node: str) -> Status:
        """Success, or an error status (the caller forgets the assumption)."""
        ...


@attrs.define(kw_only=True)
class Framework:
    """The enabled plugins per extension point, in order."""

    pre_enqueue: list[PreEnqueuePlugin] = attrs.field(factory=list)
    filters: list[FilterPlugin] = attrs.field(factory=list)
    scores: list[ScorePlugin] = attrs.field(factory=list)
    placement_generate: list[PlacementGeneratePlugin] = attrs.field(factory=list)
    placement_score: list[PlacementScorePlugin] = attrs.field(factory=list)
    placement_feasible: list[PlacementFeasiblePlugin] = attrs.field(factory=list)
    pod_group_post_filter: list[PodGroupPostFilterPlugin] = attrs.field(factory=list)
    bind: list[BindPlugin] = attrs.field(factory=list)

    @property
    def static_filters(self) -> list[FilterPlugin]:
        """Filters that only read node objects."""
        return [f for f in self.filters if not f.uses_node_usage]

    @property
    def usage_filters(self) -> list[FilterPlugin]:
        """Filters that read node usage (re-run as pods are assumed)."""
        return [f for f in self.filters if f.uses_node_usage]

    def run_pre_enqueue(self, group: GroupInfo, cache: Cache) -> Status:
        """All PreEnqueue plugins; the first failure wins."""
        for p in self.pre_enqueue:
            st = p.pre_enqueue_group(group, cache)
            if not st.ok:
                return attrs.evolve(st, plugin=p.name)
        return SUCCESS

    def run_placement_feasible(self, min_count: int, scheduled: int, remaining: int) -> Status:
        """All PlacementFeasible plugins; the first non-success wins."""
        for p in self.placement_feasible:
            st = p.placement_feasible(min_count, scheduled, remaining)
            if not st.ok:
                return attrs.evolve(st, plugin=p.name)
        return SUCCESS
