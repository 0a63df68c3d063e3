"""The framework's interface (kube-scheduler's ``framework/interface.go`` and ``types.go``):
statuses, extension-point protocols, the :class:`SharedLister` through which plugins see the
cluster, and the cluster events plugins register to requeue what they rejected.

The extension points carry kube-scheduler's names: ``PreEnqueue`` (the queue's admission
barrier), ``Filter`` and ``Score`` (per pod, over nodes), ``PlacementGenerate`` and
``PlacementScore`` (candidate node subsets for a pod group), ``PlacementFeasible`` (the gang
quorum check during the cycle), ``PodGroupPostFilter`` (what to try when a group does not fit;
workload-aware preemption plugs in here) and ``Bind``.

A plugin implements the extension points it needs; some extension points have *optional
hooks* (a faster one-row ``filter_one``/``score_one``, ``pre_enqueue_tree``, ``generate_for``,
``placement_weight``, ``explain_group``, ``set_handle``), each a runtime-checkable protocol
below. The framework checks them once, when it is built (``Framework.refresh``), never per
call. The public home of these protocols is :mod:`workloadbuilder.scheduler.framework`.

Filters and scores are *vectorised*: they receive a pod's requirements and an array of node
rows of the :class:`~workloadbuilder.scheduler._cache.NodeTable` and answer for all rows at once.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

import attrs
import numpy as np
import numpy.typing as npt

from workloadbuilder.scheduler._resources import PodRequirements

if TYPE_CHECKING:
    from workloadbuilder.cluster import Cluster
    from workloadbuilder.scheduler._cache import GroupInfo, NodeTable, PodInfo, PodKey
    from workloadbuilder.scheduler._tree import TreeNode

__all__ = [
    "SUCCESS",
    "ActionType",
    "BindPlugin",
    "BoundedPlacementScorePlugin",
    "ClusterEvent",
    "ClusterEventWithHint",
    "Code",
    "EnqueueExtensions",
    "ExplainGroupPlugin",
    "FilterOnePlugin",
    "FilterPlugin",
    "HandlePlugin",
    "Mask",
    "Placement",
    "PlacementFeasiblePlugin",
    "PlacementGenerateForPlugin",
    "PlacementGeneratePlugin",
    "PlacementScorePlugin",
    "PlacementSet",
    "PlacementWeightPlugin",
    "Plugin",
    "PluginFactory",
    "PodGroupPostFilterPlugin",
    "PodScopedPlugin",
    "PodScorePlugin",
    "PodsRemovablePlugin",
    "PreEnqueuePlugin",
    "PreEnqueueTreePlugin",
    "QueueingHint",
    "Registry",
    "ReservePlugin",
    "Rows",
    "ScoreOnePlugin",
    "ScorePlugin",
    "SharedLister",
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
    """A candidate set of nodes for a pod group (all nodes when ``mask`` is None).

    A topology placement also names its domain (``domain``: the constraint's ``(key,
    value)`` pairs) and carries the rows of its nodes (``rows``, ascending), so the cycle can
    bound what fits in it without simulating it."""

    name: str = "all-nodes"
    mask: Mask | None = attrs.field(default=None, eq=False)
    rows: Rows | None = attrs.field(default=None, eq=False)
    domain: tuple[tuple[str, str], ...] = ()


# ---- what plugins see -------------------------------------------------------------------


@runtime_checkable
class SharedLister(Protocol):
    """The cluster as plugins see it during a cycle (kube-scheduler's ``SharedLister``: node
    infos and pod lookups). The scheduler's cache and the cycle's snapshot implement it."""

    @property
    def table(self) -> NodeTable:
        """Every node as rows of arrays (allocatable, used, labels, taints)."""
        ...

    def node_name(self, row: int) -> str:
        """Name of the node in ``row``."""
        ...

    def get_pod(self, key: PodKey) -> PodInfo | None:
        """A pod the scheduler knows by ``(namespace, name)``."""
        ...

    def group_members(self, group: GroupInfo) -> Iterator[PodInfo]:
        """The group's known non-terminal pods."""
        ...

    def quorum_pods(self, group: GroupInfo) -> int:
        """The group's pods that count for its quorum (visible, not being deleted)."""
        ...


# ---- cluster events and queueing hints --------------------------------------------------


class ActionType(enum.Flag):
    """What happened to an object (upstream ``framework.ActionType``)."""

    ADD = enum.auto()
    DELETE = enum.auto()
    #: a Node's allocatable, labels, taints or ``spec.unschedulable`` changed
    UPDATE_NODE = enum.auto()
    #: an unscheduled pod's requirements (requests, selectors, tolerations) changed
    UPDATE_POD_REQUIREMENTS = enum.auto()
    #: an unscheduled pod's ``schedulingGates`` were all removed
    UPDATE_POD_SCHEDULING_GATES_ELIMINATED = enum.auto()
    #: a PodGroup's spec changed
    UPDATE_POD_GROUP = enum.auto()
    #: an unscheduled pod's ``status.resourceClaimStatuses`` changed (a claim was generated)
    UPDATE_POD_GENERATED_RESOURCE_CLAIM = enum.auto()
    #: any other change of an object (ResourceClaim, ResourceSlice, DeviceClass)
    UPDATE_OBJECT = enum.auto()
    UPDATE = (
        UPDATE_NODE
        | UPDATE_POD_REQUIREMENTS
        | UPDATE_POD_SCHEDULING_GATES_ELIMINATED
        | UPDATE_POD_GROUP
        | UPDATE_POD_GENERATED_RESOURCE_CLAIM
        | UPDATE_OBJECT
    )
    ALL = ADD | DELETE | UPDATE


@attrs.frozen
class ClusterEvent:
    """``resource`` (``Node``, ``Pod`` = unscheduled pod, ``AssignedPod``, ``PodGroup``) and
    what happened to it."""

    resource: str
    action: ActionType

    def matches(self, other: ClusterEvent) -> bool:
        """Whether ``other`` (an event that happened) is covered by this registration."""
        return (self.resource in ("*", other.resource)) and bool(self.action & other.action)

    def __str__(self) -> str:
        return f"{self.resource}/{self.action.name or self.action.value}"


#: ``hint(entity_key, old, new) -> bool``: may this event make the rejected entity
#: schedulable? ``entity_key`` is the queue's ``(kind, namespace, name)``.
QueueingHint = Callable[[tuple[str, str, str], Any, Any], bool]


@attrs.frozen
class ClusterEventWithHint:
    """A registered event, with an optional hint that filters it per entity."""

    event: ClusterEvent
    hint: QueueingHint | None = attrs.field(default=None, eq=False)


# ---- extension points ---------------------------------------------------------------------


class Plugin(Protocol):
    """Every plugin has a unique name."""

    name: str


@runtime_checkable
class EnqueueExtensions(Protocol):
    """Plugins that can reject an entity say which events may make it schedulable again."""

    name: str

    def events_to_register(self) -> Sequence[ClusterEventWithHint]:
        """The events (and hints) that requeue an entity this plugin rejected."""
        ...


class PreEnqueuePlugin(Protocol):
    """Gate a group before it may enter the active queue."""

    name: str

    def pre_enqueue_group(self, group: GroupInfo, lister: SharedLister) -> Status:
        """Success lets the group in; anything else keeps it gated."""
        ...


@runtime_checkable
class PreEnqueueTreePlugin(PreEnqueuePlugin, Protocol):
    """A PreEnqueue plugin that also gates CompositePodGroup trees (optional hook)."""

    def pre_enqueue_tree(self, tree: TreeNode, lister: SharedLister) -> Status:
        """Success lets the tree in; anything else keeps it gated."""
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


@runtime_checkable
class FilterOnePlugin(FilterPlugin, Protocol):
    """A Filter plugin with a one-row form (optional hook): the same verdict as
    ``filter(..., rows=[row])[0]`` without one-element arrays (used as pods are assumed)."""

    def filter_one(
        self, req: PodRequirements, vec: npt.NDArray[np.int64], table: NodeTable, row: int
    ) -> bool:
        """True when the node in ``row`` passes."""
        ...


class ScorePlugin(Protocol):
    """Rank feasible nodes for a pod (higher is better, 0..100). A plugin whose score reads
    only the node object and the pod's requirements may say so with a class attribute
    ``usage_independent = True``: the cycle then keeps a row's score as it was evaluated when
    it places pods there, instead of asking again."""

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


@runtime_checkable
class ScoreOnePlugin(ScorePlugin, Protocol):
    """A Score plugin with a one-row form (optional hook): the same value as
    ``score(..., rows=[row], gang)[0]``."""

    def score_one(
        self,
        req: PodRequirements,
        vec: npt.NDArray[np.int64],
        table: NodeTable,
        row: int,
        gang: bool,
    ) -> float:
        """The score of the node in ``row``."""
        ...


@runtime_checkable
class PodScorePlugin(Protocol):
    """A Score plugin that reads the pod itself and the pods around it (InterPodAffinity,
    PodTopologySpread): it sits in the profile's ``score`` list like a :class:`ScorePlugin`
    but is asked per pod, over the rows that passed every filter (the Reserve plugins'
    feasible rows included), and its scores are added, times ``weight``, to the vectorised
    ones. Pods placed earlier in the cycle are in the lister (``placed``)."""

    name: str
    weight: int

    def scores_pod(self, pod: PodInfo, lister: SharedLister) -> bool:
        """Whether this plugin has anything to score for ``pod`` now (cheap: it is asked for
        every pod; False leaves the pod's scores as the vectorised plugins gave them)."""
        ...

    def score_pod(self, pod: PodInfo, lister: SharedLister, rows: Rows) -> npt.NDArray[np.float64]:
        """One normalised score (0..100, as upstream's NormalizeScore leaves them) per row."""
        ...


class PlacementGeneratePlugin(Protocol):
    """Propose candidate node subsets for a pod group (e.g. one per topology domain)."""

    name: str

    def generate(self, group: GroupInfo, lister: SharedLister) -> list[Placement] | Status:
        """Candidate placements; an empty list means "no opinion". A non-success
        :class:`Status` means the group cannot be placed at all (e.g. no node carries the
        topology label): the cycle fails with its message."""
        ...


@runtime_checkable
class PlacementGenerateForPlugin(PlacementGeneratePlugin, Protocol):
    """A PlacementGenerate plugin that also proposes placements for a CompositePodGroup's own
    topology constraint (optional hook)."""

    def generate_for(
        self, key: str, name: str, members: Sequence[PodInfo], lister: SharedLister
    ) -> list[Placement] | Status:
        """Candidate placements for constraint ``key`` of the tree ``name`` whose pods are
        ``members`` (as :meth:`PlacementGeneratePlugin.generate`)."""
        ...


class PlacementScorePlugin(Protocol):
    """Rank feasible placements of a pod group."""

    name: str
    weight: int

    def score_placement(
        self,
        group: GroupInfo,
        placement: Placement,
        assigned: Sequence[tuple[PodInfo, int]],
        lister: SharedLister,
    ) -> float:
        """Score of the placement with ``assigned`` tentatively placed in the lister (0..100,
        higher is better)."""
        ...


@runtime_checkable
class PlacementWeightPlugin(Protocol):
    """A PlacementScore plugin that is also a Score plugin keeps a weight per extension point
    (optional): ``placement_weight`` at PlacementScore, ``weight`` at Score."""

    placement_weight: int


class PlacementSet:
    """Candidate placements as one batch over node rows: ``sums(values)`` adds a per-row
    array up per placement in one vectorised pass (what bounding plugins need)."""

    __slots__ = ("_ends", "_rows", "_starts", "placements")

    def __init__(self, placements: Sequence[Placement], rows: Sequence[Rows]) -> None:
        self.placements = list(placements)
        sizes = np.array([r.size for r in rows], dtype=np.intp)
        self._ends = np.cumsum(sizes)
        self._starts = self._ends - sizes
        self._rows: Rows = np.concatenate(list(rows)) if rows else np.zeros(0, dtype=np.intp)

    def __len__(self) -> int:
        return len(self.placements)

    def rows(self, i: int) -> Rows:
        """The node rows of placement ``i``."""
        return self._rows[self._starts[i] : self._ends[i]]

    def sums(self, values: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """``values`` (one per node row) summed per placement."""
        acc = np.concatenate([np.zeros(1, dtype=values.dtype), np.cumsum(values[self._rows])])
        out: npt.NDArray[Any] = acc[self._ends] - acc[self._starts]
        return out


@runtime_checkable
class BoundedPlacementScorePlugin(Protocol):
    """A PlacementScore plugin that can also bound its score without a simulation. When every
    enabled PlacementScore plugin can, the cycle simulates placements best bound first and
    stops as soon as no remaining placement can beat the best one found."""

    name: str
    weight: int

    def score_placement_bounds(
        self,
        group: GroupInfo,
        candidates: PlacementSet,
        upper: Sequence[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]],
        lister: SharedLister,
    ) -> npt.NDArray[np.float64]:
        """Per candidate: an upper bound of :meth:`score_placement` over every assignment
        that places, of each ``(vec, n)`` in ``upper``, at most ``n[i]`` pods with request
        vector ``vec`` in candidate ``i``."""
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

    def post_filter(self, group: GroupInfo, lister: SharedLister, message: str) -> Status:
        """``Success`` means "retry soon: room is being made" (victims nominated);
        ``Unschedulable`` adds its message to the explanation; ``Error`` is logged."""
        ...


@runtime_checkable
class HandlePlugin(Protocol):
    """A PodGroupPostFilter plugin that needs the scheduler's handle (optional hook: upstream's
    ``framework.Handle`` given to a plugin factory). Given once, when the scheduler is built
    with preemption enabled."""

    def set_handle(self, handle: Any) -> None:
        """Keep ``handle`` (what the plugin may ask of the scheduler)."""
        ...


class ReservePlugin(Protocol):
    """Per-pod state a node decision consumes (kube-scheduler's PreFilter/Filter/Reserve/
    PreBind/Unreserve of one plugin, e.g. DynamicResources). Unlike the vectorised filters it
    is asked pod by pod, for the node the cycle is about to choose, because what it reserves
    (devices) changes what later pods of the same signature can get."""

    name: str

    def applies(self, pod: PodInfo) -> bool:
        """Whether the plugin has anything to check for ``pod`` (cheap)."""
        ...

    def pre_enqueue_pod(self, pod: PodInfo, lister: SharedLister) -> Status:
        """Gate the pod (its group) before the active queue, silently (e.g. a claim that
        does not exist yet)."""
        ...

    def pre_filter_pod(self, pod: PodInfo, lister: SharedLister) -> Status:
        """A verdict that holds on every node (e.g. a claim does not exist yet)."""
        ...

    def feasible_rows(self, pod: PodInfo, lister: SharedLister) -> Mask | None:
        """A vectorised necessary condition over node rows (None: no opinion)."""
        ...

    def shape_key(self, pod: PodInfo, lister: SharedLister) -> Any:
        """A hashable key: pods with equal keys fail on the same nodes (None: no sharing)."""
        ...

    def filter_pod(self, pod: PodInfo, lister: SharedLister, row: int) -> Any:
        """A plan (truthy) when the pod's needs can be reserved on ``row`` now, else None."""
        ...

    def reserve_pod(self, pod: PodInfo, lister: SharedLister, row: int, plan: Any) -> None:
        """Reserve ``plan`` tentatively in the lister (a snapshot: undone on revert)."""
        ...

    def diagnose_pod(
        self, pod: PodInfo, lister: SharedLister, rows: Rows
    ) -> list[tuple[str, str, int]]:
        """Why the pod's needs cannot be reserved on ``rows``."""
        ...

    def commit(self, reservations: Sequence[Any]) -> None:
        """Keep the reservations of a successful cycle (until written or released)."""
        ...

    async def pre_bind(self, cluster: Cluster, pod: PodInfo, node: str) -> Status:
        """Write what was reserved for ``pod`` before it is bound."""
        ...

    async def unreserve(self, cluster: Cluster, pod: PodInfo) -> None:
        """Release what was reserved for ``pod`` (its binding failed)."""
        ...


@runtime_checkable
class ExplainGroupPlugin(Protocol):
    """A Reserve plugin that can sum up, over a gang that did not fit, why its pods' needs
    could not be served (optional hook: DRA's per-device-class lines)."""

    def explain_group(
        self, pods: Sequence[PodInfo], placed: set[tuple[str, str]], lister: SharedLister
    ) -> list[str]:
        """Lines appended to the group's explanation (``placed``: the pods that got a node
        in the attempt)."""
        ...


@runtime_checkable
class PodScopedPlugin(Protocol):
    """A Reserve plugin with nothing to check for a pod that has neither pod constraints
    (``PodInfo.constraints``) nor resource claims (optional capability: the framework then
    skips asking it, for most pods; InterPodAffinity is not one: a counted pod's
    anti-affinity holds against every pod)."""

    #: True for plugins that have the capability (False: asked for every pod after all, e.g.
    #: PodTopologySpread with ``DoNotSchedule`` default constraints)
    pod_scoped: bool


@runtime_checkable
class PodsRemovablePlugin(Protocol):
    """A Reserve plugin whose Filter verdict on a node can change when pods leave it (host
    ports, pod anti-affinity, topology spread: upstream's PreFilterExtensions AddPod /
    RemovePod), so single-pod preemption asks it again with the victims removed (optional
    capability; the others, DRA, are asked before: removing victims frees nothing there)."""

    #: always True for plugins that have the capability
    frees_with_victims: bool


class BindPlugin(Protocol):
    """Bind a pod to its node."""

    name: str

    async def bind(self, cluster: Cluster, pod: PodInfo, node: str) -> Status:
        """Success, or an error status (the caller forgets the assumption)."""
        ...


# ---- out-of-tree plugins ------------------------------------------------------------------

#: builds one plugin instance for a profile from its ``pluginConfig`` args (an empty mapping
#: when the profile gives none): a plugin class taking ``args`` does (upstream's
#: ``PluginFactory``)
PluginFactory: TypeAlias = Callable[[Mapping[str, Any]], Any]

#: plugin name -> factory: the out-of-tree plugins a profile may name besides the in-tree
#: ones (upstream's ``runtime.Registry``, filled by ``app.WithPlugin``)
Registry: TypeAlias = Mapping[str, PluginFactory]
