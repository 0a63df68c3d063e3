"""PodTopologySpread, gang-aware (see :mod:`._podconstraints` for what the cycle's placed
pods count for): the Filter of ``whenUnsatisfiable: DoNotSchedule`` constraints, the Score of
``ScheduleAnyway`` ones, and the default constraints of pods that have none of their own.

The Score is kube-scheduler v1.37.2's (``podtopologyspread/scoring.go``):

* the nodes scored are those that passed every filter; a node lacking a constraint's
  topology key is *ignored* (scores 0) unless the constraints are the system defaults (then
  a node without a zone label is still spread over by hostname);
* per constraint, matching pods of the pod's namespace (not terminating; an empty selector
  matches none) are counted per domain over every node that carries the keys and passes
  ``nodeAffinityPolicy`` / ``nodeTaintsPolicy``, counting only domains the scored nodes
  form; on ``kubernetes.io/hostname`` a node's own pods count, whatever the policies;
* a node's raw score is the sum over the constraints whose key it carries of
  ``count * log(domains + 2) + maxSkew - 1`` (``domains``: of the scored nodes; on hostname
  the nodes not ignored), rounded;
* normalised: ``100 * (max + min - raw) // max`` over the nodes not ignored (100 everywhere
  when ``max`` is 0), ignored nodes 0. The default profile weighs it 2.

Default constraints (``PodTopologySpreadArgs``): ``defaultingType: System`` (the default:
hostname ``maxSkew: 3`` and zone ``maxSkew: 5``, ``ScheduleAnyway``) or ``List`` with
``defaultConstraints``. They apply to a pod without ``topologySpreadConstraints`` of its own,
with the selector upstream's ``helper.DefaultSelector`` builds: the selectors of the pod's
namespace's Services that select it, merged with those of the ReplicationController, or with
the requirements of the ReplicaSet or StatefulSet, that controls it. A pod for which that
selector is empty gets none. ``DoNotSchedule`` defaults (``List``) filter too.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import numpy.typing as npt

from workloadbuilder.scheduler._interface import (
    SUCCESS,
    ClusterEventWithHint,
    Rows,
    SharedLister,
    Status,
)
from workloadbuilder.scheduler._nodematch import node_matches_affinity, tolerates_all
from workloadbuilder.scheduler._podconstraints import (
    ASSIGNED,
    NODE_EVENTS,
    SPREAD_LABEL_REASON,
    SPREAD_REASON,
    Domains,
    Mask,
    MaskPlugin,
    matching,
)
from workloadbuilder.scheduler._podspec import Selector, SpreadConstraint
from workloadbuilder.scheduler._resources import PodRequirements
from workloadbuilder.scheduler._snapshot import Snapshot

if TYPE_CHECKING:
    from workloadbuilder.scheduler._cache import NodeTable, PodInfo

__all__ = ["CONTROLLER_KINDS", "SYSTEM_DEFAULTS", "Controllers", "PodTopologySpread"]

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"

#: upstream's ``systemDefaultConstraints`` (their selector is set per pod)
SYSTEM_DEFAULTS: tuple[SpreadConstraint, ...] = (
    SpreadConstraint(max_skew=3, topology_key=HOSTNAME, selector=Selector(), hard=False),
    SpreadConstraint(max_skew=5, topology_key=ZONE, selector=Selector(), hard=False),
)

#: the kinds whose objects the default constraints' selectors are built from
CONTROLLER_KINDS = ("Service", "ReplicationController", "ReplicaSet", "StatefulSet")


class PodTopologySpread(MaskPlugin):
    """Topology spread constraints (kube-scheduler's PodTopologySpread): the Filter of the
    ``DoNotSchedule`` ones, the Score of the ``ScheduleAnyway`` ones, and the default
    constraints of pods without their own (``defaulting_type`` ``System`` or ``List`` with
    ``default_constraints``, as ``PodTopologySpreadArgs``)."""

    name = "PodTopologySpread"
    #: upstream's weight in the default profile
    weight = 2

    def __init__(
        self,
        *,
        defaulting_type: str = "System",
        default_constraints: Sequence[SpreadConstraint] = (),
    ) -> None:
        super().__init__()
        #: per node epoch and (constraints, signature): what does not change while the nodes
        #: do not (see :meth:`_static`)
        self._epoch: tuple[int, int, int] = (-1, -1, -1)
        self._statics: _SpreadStatic | None = None
        if defaulting_type not in ("System", "List"):
            raise ValueError(f"defaulting_type must be System or List, not {defaulting_type!r}")
        self.system_defaulted = defaulting_type == "System"
        defaults = SYSTEM_DEFAULTS if self.system_defaulted else tuple(default_constraints)
        self._hard_defaults = tuple(c for c in defaults if c.hard)
        self._soft_defaults = tuple(c for c in defaults if not c.hard)
        #: nothing to check for a pod without constraints, unless hard defaults apply to it
        self.pod_scoped = not self._hard_defaults
        #: the Services and controllers the default selectors are built from (fed by the
        #: scheduler when :attr:`needs_controllers`)
        self.controllers = Controllers()
        self._selectors: dict[Any, Selector | None] = {}
        self._selectors_version = -1
        self._with_selector: dict[tuple[Selector, bool], tuple[SpreadConstraint, ...]] = {}
        self._base: tuple[tuple[Any, ...], dict[Any, npt.NDArray[np.int64]]] = ((), {})

    @property
    def needs_controllers(self) -> bool:
        """Whether default constraints can apply (the scheduler then watches
        :data:`CONTROLLER_KINDS`)."""
        return bool(self._hard_defaults or self._soft_defaults)

    # ---- which constraints a pod has ---------------------------------------------------

    def default_selector(self, pod: PodInfo) -> Selector | None:
        """The selector of the pod's default constraints (upstream's
        ``helper.DefaultSelector``), or None when it is empty (no default applies)."""
        store = self.controllers
        space = store.namespaces.get(pod.namespace)
        if space is None:  # nothing selects or controls pods in the namespace
            return None
        if store.version != self._selectors_version:
            self._selectors.clear()
            self._selectors_version = store.version
        key = (pod.namespace, pod.controller, tuple(sorted(pod.labels.items())))
        if key in self._selectors:
            return self._selectors[key]
        got = space.selector_for(pod.labels, pod.controller)
        if len(self._selectors) > 10_000:
            self._selectors.clear()
        self._selectors[key] = got
        return got

    def constraints_of(self, pod: PodInfo, *, hard: bool) -> tuple[SpreadConstraint, ...]:
        """The pod's ``DoNotSchedule`` (``hard``) or ``ScheduleAnyway`` constraints: its own,
        or, when it has none at all, the default ones with its default selector."""
        c = pod.constraints
        if c is not None and c.spread:
            return tuple(s for s in c.spread if s.hard == hard)
        defaults = self._hard_defaults if hard else self._soft_defaults
        if not defaults:
            return ()
        selector = self.default_selector(pod)
        if selector is None:
            return ()
        got = self._with_selector.get((selector, hard))
        if got is None:
            if len(self._with_selector) > 10_000:  # bound it in long-running schedulers
                self._with_selector.clear()
            got = tuple(attrs.evolve(d, selector=selector) for d in defaults)
            self._with_selector[(selector, hard)] = got
        return got

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """A pod is bound or leaves its node, or a node appears or changes labels."""
        return [ASSIGNED, NODE_EVENTS]

    def applies(self, pod: PodInfo) -> bool:
        """Pods with ``DoNotSchedule`` constraints (their own or default ones)."""
        c = pod.constraints
        if c is not None and c.spread:
            return any(s.hard for s in c.spread)
        return bool(self._hard_defaults) and self.default_selector(pod) is not None

    def pre_filter_pod(self, pod: PodInfo, lister: SharedLister) -> Status:
        """Holds on every node."""
        return SUCCESS

    def _static(self, table: NodeTable) -> _SpreadStatic:
        token = (id(table), table.epoch, table.capacity)
        if token != self._epoch or self._statics is None:
            self._statics = _SpreadStatic(table, self.domains)
            self._epoch = token
        return self._statics

    def _evaluate(
        self, pod: PodInfo, lister: SharedLister
    ) -> tuple[Mask, list[tuple[str, str, Mask]]]:
        assert isinstance(lister, Snapshot)
        table = lister.table
        hard = self.constraints_of(pod, hard=True)
        st = self._static(table)
        keys = tuple(sorted({c.topology_key for c in hard}))
        missing = st.missing(keys)
        skewed = np.zeros(table.capacity, dtype=bool)
        details: list[str] = []
        ns = pod.namespace
        for c in hard:
            ids, _ = self.domains.of(table, c.topology_key)
            eligible, seen, domains = st.domains_of(keys, c, pod.req)
            per_domain = np.zeros(seen.size, dtype=np.int64)
            for _p, row in _matching(lister, c.selector, ns):
                if eligible[row]:
                    per_domain[ids[row]] += 1

            def add(
                state: npt.NDArray[np.int64],
                p: PodInfo,
                row: int,
                c: SpreadConstraint = c,
                eligible: Mask = eligible,
                ids: npt.NDArray[np.int64] = ids,
            ) -> None:
                if eligible[row] and p.namespace == ns and _counts_pod(c.selector, p):
                    state[ids[row]] += 1

            start = functools.partial(_counts, seen.size)
            placed = self.folds.get(("spread", c, ns, pod.req), lister, start, add)
            per_domain += placed
            low = int(per_domain[seen].min()) if domains else 0
            if domains < c.min_domains:
                low = 0
            limit = c.max_skew + low - (1 if c.selector.matches(pod.labels) else 0)
            bad = (per_domain > limit)[ids] & st.keyed(c.topology_key)
            if bad.any():
                details.append(f"{c.describe()} (domain minimum {low})")
                skewed |= bad
        skewed &= ~missing
        long_skew = "would exceed " + "; ".join(details) if details else "would exceed maxSkew"
        return ~(missing | skewed) & st.present, [
            (SPREAD_LABEL_REASON, "lack a topology key of the pod's spread constraints", missing),
            (SPREAD_REASON, long_skew, skewed),
        ]

    # ---- Score ---------------------------------------------------------------------------

    def scores_pod(self, pod: PodInfo, lister: SharedLister) -> bool:
        """Pods with ``ScheduleAnyway`` constraints (their own or default ones); O(1) for a
        pod without constraints in a namespace no Service or controller is known in."""
        c = pod.constraints
        if c is not None and c.spread:
            return not all(s.hard for s in c.spread)
        return bool(self._soft_defaults) and self.default_selector(pod) is not None

    def score_pod(self, pod: PodInfo, lister: SharedLister, rows: Rows) -> npt.NDArray[np.float64]:
        """Upstream's PreScore, Score and NormalizeScore over ``rows`` (the nodes that passed
        every filter): 0..100, the emptiest domains highest."""
        assert isinstance(lister, Snapshot)
        constraints = self.constraints_of(pod, hard=False)
        c = pod.constraints
        own = c is not None and bool(c.spread)
        return spread_scores(
            self._static(lister.table),
            self.domains,
            constraints,
            rows,
            lambda s: self._row_counts(lister, s, pod.namespace),
            pod.req,
            require_all=own or not self.system_defaulted,
        )

    def _row_counts(self, lister: Snapshot, selector: Selector, ns: str) -> npt.NDArray[np.int64]:
        """Per node row, the pods matching ``selector`` in ``ns`` counted there: the cache's
        (kept while it does not change) plus the ones the cycle placed."""
        table = lister.table
        size = table.capacity
        token = (id(lister), lister.cache.version, lister.removed_version, size)
        if self._base[0] != token:
            self._base = (token, {})
        bases = self._base[1]
        base = bases.get((selector, ns))
        if base is None:
            found = [row for _, row in _matching(lister, selector, ns)]
            base = np.bincount(np.asarray(found, dtype=np.int64), minlength=size)[:size]
            bases[(selector, ns)] = base

        def add(state: npt.NDArray[np.int64], p: PodInfo, row: int) -> None:
            if p.namespace == ns and _counts_pod(selector, p):
                state[row] += 1

        start = functools.partial(_counts, size)
        placed = self.folds.get(("spread-rows", selector, ns, size), lister, start, add)
        out: npt.NDArray[np.int64] = base + placed
        return out


def spread_scores(
    st: _SpreadStatic,
    domains: Domains,
    constraints: Sequence[SpreadConstraint],
    rows: Rows,
    row_counts: Any,
    req: PodRequirements,
    *,
    require_all: bool,
) -> npt.NDArray[np.float64]:
    """PodTopologySpread's normalised scores of ``rows`` for ``constraints``; ``row_counts``
    gives per node row the matching pods of a selector there."""
    table = st.table
    out = np.zeros(rows.size, dtype=np.float64)
    if not constraints or rows.size == 0:
        return out
    keys = tuple(sorted({c.topology_key for c in constraints}))
    kept_mask = st.all_keys(keys)[rows] if require_all else np.ones(rows.size, dtype=bool)
    kept = rows[kept_mask]
    if kept.size == 0:
        return out
    raw = np.zeros(kept.size, dtype=np.float64)
    for c in constraints:
        ids, values = domains.of(table, c.topology_key)
        per_row = row_counts(c.selector)
        d = ids[kept]  # -1: the node lacks the key (only when not require_all)
        has = d >= 0
        if c.topology_key == HOSTNAME:
            size = kept.size
            counts = per_row[kept].astype(np.float64)
        else:
            slot = np.where(d >= 0, d, len(values))  # the last slot: "no such label"
            formed = np.zeros(len(values) + 1, dtype=bool)
            formed[slot] = True
            size = int(formed.sum())
            eligible = st.all_keys(keys) if require_all else st.present
            if c.honor_node_affinity:
                eligible = eligible & st.affine(req)
            if c.honor_node_taints:
                eligible = eligible & st.tolerated(req)
            er = np.flatnonzero(eligible[: per_row.size])
            er_ids = ids[er]
            er_slot = np.where(er_ids >= 0, er_ids, len(values))
            per_domain = np.bincount(
                er_slot, weights=per_row[er].astype(np.float64), minlength=len(values) + 1
            )
            counts = per_domain[slot]
        weight = math.log(size + 2)
        raw += np.where(has, counts * weight + (c.max_skew - 1), 0.0)
    scores = np.floor(raw + 0.5).astype(np.int64)  # Go's math.Round (non-negative numbers)
    low, high = int(scores.min()), int(scores.max())
    if high == 0:
        out[kept_mask] = 100.0
    else:
        out[kept_mask] = (100 * (high + low - scores)) // high
    return out


def _counts_pod(selector: Selector, p: PodInfo) -> bool:
    """Whether a pod counts for a constraint's selector: an empty selector counts none
    (upstream's ``countPodsMatchSelector``), nor does a terminating pod."""
    return not selector.everything and not p.deleting and selector.matches(p.labels)


def _matching(lister: Snapshot, selector: Selector, ns: str) -> list[tuple[PodInfo, int]]:
    """The counted pods of ``ns`` that count for ``selector``, with their rows."""
    if selector.everything or selector.nothing:
        return []
    return [(p, row) for p, row in matching(lister, selector, ns.__eq__) if not p.deleting]


class Controllers:
    """The Services (their selectors), ReplicationControllers, ReplicaSets and StatefulSets
    the default constraints' selectors are built from, per namespace, kept by
    :meth:`handler`'s informer events."""

    def __init__(self) -> None:
        self.namespaces: dict[str, _Namespace] = {}
        #: incremented on every change
        self.version = 0

    def handler(self, kind: str) -> Any:
        """The feed handler for ``kind`` (one of :data:`CONTROLLER_KINDS`)."""

        def on_event(event: str, obj: Any) -> None:
            self.version += 1
            if event == "SYNC":
                for space in self.namespaces.values():
                    space.by_kind[kind].clear()
                for o in obj:
                    if isinstance(o, Mapping):
                        self._put(kind, o)
            elif isinstance(obj, Mapping):
                if event == "DELETED":
                    meta = obj.get("metadata") or {}
                    gone = self.namespaces.get(str(meta.get("namespace") or "default"))
                    if gone is not None:
                        gone.by_kind[kind].pop(str(meta.get("name")), None)
                else:
                    self._put(kind, obj)
            for ns in [n for n, s in self.namespaces.items() if s.empty()]:
                del self.namespaces[ns]

        return on_event

    def _put(self, kind: str, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        ns = str(meta.get("namespace") or "default")
        name = str(meta.get("name"))
        raw = spec.get("selector")
        value: Any
        if kind in ("Service", "ReplicationController"):
            # a map of labels; a Service without one selects nothing
            value = {str(k): str(v) for k, v in raw.items()} if isinstance(raw, Mapping) else None
            if kind == "Service" and not value:
                space = self.namespaces.get(ns)
                if space is not None:
                    space.by_kind[kind].pop(name, None)
                return
        else:
            value = Selector.parse(raw)
        self.namespaces.setdefault(ns, _Namespace()).by_kind[kind][name] = value


class _Namespace:
    """One namespace's Services and controllers, by kind and name."""

    def __init__(self) -> None:
        self.by_kind: dict[str, dict[str, Any]] = {k: {} for k in CONTROLLER_KINDS}

    def empty(self) -> bool:
        return not any(self.by_kind.values())

    def selector_for(
        self, labels: Mapping[str, str], controller: tuple[str, str, str] | None
    ) -> Selector | None:
        """``helper.DefaultSelector``: the merged selectors of the Services selecting a pod
        with ``labels``, with its ReplicationController's merged in or its ReplicaSet's /
        StatefulSet's requirements added; None when empty."""
        pairs: dict[str, str] = {}
        for sel in self.by_kind["Service"].values():
            if all(labels.get(k) == v for k, v in sel.items()):
                pairs.update(sel)
        extra: tuple[tuple[str, str, frozenset[str]], ...] = ()
        if controller is not None:
            api_version, kind, name = controller
            if (api_version, kind) == ("v1", "ReplicationController"):
                rc = self.by_kind[kind].get(name)
                if rc:
                    pairs.update(rc)
            elif (api_version, kind) in (("apps/v1", "ReplicaSet"), ("apps/v1", "StatefulSet")):
                sel = self.by_kind[kind].get(name)
                if isinstance(sel, Selector) and not sel.nothing:
                    extra = sel.reqs
        if not pairs and not extra:
            return None
        base = Selector.parse({"matchLabels": pairs})
        reqs = tuple(sorted({*base.reqs, *extra}, key=lambda r: (r[0], r[1], sorted(r[2]))))
        return Selector(reqs)


class _SpreadStatic:
    """What spread constraints see of the nodes, for one node epoch, each part worked out once
    and kept: the present rows; per topology key the rows that carry it; per set of keys the
    present rows missing one; per signature the rows its node affinity admits and those whose
    taints it tolerates; per (keys, policies, signature) the rows that count and the domains
    they form."""

    def __init__(self, table: NodeTable, domains: Domains) -> None:
        self.table = table
        self.domains = domains
        self.present = np.zeros(table.capacity, dtype=bool)
        self.present[table.present_rows()] = True
        self._keyed: dict[str, Mask] = {}
        self._all: dict[tuple[str, ...], Mask] = {}
        self._affine: dict[PodRequirements, Mask] = {}
        self._tolerated: dict[PodRequirements, Mask] = {}
        self._counted: dict[Any, tuple[Mask, Mask, int]] = {}

    def keyed(self, key: str) -> Mask:
        """Present rows that carry ``key``."""
        got = self._keyed.get(key)
        if got is None:
            got = self._keyed[key] = self.present & (self.domains.of(self.table, key)[0] >= 0)
        return got

    def all_keys(self, keys: tuple[str, ...]) -> Mask:
        """Present rows that carry every key of ``keys``."""
        got = self._all.get(keys)
        if got is None:
            got = self.present.copy()
            for k in keys:
                got &= self.keyed(k)
            self._all[keys] = got
        return got

    def missing(self, keys: tuple[str, ...]) -> Mask:
        """Present rows without one of ``keys``."""
        return self.present & ~self.all_keys(keys)

    def affine(self, req: PodRequirements) -> Mask:
        """Present rows the signature's node selector and required affinity admit."""
        got = self._affine.get(req)
        if got is None:
            if not req.node_selector and not req.affinity:
                got = self.present
            else:
                got = np.zeros(self.table.capacity, dtype=bool)
                t = self.table
                for r in np.flatnonzero(self.present):
                    got[r] = node_matches_affinity(req, t.labels[r], t.names[r] or "")
            self._affine[req] = got
        return got

    def tolerated(self, req: PodRequirements) -> Mask:
        """Present rows whose taints the signature tolerates."""
        got = self._tolerated.get(req)
        if got is None:
            t = self.table
            got = self.present.copy()
            tolerations = req.toleration_list()
            for r in np.flatnonzero(self.present & t.tainted[: self.present.size]):
                got[r] = tolerates_all(tolerations, t.taints[r])
            self._tolerated[req] = got
        return got

    def domains_of(
        self, keys: tuple[str, ...], c: SpreadConstraint, req: PodRequirements
    ) -> tuple[Mask, Mask, int]:
        """``(rows that count, domain ids seen among them, how many)`` for ``c``."""
        who = req if (c.honor_node_affinity or c.honor_node_taints) else None
        token = (keys, c.topology_key, c.honor_node_affinity, c.honor_node_taints, who)
        got = self._counted.get(token)
        if got is None:
            eligible = self.all_keys(keys)
            if c.honor_node_affinity:
                eligible = eligible & self.affine(req)
            if c.honor_node_taints:
                eligible = eligible & self.tolerated(req)
            ids, values = self.domains.of(self.table, c.topology_key)
            seen = np.zeros(len(values) + 1, dtype=bool)  # the last entry: no such label
            seen[ids[eligible]] = True
            seen[-1] = False
            got = self._counted[token] = (eligible, seen, int(seen.sum()))
        return got


def _counts(size: int) -> npt.NDArray[np.int64]:
    """A count per domain id (and one for "no such label"), all 0."""
    return np.zeros(size, dtype=np.int64)
