"""The framework runtime (kube-scheduler's ``framework/runtime``): the enabled plugins per
extension point and every ``run_*`` that calls them.

Filters that only read node properties (``uses_node_usage = False``) are evaluated once per
signature and node epoch in the :class:`StaticFilterCache` beside the framework; the others
are re-evaluated incrementally by the cycle as pods are assumed. Nothing outside this module
loops over plugins.

The framework is *sealed* when it is built: :meth:`Framework.refresh` (run on construction,
by the profile builder and by the scheduler that adopts the framework) sorts the plugins of
each extension point by the optional hooks they implement (the capability protocols of
:mod:`~workloadbuilder.scheduler._interface`), once; the ``run_*`` methods only walk those
lists (no ``getattr`` or ``isinstance`` per call). Change a plugin list in place only before
the scheduler is built, or call :meth:`Framework.refresh` after.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

import attrs
import numpy as np
import numpy.typing as npt

from workloadbuilder.scheduler._interface import (
    SUCCESS,
    BindPlugin,
    BoundedPlacementScorePlugin,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    EnqueueExtensions,
    ExplainGroupPlugin,
    FilterOnePlugin,
    FilterPlugin,
    HandlePlugin,
    Mask,
    Placement,
    PlacementFeasiblePlugin,
    PlacementGenerateForPlugin,
    PlacementGeneratePlugin,
    PlacementScorePlugin,
    PlacementSet,
    PlacementWeightPlugin,
    PodGroupPostFilterPlugin,
    PodScopedPlugin,
    PodScorePlugin,
    PodsRemovablePlugin,
    PreEnqueuePlugin,
    PreEnqueueTreePlugin,
    QueueingHint,
    ReservePlugin,
    Rows,
    ScoreOnePlugin,
    ScorePlugin,
    SharedLister,
    Status,
)
from workloadbuilder.scheduler._resources import PodRequirements

if TYPE_CHECKING:
    from workloadbuilder.cluster import Cluster
    from workloadbuilder.scheduler._cache import GroupInfo, NodeTable, PodInfo
    from workloadbuilder.scheduler._tree import TreeNode

__all__ = ["Diagnosis", "Framework", "StaticFilterCache"]

_log = logging.getLogger(__name__)

_T = TypeVar("_T")
#: a PlacementScore plugin and, when it keeps its own weight there, the same object as a
#: :class:`PlacementWeightPlugin`
_Weighted = tuple[PlacementScorePlugin, PlacementWeightPlugin | None]


def _weight(w: _Weighted) -> int:
    """A plugin's PlacementScore weight (``placement_weight`` when it also scores nodes)."""
    p, own = w
    return int(own.placement_weight if own is not None else p.weight)


def _safe(plugin: str, hint: QueueingHint) -> QueueingHint:
    def guarded(key: tuple[str, str, str], old: Any, new: Any) -> bool:
        try:
            return bool(hint(key, old, new))
        except Exception:  # a failing hint requeues, as upstream
            _log.exception("queueing hint of %s failed", plugin)
            return True

    return guarded


@attrs.frozen(kw_only=True)
class Diagnosis:
    """Why a pod shape found no node: ``(short, long, count)`` reasons over ``total`` nodes,
    and the filter plugins that rejected some node."""

    total: int
    reasons: tuple[tuple[str, str, int], ...]
    plugins: frozenset[str] = frozenset()
    #: a verdict that holds on every node (a PreFilter rejection), instead of reasons
    pre_filter: str = ""

    def pod_message(self) -> str:
        """Upstream's FailedScheduling wording: ``0/40 nodes are available: 3 ...``."""
        if self.pre_filter:
            return f"0/{self.total} nodes are available: {self.pre_filter}."
        if not self.reasons:
            return f"0/{self.total} nodes are available."
        counts: dict[str, int] = {}
        for short, _, n in self.reasons:  # one count per short reason (as upstream)
            counts[short] = counts.get(short, 0) + n
        parts = sorted(f"{n} {short}" for short, n in counts.items())
        return f"0/{self.total} nodes are available: {', '.join(parts)}."

    def node_summary(self) -> str:
        """``37 of 40 nodes lack nvidia.com/gpu: 8; 3 of 40 nodes are unschedulable``."""
        if self.pre_filter:
            return self.pre_filter
        if self.total == 0:
            return "the cluster has no nodes"
        if not self.reasons:
            return f"none of {self.total} nodes fits"
        ordered = sorted(self.reasons, key=lambda r: (-r[2], r[1]))
        return "; ".join(f"{n} of {self.total} nodes {long}" for _, long, n in ordered)


class StaticFilterCache:
    """Node-only filter verdicts per signature, valid for one node epoch."""

    def __init__(self) -> None:
        self._epoch = -1
        self._masks: dict[PodRequirements, Mask] = {}

    def get(self, req: PodRequirements, table: NodeTable) -> Mask | None:
        """The cached mask of ``req`` for the table's current epoch."""
        if table.epoch != self._epoch:
            self._masks.clear()
            self._epoch = table.epoch
        return self._masks.get(req)

    def put(self, req: PodRequirements, table: NodeTable, mask: Mask) -> None:
        """Remember ``mask`` (dropping everything if the epoch moved meanwhile)."""
        if table.epoch != self._epoch:  # a new resource column appeared
            self._masks.clear()
            self._epoch = table.epoch
        self._masks[req] = mask


@attrs.define(kw_only=True)
class Framework:
    """The enabled plugins per extension point, in order, and the runs over them."""

    pre_enqueue: list[PreEnqueuePlugin] = attrs.field(factory=list)
    filters: list[FilterPlugin] = attrs.field(factory=list)
    scores: list[ScorePlugin] = attrs.field(factory=list)
    placement_generate: list[PlacementGeneratePlugin] = attrs.field(factory=list)
    placement_score: list[PlacementScorePlugin] = attrs.field(factory=list)
    placement_feasible: list[PlacementFeasiblePlugin] = attrs.field(factory=list)
    pod_group_post_filter: list[PodGroupPostFilterPlugin] = attrs.field(factory=list)
    bind: list[BindPlugin] = attrs.field(factory=list)
    #: per-pod PreFilter/Filter/Reserve/PreBind/Unreserve (DynamicResources)
    reserve: list[ReservePlugin] = attrs.field(factory=list)
    #: the profile's schedulerName (informational; the scheduler's config decides)
    profile: str = ""
    #: seed of the deterministic tie-break between equally scored placements
    placement_seed: int = 0
    #: CompositePodGroup children: ``bounded`` (greedy, then a bounded backtracking search
    #: when greedy misses minGroupCount) or ``greedy`` (upstream)
    composite_search: str = "bounded"
    #: the search's budget of leaf placement attempts and its deadline (seconds) per cycle
    search_budget: int = 512
    search_deadline: float = 1.0
    static_cache: StaticFilterCache = attrs.field(factory=StaticFilterCache)
    #: the DRA state the plugins share (upstream's ``SharedDRAManager``), once the scheduler
    #: handed it over (:meth:`use_shared_dra_manager`)
    shared_dra_manager: Any = attrs.field(init=False, default=None)
    _static: list[FilterPlugin] = attrs.field(init=False, factory=list)
    _usage: list[FilterPlugin] = attrs.field(init=False, factory=list)
    # the capability lists (built by refresh): each plugin with its optional hook, or None
    _usage_one: list[tuple[FilterOnePlugin | None, FilterPlugin]] = attrs.field(
        init=False, factory=list
    )
    _score_one: list[tuple[ScoreOnePlugin | None, ScorePlugin]] = attrs.field(
        init=False, factory=list
    )
    #: the vectorised Score plugins and the per-pod ones (:class:`PodScorePlugin`)
    _node_scores: list[ScorePlugin] = attrs.field(init=False, factory=list)
    _static_scores: list[ScorePlugin] = attrs.field(init=False, factory=list)
    _usage_score_one: list[tuple[ScoreOnePlugin | None, ScorePlugin]] = attrs.field(
        init=False, factory=list
    )
    _pod_scores: list[PodScorePlugin] = attrs.field(init=False, factory=list)
    _pre_enqueue_tree: list[PreEnqueueTreePlugin] = attrs.field(init=False, factory=list)
    _generate_for: list[PlacementGenerateForPlugin] = attrs.field(init=False, factory=list)
    _weighted: list[_Weighted] = attrs.field(init=False, factory=list)
    #: the PlacementScore plugins when every one of them can bound its score, else None
    _bounded: list[tuple[BoundedPlacementScorePlugin, _Weighted]] | None = attrs.field(
        init=False, default=None
    )
    _handles: list[HandlePlugin] = attrs.field(init=False, factory=list)
    _explainers: list[ExplainGroupPlugin] = attrs.field(init=False, factory=list)
    #: the Reserve plugins that may apply to a pod without constraints and claims
    _everyone: list[ReservePlugin] = attrs.field(init=False, factory=list)
    #: the Reserve plugins whose ``feasible_rows`` mask is their whole Filter
    #: (``mask_is_filter``): a row their mask allows needs no ``filter_pod``
    _mask_filters: frozenset[int] = attrs.field(init=False, factory=frozenset)
    #: the Reserve plugins whose ``shape_key`` is always None (``shapeless``)
    _shapeless: frozenset[int] = attrs.field(init=False, factory=frozenset)
    #: the Reserve plugins whose PreEnqueue / PreBind may do something (the others say so:
    #: ``quiet_pre_enqueue`` / ``quiet_pre_bind``), and those of them in ``_everyone``
    _gating: tuple[list[ReservePlugin], list[ReservePlugin]] = attrs.field(
        init=False, factory=lambda: ([], [])
    )
    _pre_binding: tuple[list[ReservePlugin], list[ReservePlugin]] = attrs.field(
        init=False, factory=lambda: ([], [])
    )
    _reserve_names: frozenset[str] = attrs.field(init=False, default=frozenset())
    #: PodGroupPostFilter plugins by class (:meth:`post_filter_plugin`), found once
    _by_type: dict[type[Any], Any] = attrs.field(init=False, factory=dict)
    _events: list[tuple[str, ClusterEventWithHint]] | None = attrs.field(init=False, default=None)
    _hints: dict[ClusterEvent, list[QueueingHint | None]] = attrs.field(init=False, factory=dict)
    #: the node-only part of :meth:`run_filter_diagnosis` over every node, per signature,
    #: for one node epoch: (total, reasons, plugins, rows left for the usage filters)
    _static_diag: dict[
        PodRequirements, tuple[int, tuple[tuple[str, str, int], ...], frozenset[str], Rows]
    ] = attrs.field(init=False, factory=dict)
    _static_diag_epoch: int = attrs.field(init=False, default=-1)

    def __attrs_post_init__(self) -> None:
        self.refresh()

    def refresh(self) -> None:
        """Seal the framework: derive every list of plugins by capability (once; the runs
        only walk them). Call it again after changing the plugin lists in place."""
        self._static = [f for f in self.filters if not f.uses_node_usage]
        self._usage = [f for f in self.filters if f.uses_node_usage]
        self._usage_one = [(f if isinstance(f, FilterOnePlugin) else None, f) for f in self._usage]
        self._node_scores = [s for s in self.scores if callable(getattr(s, "score", None))]
        self._pod_scores = [s for s in self.scores if isinstance(s, PodScorePlugin)]
        self._score_one = [
            (s if isinstance(s, ScoreOnePlugin) else None, s) for s in self._node_scores
        ]
        # scores that read only the node object and the pod (``usage_independent``): a row's
        # value does not change as the cycle places pods, so a refresh skips them
        self._static_scores = [
            s for s in self._node_scores if getattr(s, "usage_independent", False) is True
        ]
        self._usage_score_one = [
            (one, s) for one, s in self._score_one if s not in self._static_scores
        ]
        self._pre_enqueue_tree = [
            p for p in self.pre_enqueue if isinstance(p, PreEnqueueTreePlugin)
        ]
        self._generate_for = [
            p for p in self.placement_generate if isinstance(p, PlacementGenerateForPlugin)
        ]
        self._weighted = [
            (p, p if isinstance(p, PlacementWeightPlugin) else None) for p in self.placement_score
        ]
        bounded: list[tuple[BoundedPlacementScorePlugin, _Weighted]] = [
            (p, w) for w in self._weighted if isinstance(p := w[0], BoundedPlacementScorePlugin)
        ]
        self._bounded = bounded if len(bounded) == len(self._weighted) else None
        self._handles = [p for p in self.pod_group_post_filter if isinstance(p, HandlePlugin)]
        self._explainers = [r for r in self.reserve if isinstance(r, ExplainGroupPlugin)]

        def everyone(r: ReservePlugin) -> bool:  # may apply to a pod without constraints
            return not (isinstance(r, PodScopedPlugin) and r.pod_scoped)

        self._everyone = [r for r in self.reserve if everyone(r)]
        self._mask_filters = frozenset(
            id(r) for r in self.reserve if getattr(r, "mask_is_filter", False) is True
        )
        self._shapeless = frozenset(
            id(r) for r in self.reserve if getattr(r, "shapeless", False) is True
        )
        gating = [r for r in self.reserve if getattr(r, "quiet_pre_enqueue", False) is not True]
        self._gating = (gating, [r for r in gating if everyone(r)])
        binding = [r for r in self.reserve if getattr(r, "quiet_pre_bind", False) is not True]
        self._pre_binding = (binding, [r for r in binding if everyone(r)])
        self._reserve_names = frozenset(r.name for r in self.reserve)
        self._by_type = {}
        self._events = None
        self._hints = {}
        self._static_diag = {}

    # ---- introspection ---------------------------------------------------------------

    @property
    def static_filters(self) -> list[FilterPlugin]:
        """Filters that only read node objects."""
        return list(self._static)

    @property
    def usage_filters(self) -> list[FilterPlugin]:
        """Filters that read node usage (re-run as pods are assumed)."""
        return list(self._usage)

    @property
    def reserve_names(self) -> frozenset[str]:
        """The names of the enabled Reserve plugins."""
        return self._reserve_names

    def post_filter_plugin(self, kind: type[_T]) -> _T | None:
        """The first enabled PodGroupPostFilter plugin of class ``kind`` (None when there is
        none), looked up once per class."""
        if kind not in self._by_type:
            self._by_type[kind] = next(
                (p for p in self.pod_group_post_filter if isinstance(p, kind)), None
            )
        return cast("_T | None", self._by_type[kind])

    def set_handle(self, handle: Any) -> None:
        """Give the scheduler's handle to every PodGroupPostFilter plugin that takes one
        (:class:`~workloadbuilder.scheduler._interface.HandlePlugin`)."""
        for p in self._handles:
            p.set_handle(handle)

    def plugins(self) -> list[Any]:
        """Every enabled plugin object once, in extension-point order."""
        seen: dict[int, Any] = {}
        for group in (
            self.pre_enqueue,
            self.filters,
            self.scores,
            self.placement_generate,
            self.placement_score,
            self.placement_feasible,
            self.pod_group_post_filter,
            self.bind,
            self.reserve,
        ):
            for p in group:
                seen.setdefault(id(p), p)
        return list(seen.values())

    def events_to_register(self) -> list[tuple[str, ClusterEventWithHint]]:
        """``(plugin name, registration)`` of every enabled plugin with EnqueueExtensions."""
        if self._events is None:
            out: list[tuple[str, ClusterEventWithHint]] = []
            for p in self.plugins():
                if isinstance(p, EnqueueExtensions):
                    out.extend((p.name, reg) for reg in p.events_to_register())
            self._events = out
        return self._events

    def hints_for(self, event: ClusterEvent) -> list[QueueingHint | None]:
        """The queueing hints of every enabled plugin that registered ``event`` (None for a
        registration without a hint: the event is always relevant). Empty: no enabled
        plugin cares, nothing is requeued. A hint that raises counts as "requeue"."""
        cached = self._hints.get(event)
        if cached is None:
            cached = []
            for name, reg in self.events_to_register():
                if reg.event.matches(event):
                    cached.append(None if reg.hint is None else _safe(name, reg.hint))
            self._hints[event] = cached
        return cached

    # ---- PreEnqueue ------------------------------------------------------------------

    def run_pre_enqueue(self, group: GroupInfo, lister: SharedLister) -> Status:
        """All PreEnqueue plugins; the first failure wins. Then the pod-level PreEnqueue of
        the Reserve plugins for every unscheduled member (one gated pod holds the group)."""
        for p in self.pre_enqueue:
            st = p.pre_enqueue_group(group, lister)
            if not st.ok:
                return attrs.evolve(st, plugin=p.name)
        if self.reserve:
            for member in sorted(lister.group_members(group), key=lambda m: m.name):
                if not member.scheduled and not member.deleting:
                    st = self.run_pre_enqueue_pod(member, lister)
                    if not st.ok:
                        return st
        return SUCCESS

    def run_pre_enqueue_pod(self, pod: PodInfo, lister: SharedLister) -> Status:
        """The pod-level PreEnqueue of the Reserve plugins; the first failure wins (those
        that never gate are not asked)."""
        for r in self._applying(self._gating, pod):
            st = r.pre_enqueue_pod(pod, lister)
            if not st.ok:
                return attrs.evolve(st, plugin=r.name)
        return SUCCESS

    def run_pre_enqueue_tree(self, tree: TreeNode, lister: SharedLister) -> Status:
        """PreEnqueue for a CompositePodGroup tree: every plugin that gates trees
        (``pre_enqueue_tree``); the first failure wins."""
        for p in self._pre_enqueue_tree:
            st = p.pre_enqueue_tree(tree, lister)
            if not st.ok:
                return attrs.evolve(st, plugin=p.name)
        return SUCCESS

    # ---- Filter ----------------------------------------------------------------------

    def run_static_filters(self, req: PodRequirements, table: NodeTable) -> Mask:
        """A boolean per row: present and passing every node-only filter (cached per
        signature and node epoch). Do not modify the result."""
        m = self.static_cache.get(req, table)
        if m is None:
            m = table.present.copy()
            vec = table.vector(req.requests)
            for f in self._static:
                rows = np.flatnonzero(m)
                if rows.size == 0:
                    break
                ok = f.filter(req, vec, table, rows)
                m[rows[~ok]] = False
            self.static_cache.put(req, table, m)
        return m

    def run_usage_filters(
        self, req: PodRequirements, vec: npt.NDArray[np.int64], table: NodeTable, rows: Rows
    ) -> Mask:
        """One boolean per row of ``rows``: passing every usage-dependent filter."""
        ok = np.ones(rows.size, dtype=bool)
        for f in self._usage:
            ok &= f.filter(req, vec, table, rows)
        return ok

    def run_usage_filters_one(
        self, req: PodRequirements, vec: npt.NDArray[np.int64], table: NodeTable, row: int
    ) -> bool:
        """:meth:`run_usage_filters` for one row (stops at the first failure)."""
        rows: Rows | None = None
        for one, f in self._usage_one:
            if one is not None:
                if not one.filter_one(req, vec, table, row):
                    return False
                continue
            if rows is None:
                rows = np.array([row], dtype=np.intp)
            if not f.filter(req, vec, table, rows)[0]:
                return False
        return True

    def run_filter_diagnosis(
        self, req: PodRequirements, table: NodeTable, placement: Placement
    ) -> Diagnosis:
        """Count, per filter, the nodes of the placement that reject ``req`` (first static
        filter that fails; every insufficient resource). Without a placement mask the
        node-only part is computed once per signature and node epoch (a backlog of equal
        pods failing after a node burst is explained without re-running them per attempt)."""
        vec = table.vector(req.requests)
        whole = placement.mask is None
        if table.epoch != self._static_diag_epoch:
            self._static_diag.clear()
            self._static_diag_epoch = table.epoch
        cached = self._static_diag.get(req) if whole else None
        if cached is not None:
            total, static_reasons, static_plugins, rows = cached
            reasons = list(static_reasons)
            plugins = set(static_plugins)
        else:
            candidates = table.present.copy()
            if placement.mask is not None:
                candidates &= placement.mask[: candidates.size]
            rows = np.flatnonzero(candidates)
            total = int(rows.size)
            reasons = []
            plugins = set()
            for f in self._static:
                if rows.size == 0:
                    break
                ok = f.filter(req, vec, table, rows)
                if not ok.all():
                    found = [r for r in f.diagnose(req, vec, table, rows[~ok]) if r[2]]
                    reasons.extend(found)
                    plugins.add(f.name)
                rows = rows[ok]
            if whole and table.epoch == self._static_diag_epoch:
                rows.flags.writeable = False
                self._static_diag[req] = (total, tuple(reasons), frozenset(plugins), rows)
        for f in self._usage:
            if rows.size == 0:
                break
            found = [r for r in f.diagnose(req, vec, table, rows) if r[2]]
            if found:
                reasons.extend(found)
                plugins.add(f.name)
        return Diagnosis(total=total, reasons=tuple(reasons), plugins=frozenset(plugins))

    # ---- Score -----------------------------------------------------------------------

    def run_score(
        self,
        req: PodRequirements,
        vec: npt.NDArray[np.int64],
        table: NodeTable,
        rows: Rows,
        gang: bool,
    ) -> npt.NDArray[np.float64]:
        """The weighted sum of every Score plugin, per row."""
        total = np.zeros(rows.size, dtype=np.float64)
        for s in self._node_scores:
            total += s.weight * s.score(req, vec, table, rows, gang)
        return total

    def run_score_parts(
        self,
        req: PodRequirements,
        vec: npt.NDArray[np.int64],
        table: NodeTable,
        rows: Rows,
        gang: bool,
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """:meth:`run_score` in two parts: the usage-independent plugins' weighted sum, and
        the others' (their total is :meth:`run_score`)."""
        static = np.zeros(rows.size, dtype=np.float64)
        usage = np.zeros(rows.size, dtype=np.float64)
        for s in self._node_scores:
            part = static if s in self._static_scores else usage
            part += s.weight * s.score(req, vec, table, rows, gang)
        return static, usage

    def run_usage_score_one(
        self,
        req: PodRequirements,
        vec: npt.NDArray[np.int64],
        table: NodeTable,
        row: int,
        gang: bool,
    ) -> float:
        """The usage-dependent part of :meth:`run_score_one` (the part a pod placed on
        ``row`` can change)."""
        return _score_row(self._usage_score_one, req, vec, table, row, gang)

    @property
    def pod_scoring(self) -> bool:
        """Whether any Score plugin scores per pod (:class:`PodScorePlugin`)."""
        return bool(self._pod_scores)

    def pod_scorers(self, pod: PodInfo, lister: SharedLister) -> list[PodScorePlugin]:
        """The per-pod Score plugins with something to score for ``pod`` now."""
        return [s for s in self._pod_scores if s.scores_pod(pod, lister)]

    def run_pod_score(
        self, scorers: Sequence[PodScorePlugin], pod: PodInfo, lister: SharedLister, rows: Rows
    ) -> npt.NDArray[np.float64]:
        """The weighted sum of ``scorers``' per-pod scores over ``rows``."""
        total = np.zeros(rows.size, dtype=np.float64)
        for s in scorers:
            total += s.weight * s.score_pod(pod, lister, rows)
        return total

    def run_score_one(
        self,
        req: PodRequirements,
        vec: npt.NDArray[np.int64],
        table: NodeTable,
        row: int,
        gang: bool,
    ) -> float:
        """:meth:`run_score` for one row: plugins with a ``score_one`` (same result, no
        one-element arrays) use it, the others their vectorised ``score``."""
        return _score_row(self._score_one, req, vec, table, row, gang)

    # ---- placements ------------------------------------------------------------------

    def run_placement_generate(
        self, group: GroupInfo, lister: SharedLister
    ) -> list[Placement] | Status:
        """Every PlacementGenerate plugin's candidates; all nodes when none has an opinion.
        The first plugin that answers with a non-success Status decides: no placement."""
        out: list[Placement] = []
        for p in self.placement_generate:
            got = p.generate(group, lister)
            if isinstance(got, Status):
                if not got.ok:
                    return attrs.evolve(got, plugin=p.name)
                continue
            out.extend(got)
        return out or [Placement()]

    def run_placement_generate_for(
        self, key: str, name: str, members: Sequence[PodInfo], lister: SharedLister
    ) -> list[Placement] | Status:
        """Placements for a CompositePodGroup's own constraint ``key`` (its subtree's pods are
        ``members``): every PlacementGenerate plugin that generates by key
        (``generate_for``); all nodes when none does."""
        out: list[Placement] = []
        for p in self._generate_for:
            got = p.generate_for(key, name, members, lister)
            if isinstance(got, Status):
                if not got.ok:
                    return attrs.evolve(got, plugin=p.name)
                continue
            out.extend(got)
        return out or [Placement()]

    def run_placement_score(
        self,
        group: GroupInfo,
        placement: Placement,
        assigned: Sequence[tuple[PodInfo, int]],
        lister: SharedLister,
        *,
        default: float,
    ) -> float:
        """The weighted PlacementScore sum, or ``default`` when no plugin scores."""
        if not self._weighted:
            return default
        return sum(
            _weight(w) * w[0].score_placement(group, placement, assigned, lister)
            for w in self._weighted
        )

    def run_placement_score_bounds(
        self,
        group: GroupInfo,
        candidates: PlacementSet,
        upper: Sequence[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]],
        lister: SharedLister,
        *,
        default: npt.NDArray[np.float64],
    ) -> npt.NDArray[np.float64] | None:
        """Upper bounds of :meth:`run_placement_score` per candidate (see
        ``BoundedPlacementScorePlugin``); None when some enabled PlacementScore plugin cannot
        bound its score (the cycle then simulates every candidate)."""
        if not self._weighted:
            return default
        if self._bounded is None:
            return None
        total = np.zeros(len(candidates), dtype=np.float64)
        for bounded, w in self._bounded:
            total += _weight(w) * bounded.score_placement_bounds(group, candidates, upper, lister)
        return total

    def run_placement_feasible(self, min_count: int, scheduled: int, remaining: int) -> Status:
        """All PlacementFeasible plugins; the first non-success wins."""
        for p in self.placement_feasible:
            st = p.placement_feasible(min_count, scheduled, remaining)
            if not st.ok:
                return attrs.evolve(st, plugin=p.name)
        return SUCCESS

    # ---- PodGroupPostFilter ----------------------------------------------------------

    def run_pod_group_post_filter(
        self, group: GroupInfo, lister: SharedLister, message: str
    ) -> Status:
        """PodGroupPostFilter plugins in order until one succeeds (upstream PostFilter);
        Unschedulable when none did (messages joined), Error on the first error."""
        messages: list[str] = []
        for p in self.pod_group_post_filter:
            st = p.post_filter(group, lister, message)
            if st.ok or st.code is Code.ERROR:
                return attrs.evolve(st, plugin=p.name)
            if st.message:
                messages.append(f"{p.name}: {st.message}")
        if not self.pod_group_post_filter:
            return Status(code=Code.UNSCHEDULABLE)
        return Status(code=Code.UNSCHEDULABLE, message="; ".join(messages))

    # ---- Reserve (per pod) -----------------------------------------------------------

    def reserving(self, pod: PodInfo) -> list[ReservePlugin]:
        """The Reserve plugins with something to check for ``pod``."""
        if not self.reserve:
            return []
        if pod.constraints is None and not pod.req.claims:  # most pods
            return [r for r in self._everyone if r.applies(pod)] if self._everyone else []
        return [r for r in self.reserve if r.applies(pod)]

    def _applying(
        self, plugins: tuple[list[ReservePlugin], list[ReservePlugin]], pod: PodInfo
    ) -> list[ReservePlugin]:
        """Those of :meth:`reserving` that are in ``plugins`` (all, those in ``_everyone``)."""
        every, everyone = plugins
        if not every:
            return []
        if pod.constraints is None and not pod.req.claims:  # as reserving()
            return [r for r in everyone if r.applies(pod)] if everyone else []
        return [r for r in every if r.applies(pod)]

    def run_reserve_pre_filter(
        self, plugins: Sequence[ReservePlugin], pod: PodInfo, lister: SharedLister
    ) -> Status:
        """PreFilter of ``plugins`` (what :meth:`reserving` gave for ``pod``): a verdict that
        holds on every node; the first failure wins, with its plugin's name."""
        for r in plugins:
            st = r.pre_filter_pod(pod, lister)
            if not st.ok:
                return attrs.evolve(st, plugin=r.name)
        return SUCCESS

    def run_reserve_shape_key(
        self, plugins: Sequence[ReservePlugin], pod: PodInfo, lister: SharedLister
    ) -> tuple[Any, ...] | None:
        """The plugins' shape keys of ``pod`` together (None when one of them shares
        nothing): pods with equal keys fail on the same nodes."""
        shapeless = self._shapeless
        if shapeless and any(id(r) in shapeless for r in plugins):
            return None
        keys = [r.shape_key(pod, lister) for r in plugins]
        return None if any(k is None for k in keys) else tuple(keys)

    def run_reserve_feasible_rows(
        self, plugins: Sequence[ReservePlugin], pod: PodInfo, lister: SharedLister
    ) -> list[Mask]:
        """The plugins' vectorised necessary conditions over node rows (those with one)."""
        return [m for m in (r.feasible_rows(pod, lister) for r in plugins) if m is not None]

    def run_reserve_masks(
        self, plugins: Sequence[ReservePlugin], pod: PodInfo, lister: SharedLister
    ) -> tuple[list[Mask], list[ReservePlugin]]:
        """As :meth:`run_reserve_feasible_rows`, and the plugins a row every mask allows
        still has to be filtered by (``checked`` of :meth:`run_reserve_pod`: the others'
        mask is their whole Filter)."""
        masks: list[Mask] = []
        rest: list[ReservePlugin] = []
        exact = self._mask_filters
        for r in plugins:
            m = r.feasible_rows(pod, lister)
            if m is None:
                rest.append(r)
            else:
                masks.append(m)
                if id(r) not in exact:
                    rest.append(r)
        return masks, rest

    def run_reserve_pod(
        self,
        plugins: Sequence[ReservePlugin],
        pod: PodInfo,
        lister: SharedLister,
        row: int,
        unchecked: Sequence[ReservePlugin] | None = None,
    ) -> bool:
        """Filter of ``plugins`` at ``row``, then, when every one has a plan, their Reserve
        (tentatively, in the lister). False (nothing reserved) when one has none.
        ``unchecked``: when given, the only plugins to filter (the others' masks from
        :meth:`run_reserve_masks` allow ``row``, in the lister's current state)."""
        if unchecked is None or len(unchecked) == len(plugins):
            plans = [r.filter_pod(pod, lister, row) for r in plugins]
        else:
            todo = {id(u) for u in unchecked}
            plans = [r.filter_pod(pod, lister, row) if id(r) in todo else True for r in plugins]
        if all(p is not None for p in plans):
            for r, plan in zip(plugins, plans, strict=True):
                r.reserve_pod(pod, lister, row, plan)
            return True
        return False

    def run_reserve_fits(
        self, plugins: Sequence[ReservePlugin], pod: PodInfo, lister: SharedLister, row: int
    ) -> bool:
        """Whether every one of ``plugins`` passes PreFilter and has a Filter plan for
        ``pod`` at ``row`` (nothing is reserved)."""
        return all(
            r.pre_filter_pod(pod, lister).ok and r.filter_pod(pod, lister, row) is not None
            for r in plugins
        )

    def split_pods_removable(
        self, plugins: Sequence[ReservePlugin]
    ) -> tuple[list[ReservePlugin], list[ReservePlugin]]:
        """``plugins`` as (those whose verdict does not change when pods leave a node, those
        whose verdict does: :class:`PodsRemovablePlugin`)."""
        fixed: list[ReservePlugin] = []
        removable: list[ReservePlugin] = []
        for r in plugins:
            (removable if isinstance(r, PodsRemovablePlugin) else fixed).append(r)
        return fixed, removable

    def run_reserve_all(self, pod: PodInfo, lister: SharedLister, row: int) -> bool:
        """PreFilter, Filter and Reserve of every Reserve plugin that applies to ``pod`` at
        ``row``, plugin by plugin (tentatively, in the lister); False at the first that
        cannot serve the pod there."""
        for r in self.reserving(pod):
            if not r.pre_filter_pod(pod, lister).ok:
                return False
            plan = r.filter_pod(pod, lister, row)
            if plan is None:
                return False
            r.reserve_pod(pod, lister, row, plan)
        return True

    def run_reserve_diagnosis(
        self, plugins: Sequence[ReservePlugin], pod: PodInfo, lister: SharedLister, rows: Rows
    ) -> Diagnosis:
        """Why ``plugins`` cannot serve ``pod`` on any of ``rows`` (the nodes that passed
        Filter), as a :class:`Diagnosis` over those rows."""
        reasons: list[tuple[str, str, int]] = []
        for r in plugins:
            reasons.extend(x for x in r.diagnose_pod(pod, lister, rows) if x[2])
        return Diagnosis(
            total=int(rows.size),
            reasons=tuple(reasons),
            plugins=frozenset(r.name for r in plugins),
        )

    def run_explain_group(
        self, pods: Sequence[PodInfo], placed: set[tuple[str, str]], lister: SharedLister
    ) -> list[str]:
        """The explanation lines of every Reserve plugin that explains gangs
        (:class:`~workloadbuilder.scheduler._interface.ExplainGroupPlugin`), in order."""
        out: list[str] = []
        for r in self._explainers:
            out.extend(r.explain_group(pods, placed, lister))
        return out

    def run_commit(self, reservations: Sequence[Any]) -> None:
        """Hand a successful cycle's tentative reservations to every Reserve plugin."""
        if reservations:
            for r in self.reserve:
                r.commit(reservations)

    async def run_unreserve(self, cluster: Cluster, pod: PodInfo) -> None:
        """Release what Reserve plugins hold for ``pod`` (its binding will not happen)."""
        for r in self.reserving(pod):
            try:
                await r.unreserve(cluster, pod)
            except Exception:
                _log.exception("unreserve of %s for %s/%s failed", r.name, *pod.key)

    # ---- Bind ------------------------------------------------------------------------

    async def run_bind(self, cluster: Cluster, pod: PodInfo, node: str) -> Status:
        """PreBind of the Reserve plugins, then Bind plugins in order until one succeeds;
        Error with the last message otherwise (and the reservations are released). Reserve
        plugins that write nothing before binding are not asked."""
        for r in self._applying(self._pre_binding, pod):
            pre = await r.pre_bind(cluster, pod, node)
            if not pre.ok:
                await self.run_unreserve(cluster, pod)
                return pre
        st: Status | None = None
        for b in self.bind:
            st = await b.bind(cluster, pod, node)
            if st.ok:
                return st
        await self.run_unreserve(cluster, pod)
        if st is None:
            return Status(code=Code.ERROR, message="no bind plugin")
        return st

    # ---- the handle: state shared with the plugins -----------------------------------

    def use_shared_dra_manager(self, manager: Any) -> bool:
        """Hand the scheduler's DRA manager to every enabled plugin that takes one (upstream's
        ``WithSharedDRAManager``, read by plugins as ``Handle.SharedDRAManager()``); whether
        one did (the scheduler feeds the manager only then)."""
        self.shared_dra_manager = manager
        takers = [p for p in self.plugins() if hasattr(p, "use_shared_dra_manager")]
        for p in takers:
            p.use_shared_dra_manager(manager)
        return bool(takers)

    def use_volume_state(self, state: Any) -> bool:
        """Hand the scheduler's volume state (PersistentVolumes, claims, storage classes, CSI
        nodes) to every enabled plugin that takes it, as :meth:`use_shared_dra_manager` does
        for DRA; whether one did (the scheduler feeds the state only then)."""
        takers = [p for p in self.plugins() if hasattr(p, "use_volume_state")]
        for p in takers:
            p.use_volume_state(state)
        return bool(takers)


def _score_row(
    plugins: Sequence[tuple[ScoreOnePlugin | None, ScorePlugin]],
    req: PodRequirements,
    vec: npt.NDArray[np.int64],
    table: NodeTable,
    row: int,
    gang: bool,
) -> float:
    """The weighted scores of one row: a plugin's ``score_one`` when it has one, else its
    vectorised ``score`` over that row."""
    total = 0.0
    rows: Rows | None = None
    for one, s in plugins:
        if one is not None:
            total += s.weight * float(one.score_one(req, vec, table, row, gang))
            continue
        if rows is None:
            rows = np.array([row], dtype=np.intp)
        total += s.weight * float(s.score(req, vec, table, rows, gang)[0])
    return total
