"""The framework runtime (kube-scheduler's ``framework/runtime``): the enabled plugins per
extension point and every ``run_*`` that calls them.

Filters that only read node properties (``uses_node_usage = False``) are evaluated once per
signature and node epoch in the :class:`StaticFilterCache` beside the framework; the others
are re-evaluated incrementally by the cycle as pods are assumed. Nothing outside this module
loops over plugins.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

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
    FilterPlugin,
    Mask,
    Placement,
    PlacementFeasiblePlugin,
    PlacementGeneratePlugin,
    PlacementScorePlugin,
    PlacementSet,
    PodGroupPostFilterPlugin,
    PreEnqueuePlugin,
    QueueingHint,
    ReservePlugin,
    Rows,
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


def _placement_weight(p: PlacementScorePlugin) -> int:
    """A plugin's PlacementScore weight (``placement_weight`` when it also scores nodes)."""
    return int(getattr(p, "placement_weight", p.weight))


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
    _events: list[tuple[str, ClusterEventWithHint]] | None = attrs.field(init=False, default=None)
    _hints: dict[ClusterEvent, list[QueueingHint | None]] = attrs.field(init=False, factory=dict)
    _bounded: bool | None = attrs.field(init=False, default=None)
    #: the node-only part of :meth:`run_filter_diagnosis` over every node, per signature,
    #: for one node epoch: (total, reasons, plugins, rows left for the usage filters)
    _static_diag: dict[
        PodRequirements, tuple[int, tuple[tuple[str, str, int], ...], frozenset[str], Rows]
    ] = attrs.field(init=False, factory=dict)
    _static_diag_epoch: int = attrs.field(init=False, default=-1)

    def __attrs_post_init__(self) -> None:
        self.refresh()

    def refresh(self) -> None:
        """Recompute derived lists after the plugin lists were changed in place."""
        self._static = [f for f in self.filters if not f.uses_node_usage]
        self._usage = [f for f in self.filters if f.uses_node_usage]
        self._events = None
        self._hints = {}
        self._bounded = None
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
        """The pod-level PreEnqueue of the Reserve plugins; the first failure wins."""
        for r in self.reserving(pod):
            st = r.pre_enqueue_pod(pod, lister)
            if not st.ok:
                return attrs.evolve(st, plugin=r.name)
        return SUCCESS

    def run_pre_enqueue_tree(self, tree: TreeNode, lister: SharedLister) -> Status:
        """PreEnqueue for a CompositePodGroup tree: every plugin that gates trees
        (``pre_enqueue_tree``); the first failure wins."""
        for p in self.pre_enqueue:
            fn = getattr(p, "pre_enqueue_tree", None)
            if fn is None:
                continue
            st = fn(tree, lister)
            assert isinstance(st, Status)
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
        for f in self._usage:
            one = getattr(f, "filter_one", None)
            if one is not None:
                if not one(req, vec, table, row):
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
        for s in self.scores:
            total += s.weight * s.score(req, vec, table, rows, gang)
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
        total = 0.0
        rows: Rows | None = None
        for s in self.scores:
            one = getattr(s, "score_one", None)
            if one is not None:
                total += s.weight * float(one(req, vec, table, row, gang))
                continue
            if rows is None:
                rows = np.array([row], dtype=np.intp)
            total += s.weight * float(s.score(req, vec, table, rows, gang)[0])
        return total

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
        for p in self.placement_generate:
            fn = getattr(p, "generate_for", None)
            if fn is None:
                continue
            got = fn(key, name, members, lister)
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
        if not self.placement_score:
            return default
        return sum(
            _placement_weight(p) * p.score_placement(group, placement, assigned, lister)
            for p in self.placement_score
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
        if not self.placement_score:
            return default
        if self._bounded is None:
            self._bounded = all(
                isinstance(p, BoundedPlacementScorePlugin) for p in self.placement_score
            )
        if not self._bounded:
            return None
        total = np.zeros(len(candidates), dtype=np.float64)
        for p in self.placement_score:
            bounded = cast(BoundedPlacementScorePlugin, p)
            total += _placement_weight(p) * bounded.score_placement_bounds(
                group, candidates, upper, lister
            )
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
        return [r for r in self.reserve if r.applies(pod)] if self.reserve else []

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
        Error with the last message otherwise (and the reservations are released)."""
        for r in self.reserving(pod):
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
