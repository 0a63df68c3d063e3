"""Pods' own placement constraints, gang-aware: NodePorts and InterPodAffinity (its Filter and
its Score) here, PodTopologySpread (its Filter and Score, default constraints) in
:mod:`._podtopologyspread`, and the volume plugins (VolumeBinding, VolumeRestrictions,
VolumeZone, NodeVolumeLimits) in :mod:`._volumes`; this module also holds what they share.

They are Reserve plugins (asked pod by pod for the node the cycle is about to choose), because
what they check depends on the pods placed before: inside one PodGroup or CompositePodGroup
cycle, the pods the cycle has already placed count as existing pods, exactly as bound ones do.
So a gang whose pods repel each other on ``kubernetes.io/hostname`` lands on distinct nodes, a
gang with ``maxSkew: 1`` across zones is balanced as a whole, and a gang that cannot satisfy
them binds nothing. Preemption victims removed from the snapshot no longer count.

The semantics are kube-scheduler v1.37.2's Filter of each plugin
(``pkg/scheduler/framework/plugins/{nodeports,interpodaffinity,podtopologyspread}``):

* **NodePorts**: a node fails when a pod counted there uses the same protocol and port on the
  same host IP (``0.0.0.0`` overlaps every IP). Terminating pods still hold their ports.
* **InterPodAffinity**: the incoming pod's affinity terms need, on the node's value of each
  term's topology key, a pod matching all its terms (or, when no pod anywhere matches them,
  the pod matching its own terms: the first pod of a self-affine group); the node must carry
  every term's key. Its anti-affinity terms fail a node whose value of the key holds a
  matching pod. The anti-affinity terms of the pods already counted hold against the incoming
  pod (symmetry): a node in a domain where such a term matches the incoming pod fails.
  A term's ``namespaceSelector`` with requirements selects namespaces by their labels (the
  Namespace informer's view, :class:`NamespaceLabels`), with its ``namespaces``.
* **InterPodAffinity's Score** (a per-pod Score plugin, weight 2 in the default profile): per
  value of each term's topology key, the weights of the incoming pod's preferred affinity
  terms matched by counted (and placed) pods there, minus those of its preferred
  anti-affinity terms; plus the counted pods' preferred terms that match the incoming pod
  (symmetry; skipped for a pod without preferences with ``ignorePreferredTermsOfExistingPods``)
  and ``hardPodAffinityWeight`` per required affinity term of a counted pod that matches it.
  A node scores the sum over its labels, scaled min-max to 0..100 over the rows that passed
  the filters.
* **PodTopologySpread**: for each ``DoNotSchedule`` constraint, the node must carry the key;
  matching pods of the pod's namespace (not terminating) are counted per domain over the nodes
  that carry every constraint's key and pass ``nodeAffinityPolicy`` / ``nodeTaintsPolicy``;
  the node fails when its domain's count + 1 (if the pod matches its own selector) minus the
  smallest domain count exceeds ``maxSkew`` (the minimum is 0 while there are fewer domains
  than ``minDomains``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import numpy.typing as npt

from workloadbuilder.scheduler._interface import (
    SUCCESS,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    Rows,
    SharedLister,
    Status,
)
from workloadbuilder.scheduler._podindex import ScoreTerm, score_terms
from workloadbuilder.scheduler._podspec import (
    AffinityTerm,
    NamespaceLabelsView,
    PodConstraints,
    Selector,
)
from workloadbuilder.scheduler._snapshot import Snapshot

if TYPE_CHECKING:
    from workloadbuilder.cluster import Cluster
    from workloadbuilder.scheduler._cache import Cache, NodeTable, PodInfo

__all__ = [
    "ASSIGNED",
    "ASSIGNED_DELETE",
    "NODE_EVENTS",
    "Domains",
    "InterPodAffinity",
    "Mask",
    "MaskPlugin",
    "NamespaceLabels",
    "NodePorts",
    "ReserveBase",
    "matching",
    "shared_namespaces",
]

Mask = npt.NDArray[np.bool_]

#: upstream's Filter reasons (the short reason of a FailedScheduling event)
PORTS_REASON = "node(s) didn't have free ports for the requested pod ports"
AFFINITY_REASON = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_REASON = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY_REASON = "node(s) didn't satisfy existing pods anti-affinity rules"
SPREAD_REASON = "node(s) didn't match pod topology spread constraints"
SPREAD_LABEL_REASON = (
    "node(s) didn't match pod topology spread constraints (missing required label)"
)

NODE_EVENTS = ClusterEventWithHint(ClusterEvent("Node", ActionType.ADD | ActionType.UPDATE_NODE))
ASSIGNED = ClusterEventWithHint(ClusterEvent("AssignedPod", ActionType.ADD | ActionType.DELETE))
ASSIGNED_DELETE = ClusterEventWithHint(ClusterEvent("AssignedPod", ActionType.DELETE))


# ---- what a cycle sees: counted pods, less removed victims, plus the cycle's own -----------------


def cache_of(lister: SharedLister) -> Cache | None:
    return lister.cache if isinstance(lister, Snapshot) else None


def matching(
    lister: Snapshot, selector: Selector, namespaces: Callable[[str], bool]
) -> Iterator[tuple[PodInfo, int]]:
    """The counted pods (less removed victims) that match ``selector`` in a namespace
    ``namespaces`` accepts, with their rows (the cycle's placed pods: :class:`_PlacedFolds`)."""
    cache = lister.cache
    removed = lister.removed
    for p in cache.index.candidates(selector, cache.running.values()):
        row = p.counted_node
        if row is None or (removed and p.key in removed):
            continue
        if namespaces(p.namespace) and selector.matches(p.labels):
            yield p, row


def assumed(lister: Snapshot) -> list[tuple[PodInfo, int]]:
    """The pods the cycle placed so far (not yet counted in the cache), with their rows."""
    return lister.placed


S = TypeVar("S")


class _PlacedFolds:
    """Per key, a fold over the pods the cycle placed (``Snapshot.placed``) that is extended
    as the cycle places more: each placed pod is folded once per key, not once per question
    (a gang's pods otherwise cost the square of its size). A revert is noticed by the identity
    of the last entry folded."""

    def __init__(self) -> None:
        self._lister = 0
        self._folds: dict[Any, tuple[int, Any, Any]] = {}

    def get(
        self,
        key: Any,
        lister: Snapshot,
        start: Callable[[], S],
        step: Callable[[S, PodInfo, int], None],
    ) -> S:
        """The fold of ``step`` over the placed pods, from ``start()``."""
        placed = lister.placed
        if id(lister) != self._lister:
            self._folds.clear()
            self._lister = id(lister)
        got = self._folds.get(key)
        if got is not None:
            n, last, state = got
            if n <= len(placed) and (n == 0 or placed[n - 1] is last):
                for p, row in placed[n:]:
                    step(state, p, row)
                if len(placed) != n:
                    self._folds[key] = (len(placed), placed[-1], state)
                return state  # type: ignore[no-any-return]
        state = start()
        for p, row in placed:
            step(state, p, row)
        self._folds[key] = (len(placed), placed[-1] if placed else None, state)
        return state


class Domains:
    """Per topology key, each node row's domain as a small integer (-1: no such label), for
    one node-table epoch."""

    def __init__(self) -> None:
        self._key: tuple[int, int, int] = (-1, -1, -1)
        self._ids: dict[str, tuple[npt.NDArray[np.int64], dict[str, int]]] = {}
        self._rows: dict[str, list[npt.NDArray[np.int64]]] = {}
        self._lists: dict[str, list[int]] = {}

    def of(self, table: NodeTable, key: str) -> tuple[npt.NDArray[np.int64], dict[str, int]]:
        """``(row -> domain id, value -> domain id)`` of ``key`` over present nodes."""
        if (
            id(table) != self._key[0]
            or table.epoch != self._key[1]
            or len(table.names) != self._key[2]  # (its capacity)
        ):
            self._ids.clear()
            self._rows.clear()
            self._lists.clear()
            self._key = (id(table), table.epoch, table.capacity)
        got = self._ids.get(key)
        if got is None:
            ids = np.full(table.capacity, -1, dtype=np.int64)
            values: dict[str, int] = {}
            for row in table.present_rows():
                v = table.labels[row].get(key)
                if v is not None:
                    ids[row] = values.setdefault(v, len(values))
            got = self._ids[key] = (ids, values)
        return got

    def id_list(self, table: NodeTable, key: str) -> list[int]:
        """:meth:`of`'s row -> domain id as a list (for lookups of single rows)."""
        ids, _ = self.of(table, key)  # (first: it clears the lists on a new epoch)
        got = self._lists.get(key)
        if got is None:
            got = self._lists[key] = ids.tolist()
        return got

    def rows_of(self, table: NodeTable, key: str) -> list[npt.NDArray[np.int64]]:
        """Per domain id of ``key``, its rows (ascending)."""
        ids, values = self.of(table, key)  # (first: it clears both on a new epoch)
        got = self._rows.get(key)
        if got is None:
            order = np.argsort(ids, kind="stable")
            sorted_ids = ids[order]
            bounds = np.searchsorted(sorted_ids, np.arange(len(values) + 1))
            got = self._rows[key] = [order[bounds[i] : bounds[i + 1]] for i in range(len(values))]
        return got


class ReserveBase:
    """The parts of the Reserve protocol these plugins do not use: nothing to write before
    binding and nothing to release (the cycle's assumptions are the state)."""

    name = ""

    @property
    def quiet_pre_enqueue(self) -> bool:
        """Whether :meth:`pre_enqueue_pod` is this class's (never gates: the framework skips
        it), unless a subclass gates."""
        return type(self).pre_enqueue_pod is ReserveBase.pre_enqueue_pod

    @property
    def shapeless(self) -> bool:
        """Whether :meth:`shape_key` is this class's (always None: the framework does not
        ask it), unless a subclass shares failures."""
        return type(self).shape_key is ReserveBase.shape_key

    @property
    def quiet_pre_bind(self) -> bool:
        """Whether :meth:`pre_bind` is this class's (writes nothing: the framework skips
        it), unless a subclass writes."""
        return type(self).pre_bind is ReserveBase.pre_bind

    def pre_enqueue_pod(self, pod: PodInfo, lister: SharedLister) -> Status:
        """Never gates a pod."""
        return SUCCESS

    def shape_key(self, pod: PodInfo, lister: SharedLister) -> Any:
        """No sharing of failed rows between pods (what fails changes as pods are placed)."""
        return None

    def reserve_pod(self, pod: PodInfo, lister: SharedLister, row: int, plan: Any) -> None:
        """Nothing to hold: the cycle's assumption of the pod is what later pods see."""

    def commit(self, reservations: Sequence[Any]) -> None:
        """Nothing kept."""

    async def pre_bind(self, cluster: Cluster, pod: PodInfo, node: str) -> Status:
        """Nothing to write."""
        return SUCCESS

    async def unreserve(self, cluster: Cluster, pod: PodInfo) -> None:
        """Nothing to release."""


class MaskPlugin(ReserveBase):
    """A plugin whose verdict over all rows is one mask per pod and cycle state; the last
    mask is kept so that ``filter_pod`` on candidate rows costs a lookup."""

    #: its verdict changes when pods leave a node (preemption asks again without victims)
    frees_with_victims = True

    @property
    def mask_is_filter(self) -> bool:
        """Whether :meth:`feasible_rows` is the whole Filter (``filter_pod`` reads the same
        mask: the framework skips it on a row the mask allows), unless a subclass filters
        otherwise."""
        return type(self).filter_pod is MaskPlugin.filter_pod

    def __init__(self) -> None:
        self._last: tuple[Any, tuple[Any, ...], Mask, list[tuple[str, str, Mask]]] | None = None
        self.domains = Domains()
        self.folds = _PlacedFolds()

    def _evaluate(
        self, pod: PodInfo, lister: SharedLister
    ) -> tuple[Mask, list[tuple[str, str, Mask]]]:
        """``(feasible mask, [(short, long, failing mask)...])`` for ``pod`` now."""
        raise NotImplementedError

    def _token(self) -> Any:
        """What else the verdict depends on (beyond the cycle's state)."""
        return None

    def _verdict(
        self, pod: PodInfo, lister: SharedLister
    ) -> tuple[Mask, list[tuple[str, str, Mask]]]:
        assert isinstance(lister, Snapshot)
        token = (  # the cache's counted pods, the victims removed, the pods assumed (the
            # snapshot's log position), the node table, and what the plugin adds
            id(lister),
            lister.mark(),
            lister.removed_version,
            lister.cache.version,
            lister.table.epoch,
            self._token(),
        )
        last = self._last
        if last is not None and last[0] is pod and last[1] == token:
            return last[2], last[3]
        mask, why = self._evaluate(pod, lister)
        self._last = (pod, token, mask, why)
        return mask, why

    def feasible_rows(self, pod: PodInfo, lister: SharedLister) -> Mask | None:
        """The rows where the pod passes now."""
        if cache_of(lister) is None:
            return None
        return self._verdict(pod, lister)[0]

    def filter_pod(self, pod: PodInfo, lister: SharedLister, row: int) -> Any:
        """True when the pod passes on ``row`` now, else None."""
        if cache_of(lister) is None:
            return True
        mask = self._verdict(pod, lister)[0]
        return True if row < mask.size and mask[row] else None

    def diagnose_pod(
        self, pod: PodInfo, lister: SharedLister, rows: Rows
    ) -> list[tuple[str, str, int]]:
        """Per reason, the rows of ``rows`` that fail for it (each row under its first)."""
        if cache_of(lister) is None or rows.size == 0:
            return []
        _, why = self._verdict(pod, lister)
        left = np.ones(rows.size, dtype=bool)
        out: list[tuple[str, str, int]] = []
        for short, long_, failing in why:
            hit = failing[rows] & left
            n = int(hit.sum())
            if n:
                out.append((short, long_, n))
                left &= ~hit
        return out


# ---- NodePorts -----------------------------------------------------------------------------------


class NodePorts(MaskPlugin):
    """A node cannot run two pods asking for the same host port (kube-scheduler's
    NodePorts)."""

    name = "NodePorts"
    #: nothing to check for a pod without constraints
    pod_scoped = True

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """A pod holding ports leaves its node, or a node appears."""
        return [ASSIGNED_DELETE, NODE_EVENTS]

    def applies(self, pod: PodInfo) -> bool:
        """Only pods asking for host ports."""
        return pod.constraints is not None and bool(pod.constraints.host_ports)

    def pre_filter_pod(self, pod: PodInfo, lister: SharedLister) -> Status:
        """Holds on every node."""
        return SUCCESS

    def _evaluate(
        self, pod: PodInfo, lister: SharedLister
    ) -> tuple[Mask, list[tuple[str, str, Mask]]]:
        assert pod.constraints is not None and isinstance(lister, Snapshot)
        want = pod.constraints.host_ports
        table = lister.table
        failing = np.zeros(table.capacity, dtype=bool)
        taken: dict[str, int] = {}
        cache = lister.cache
        removed = lister.removed
        holders: list[tuple[PodInfo, int]] = []
        for hp in want:
            for p in cache.index.ports.get((hp.protocol, hp.port), {}).values():
                row = p.counted_node
                if row is not None and (not removed or p.key not in removed):
                    holders.append((p, row))
        placed = self.folds.get("ports", lister, dict, _fold_ports)
        for hp in want:
            holders.extend(placed.get((hp.protocol, hp.port), ()))
        for other, row in holders:
            if other is pod or failing[row] or other.constraints is None:
                continue
            for mine in want:
                hit = next((h for h in other.constraints.host_ports if mine.conflicts(h)), None)
                if hit is not None:
                    failing[row] = True
                    taken[str(mine)] = taken.get(str(mine), 0) + 1
                    break
        ports = ", ".join(sorted(taken)) or ", ".join(str(h) for h in want)
        return ~failing, [(PORTS_REASON, f"already use host port {ports}", failing)]


class _Flags:
    """Per domain of one topology key, whether a placed pod holding a term is there, kept
    as the cycle places pods (a boolean per domain id, plus one for "no such label")."""

    __slots__ = ("flags", "key", "rows", "seen")

    def __init__(self, key: str) -> None:
        self.key = key
        self.rows: list[int] = []
        self.seen = 0
        self.flags: npt.NDArray[np.bool_] | None = None

    def __call__(self, table: NodeTable, domains: Domains) -> npt.NDArray[np.bool_]:
        ids, values = domains.of(table, self.key)
        if self.flags is None or self.flags.size != len(values) + 1:
            self.flags = np.zeros(len(values) + 1, dtype=bool)
            self.seen = 0
        for row in self.rows[self.seen :]:
            d = ids[row]
            if d >= 0:
                self.flags[d] = True
        self.seen = len(self.rows)
        return self.flags


def _fold_matching(
    t: AffinityTerm, ns: NamespaceLabelsView, state: _Flags, p: PodInfo, row: int
) -> None:
    if t.matches(p.namespace, p.labels, ns):
        state.rows.append(row)


class _Rows:
    """Rows of placed pods (a row once per pod), and each pod's row by its key."""

    __slots__ = ("by_key", "rows")

    def __init__(self) -> None:
        self.rows: list[int] = []
        self.by_key: dict[tuple[str, str], int] = {}

    def add(self, p: PodInfo, row: int) -> None:
        self.rows.append(row)
        self.by_key[p.key] = row


def _fold_term_rows(
    t: AffinityTerm, ns: NamespaceLabelsView, state: _Rows, p: PodInfo, row: int
) -> None:
    """The placed pods a preferred term of the incoming pod matches."""
    if t.matches(p.namespace, p.labels, ns):
        state.add(p, row)


def _fold_score_holders(state: dict[ScoreTerm, _Rows], p: PodInfo, row: int) -> None:
    """Per score term (:data:`~._podindex.ScoreTerm`), the placed pods holding it."""
    c = p.constraints
    if c is None or not (c.affinity or c.preferred_affinity or c.preferred_anti_affinity):
        return
    for st in score_terms(c):
        got = state.get(st)
        if got is None:
            got = state[st] = _Rows()
        got.add(p, row)


def _fold_anti_holders(
    state: dict[AffinityTerm, tuple[dict[tuple[str, str], int], _Flags]], p: PodInfo, row: int
) -> None:
    """Per anti-affinity term of the placed pods: their rows by pod key, and domain flags."""
    for t in p.constraints.anti_affinity if p.constraints is not None else ():
        got = state.get(t)
        if got is None:
            got = state[t] = ({}, _Flags(t.topology_key))
        got[0][p.key] = row
        got[1].rows.append(row)


def _fold_ports(
    state: dict[tuple[str, int], list[tuple[PodInfo, int]]], p: PodInfo, row: int
) -> None:
    for hp in p.constraints.host_ports if p.constraints is not None else ():
        state.setdefault((hp.protocol, hp.port), []).append((p, row))


class _DomainMarks:
    """Rows failing because of per-domain marks, kept as the cycle places pods: per topology
    key, which domains are marked, and the failing rows (an array never changed once handed
    out by :meth:`take`: a later mark copies it first)."""

    __slots__ = ("domains", "failing", "keys", "shared", "table")

    def __init__(self, table: NodeTable, domains: Domains) -> None:
        self.table, self.domains = table, domains
        self.failing = np.zeros(table.capacity, dtype=bool)
        #: per key: each row's domain id, each domain's rows, the domains marked (for the
        #: node epoch the marks live in: the owner drops them with it)
        self.keys: dict[str, tuple[list[int], list[npt.NDArray[np.int64]], list[bool]]] = {}
        self.shared = False

    def mark(self, key: str, row: int) -> None:
        """Fail every row in ``row``'s domain of ``key`` (nothing when it has no such label)."""
        got = self.keys.get(key)
        if got is None:
            rows_of = self.domains.rows_of(self.table, key)
            got = self.keys[key] = (
                self.domains.id_list(self.table, key),
                rows_of,
                [False] * len(rows_of),
            )
        ids_of, rows_of, flags = got
        d = ids_of[row]
        if d < 0 or flags[d]:
            return
        flags[d] = True
        if self.shared:
            self.failing = self.failing.copy()
            self.shared = False
        self.failing[rows_of[d]] = True

    def take(self) -> Mask:
        """The failing rows now (not to be changed by the caller)."""
        self.shared = True
        return self.failing


class _AntiIn:
    """The incoming pods' anti-affinity ``terms`` against the counted pods (built once per
    cycle state) and the cycle's placed pods (folded as they are placed): pods with equal
    terms share it."""

    __slots__ = ("marks", "ns", "terms")

    def __init__(
        self,
        terms: tuple[AffinityTerm, ...],
        ns: NamespaceLabelsView,
        lister: Snapshot,
        domains: Domains,
        in_namespace: Callable[[AffinityTerm], Callable[[str], bool]],
    ) -> None:
        self.terms, self.ns = terms, ns
        self.marks = _DomainMarks(lister.table, domains)
        for t in terms:
            for _, row in matching(lister, t.selector, in_namespace(t)):
                self.marks.mark(t.topology_key, row)

    def step(self, p: PodInfo, row: int) -> None:
        """A placed pod: the domains of the terms it matches fail."""
        for t in self.terms:
            if t.matches(p.namespace, p.labels, self.ns):
                self.marks.mark(t.topology_key, row)


class _Existing:
    """The rows in a domain where a counted or placed pod holds one of ``terms`` (the
    anti-affinity terms, held by some pod, that match the incoming pods): pods matching the
    same terms share it. ``held``: whether any such pod was seen (upstream's verdict then
    has the reason even where no row fails)."""

    __slots__ = ("held", "marks", "terms")

    def __init__(self, terms: frozenset[AffinityTerm], lister: Snapshot, domains: Domains) -> None:
        self.terms = terms
        self.marks = _DomainMarks(lister.table, domains)
        self.held = False
        removed = lister.removed
        anti = lister.cache.index.anti_terms
        for t in terms:
            for other in anti.get(t, {}).values():
                row = other.counted_node
                if row is not None and (not removed or other.key not in removed):
                    self.held = True
                    self.marks.mark(t.topology_key, row)

    def step(self, p: PodInfo, row: int) -> None:
        """A placed pod: the domains of the terms it holds fail."""
        for t in p.constraints.anti_affinity if p.constraints is not None else ():
            if t in self.terms:
                self.held = True
                self.marks.mark(t.topology_key, row)


# ---- InterPodAffinity ----------------------------------------------------------------------------


_EXISTING_TEXT = "are in a domain where a pod's anti-affinity repels this pod"

#: upstream's default and bounds of ``InterPodAffinityArgs.hardPodAffinityWeight``
HARD_POD_AFFINITY_WEIGHT = 1
MAX_HARD_POD_AFFINITY_WEIGHT = 100


def _namespace_labels(obj: Any) -> Any:
    if not isinstance(obj, dict):
        return obj  # (the initial list: every label is new)
    return (obj.get("metadata") or {}).get("labels") or {}


def _namespace_labels_changed(key: tuple[str, str, str], old: Any, new: Any) -> bool:
    """A Namespace event may change what a namespaceSelector matches: only when labels
    change (or appear: an added or listed namespace)."""
    return bool(_namespace_labels(old) != _namespace_labels(new))


class NamespaceLabels:
    """The Namespace informer's view, for pod affinity terms with a ``namespaceSelector``:
    each namespace's labels (``labels``, kept as one dict updated in place), whether the
    informer has listed them (``watched``) and a version bumped on every label change."""

    def __init__(self) -> None:
        self.labels: dict[str, dict[str, str]] = {}
        self.watched = False
        self.version = 0

    def on_namespace(self, kind: str, obj: Any) -> None:
        """A Namespace informer event (``SYNC`` with the list, ``ADDED``, ``MODIFIED``,
        ``DELETED``)."""
        if kind == "SYNC":
            fresh = {
                str(o["metadata"]["name"]): dict(_namespace_labels(o))
                for o in obj
                if isinstance(o, dict)
            }
            if fresh != self.labels:
                self.labels.clear()
                self.labels.update(fresh)
                self.version += 1
            self.watched = True
            return
        name = str(obj["metadata"]["name"])
        if kind == "DELETED":
            if self.labels.pop(name, None) is not None:
                self.version += 1
            return
        labels = {str(k): str(v) for k, v in _namespace_labels(obj).items()}
        if self.labels.get(name) != labels:
            self.labels[name] = labels
            self.version += 1

    def previous(self, kind: str, obj: Any) -> Any:
        """The namespace as known before this event (None: not known)."""
        if not isinstance(obj, dict):
            return None
        name = str(obj["metadata"]["name"])
        labels = self.labels.get(name)
        return None if labels is None else {"metadata": {"name": name, "labels": dict(labels)}}


def shared_namespaces(plugins: Iterable[object]) -> NamespaceLabels | None:
    """The one Namespace view the InterPodAffinity plugins among ``plugins`` share (None:
    there is none, nothing needs Namespaces)."""
    found: NamespaceLabels | None = None
    for p in plugins:
        if isinstance(p, InterPodAffinity):
            if found is None:
                found = p.namespaces
            p.namespaces = found
    return found


class InterPodAffinity(MaskPlugin):
    """Required pod affinity and anti-affinity, and the anti-affinity of the pods already
    counted against the incoming pod (kube-scheduler's InterPodAffinity Filter); preferred
    pod affinity and anti-affinity of the incoming pod and of the pods counted, and the
    required affinity of the pods counted times ``hard_pod_affinity_weight`` (its Score)."""

    name = "InterPodAffinity"
    #: the default profile's Score weight (upstream's)
    weight = 2

    def __init__(
        self,
        *,
        hard_pod_affinity_weight: int = HARD_POD_AFFINITY_WEIGHT,
        ignore_preferred_terms_of_existing_pods: bool = False,
    ) -> None:
        super().__init__()
        if not 0 <= hard_pod_affinity_weight <= MAX_HARD_POD_AFFINITY_WEIGHT:
            raise ValueError(
                f"hardPodAffinityWeight must be in 0..{MAX_HARD_POD_AFFINITY_WEIGHT}, "
                f"not {hard_pod_affinity_weight}"
            )
        self.hard_pod_affinity_weight = hard_pod_affinity_weight
        self.ignore_preferred_terms_of_existing_pods = ignore_preferred_terms_of_existing_pods
        #: the namespaces' labels (the scheduler feeds them: :func:`shared_namespaces`)
        self.namespaces = NamespaceLabels()
        self._cache: Cache | None = None
        #: the snapshot and log position of the first pod with anti-affinity terms this
        #: cycle placed (so pods without terms are checked against it while it is there)
        self._anti_snap: Snapshot | None = None
        self._anti_mark = 0
        #: the cycle state (less the placed pods) ``_states`` were built for, and the
        #: verdict parts pods share (:class:`_AntiIn`, :class:`_Existing`), extended as the
        #: cycle places pods
        self._base: tuple[Any, ...] = ()
        self._states = _PlacedFolds()
        #: anti-affinity terms -> the text of their reason
        self._texts: dict[tuple[AffinityTerm, ...], str] = {}

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """A pod is bound or leaves its node, a node appears or changes labels, or a
        Namespace's labels change (what a namespaceSelector matches)."""
        return [
            ASSIGNED,
            NODE_EVENTS,
            ClusterEventWithHint(
                ClusterEvent("Namespace", ActionType.ADD | ActionType.UPDATE_OBJECT),
                _namespace_labels_changed,
            ),
        ]

    def _token(self) -> Any:
        return self.namespaces.version

    def _in_namespace(self, t: AffinityTerm) -> Callable[[str], bool]:
        return functools.partial(t.in_namespace, ns_labels=self.namespaces.labels)

    def applies(self, pod: PodInfo) -> bool:
        """Pods with required terms, pods whose terms read Namespace labels while they are
        not watched (refused), and every pod while some counted pod (or a pod placed in the
        current cycle) has anti-affinity terms."""
        c = pod.constraints
        if c is not None and (c.affinity or c.anti_affinity):
            return True
        if (
            c is not None
            and c.has_preferred_pod_affinity
            and not self.namespaces.watched
            and c.needs_namespace_labels
        ):
            return True
        if self._cache is None or self._cache.index.anti_terms:
            return True  # (before its first evaluation it has not seen the cache: to be safe)
        snap = self._anti_snap
        return snap is not None and snap.mark() > self._anti_mark

    def pre_filter_pod(self, pod: PodInfo, lister: SharedLister) -> Status:
        """A term whose namespaceSelector needs Namespace labels is refused while the
        scheduler does not watch Namespaces (not served, or not allowed to list them)."""
        c = pod.constraints
        if c is not None and not self.namespaces.watched and c.needs_namespace_labels:
            return Status(
                code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                message=(
                    "InterPodAffinity: a pod affinity term has a namespaceSelector with "
                    "requirements, and this scheduler does not watch Namespaces (not "
                    "served, or not allowed to list and watch them)"
                ),
                plugin=self.name,
            )
        return SUCCESS

    def reserve_pod(self, pod: PodInfo, lister: SharedLister, row: int, plan: Any) -> None:
        """Remember that the cycle now holds a pod with anti-affinity terms."""
        c = pod.constraints
        if not (c is not None and c.anti_affinity and isinstance(lister, Snapshot)):
            return
        if self._anti_snap is not lister or lister.mark() < self._anti_mark:
            self._anti_snap, self._anti_mark = lister, lister.mark()

    # ---- Score ---------------------------------------------------------------------------

    def scores_pod(self, pod: PodInfo, lister: SharedLister) -> bool:
        """The pod has preferred terms, or (unless ``ignorePreferredTermsOfExistingPods``)
        a counted pod or a pod placed in this cycle holds a term the Score reads against it
        (a lookup of the index's count, and a fold over the cycle's placed pods)."""
        c = pod.constraints
        if c is not None and (c.preferred_affinity or c.preferred_anti_affinity):
            return True
        if self.ignore_preferred_terms_of_existing_pods or not isinstance(lister, Snapshot):
            return False
        if lister.cache.index.score_terms:
            return True
        if not lister.placed:
            return False
        return bool(self.folds.get("score-holders", lister, dict, _fold_score_holders))

    def score_pod(self, pod: PodInfo, lister: SharedLister, rows: Rows) -> npt.NDArray[np.float64]:
        """Upstream's PreScore, Score and NormalizeScore: per topology value, the weights
        of the incoming pod's preferred terms matched by counted (and placed) pods there
        (anti-affinity negative), of the counted pods' preferred terms matching the incoming
        pod, and ``hard_pod_affinity_weight`` per counted pod whose required affinity term
        matches it; a node scores the sum over its labels, then min-max to 0..100 over
        ``rows`` (all 0 when nothing contributed or every row scores the same)."""
        out = np.zeros(rows.size, dtype=np.float64)
        if not isinstance(lister, Snapshot) or rows.size == 0:
            return out
        raw = self.raw_scores(pod, lister, rows)
        if raw is None:
            return out
        lo, hi = int(raw.min()), int(raw.max())
        if hi > lo:
            out = np.trunc(100.0 * ((raw - lo).astype(np.float64) / float(hi - lo)))
        return out

    def raw_scores(
        self, pod: PodInfo, lister: Snapshot, rows: Rows
    ) -> npt.NDArray[np.int64] | None:
        """Upstream's Score before normalisation, per row of ``rows`` (None: no term
        contributed anywhere, upstream's PreScore Skip)."""
        table = lister.table
        ns = self.namespaces.labels
        per_key: dict[str, npt.NDArray[np.int64]] = {}

        def add(key: str, at: Sequence[int], w: int) -> None:
            if not at or w == 0:
                return
            ids, values = self.domains.of(table, key)
            d = ids[np.asarray(at, dtype=np.int64)]
            d = d[d >= 0]
            if d.size == 0:
                return
            arr = per_key.get(key)
            if arr is None:
                arr = per_key[key] = np.zeros(len(values) + 1, dtype=np.int64)
            arr += w * np.bincount(d, minlength=len(values) + 1)

        c = pod.constraints
        preferring = c is not None and c.has_preferred_pod_affinity
        if c is not None and preferring:
            for sign, terms in ((1, c.preferred_affinity), (-1, c.preferred_anti_affinity)):
                for wt in terms:
                    t = wt.term
                    hits = [
                        row
                        for p, row in matching(lister, t.selector, self._in_namespace(t))
                        if p.key != pod.key
                    ]
                    add(t.topology_key, hits, sign * wt.weight)
                    placed = self.folds.get(
                        ("preferred", t), lister, _Rows, functools.partial(_fold_term_rows, t, ns)
                    )
                    add(t.topology_key, placed.rows, sign * wt.weight)
                    mine = placed.by_key.get(pod.key)
                    if mine is not None:  # (re-evaluating a placed pod: not itself)
                        add(t.topology_key, [mine], -sign * wt.weight)
        if preferring or not self.ignore_preferred_terms_of_existing_pods:
            removed = lister.removed
            hard = self.hard_pod_affinity_weight
            for (t, w, is_hard), holders in lister.cache.index.score_terms.items():
                weight = hard * w if is_hard else w
                if weight == 0 or not t.matches(
                    pod.namespace, pod.labels, ns, unknown_as_empty=True
                ):
                    continue
                at = [
                    row
                    for o in holders.values()
                    if (row := o.counted_node) is not None
                    and o.key != pod.key
                    and (not removed or o.key not in removed)
                ]
                add(t.topology_key, at, weight)
            if lister.placed:
                held: dict[ScoreTerm, _Rows] = self.folds.get(
                    "score-holders", lister, dict, _fold_score_holders
                )
                for (t, w, is_hard), got in held.items():
                    weight = hard * w if is_hard else w
                    if weight == 0 or not t.matches(
                        pod.namespace, pod.labels, ns, unknown_as_empty=True
                    ):
                        continue
                    add(t.topology_key, got.rows, weight)
                    mine = got.by_key.get(pod.key)
                    if mine is not None:
                        add(t.topology_key, [mine], -weight)
        if not per_key:
            return None
        raw = np.zeros(rows.size, dtype=np.int64)
        for key, arr in per_key.items():
            raw += arr[self.domains.of(table, key)[0][rows]]
        return raw

    # ---- Filter ----------------------------------------------------------------------------

    def _affinity_counts(
        self, terms: tuple[AffinityTerm, ...], lister: Snapshot
    ) -> dict[tuple[str, str], int]:
        """Per ``(topology key, value)``: the counted and placed pods matching all of the
        affinity ``terms`` (upstream's ``affinityCounts``)."""
        labels_of = lister.table.labels
        ns = self.namespaces.labels

        def add(state: dict[tuple[str, str], int], p: PodInfo, row: int) -> None:
            if not all(t.matches(p.namespace, p.labels, ns) for t in terms):
                return
            labels = labels_of[row]
            for t in terms:
                v = labels.get(t.topology_key)
                if v is not None:
                    state[(t.topology_key, v)] = state.get((t.topology_key, v), 0) + 1

        counts: dict[tuple[str, str], int] = {}
        first = terms[0]
        for p, row in matching(lister, first.selector, self._in_namespace(first)):
            add(counts, p, row)
        placed: dict[tuple[str, str], int] = self.folds.get(("terms", terms), lister, dict, add)
        for pair, n in placed.items():
            counts[pair] = counts.get(pair, 0) + n
        return counts

    def _evaluate(
        self, pod: PodInfo, lister: SharedLister
    ) -> tuple[Mask, list[tuple[str, str, Mask]]]:
        assert isinstance(lister, Snapshot)
        if self._cache is None:
            self._cache = lister.cache
        table = lister.table
        cap = table.capacity
        c = pod.constraints
        why: list[tuple[str, str, Mask]] = []
        if c is not None and c.affinity:
            failing = self._affinity_failing(pod, c, lister)
            text = "do not match pod affinity " + "; ".join(t.describe() for t in c.affinity)
            why.append((AFFINITY_REASON, text, failing))
        shared = self._shared_parts(pod, lister)
        if shared is not None:
            anti, existing = shared
            if anti is not None:
                assert c is not None
                why.append((ANTI_AFFINITY_REASON, self._anti_text(c.anti_affinity), anti))
            if existing is not None:
                why.append((EXISTING_ANTI_AFFINITY_REASON, _EXISTING_TEXT, existing))
            if not why:
                return np.ones(cap, dtype=bool), why
            bad = why[0][2]
            for _, _, more in why[1:]:
                bad = bad | more
            return ~bad, why
        ok = np.ones(cap, dtype=bool)
        if why:
            ok &= ~why[0][2]
        if c is not None and c.anti_affinity:
            failing = np.zeros(cap, dtype=bool)
            for t in c.anti_affinity:
                ids, _ = self.domains.of(table, t.topology_key)
                placed = self.folds.get(
                    ("anti-in", t),
                    lister,
                    functools.partial(_Flags, t.topology_key),
                    functools.partial(_fold_matching, t, self.namespaces.labels),
                )
                bad = placed(table, self.domains)
                copied = False
                for _, row in matching(lister, t.selector, self._in_namespace(t)):
                    d = ids[row]
                    if d >= 0:
                        if not copied:
                            bad, copied = bad.copy(), True
                        bad[d] = True
                failing |= bad[ids]
            why.append(
                (
                    ANTI_AFFINITY_REASON,
                    "hold a pod repelled by anti-affinity "
                    + "; ".join(t.describe() for t in c.anti_affinity),
                    failing,
                )
            )
            ok &= ~failing
        existing = self._existing_failing(pod, lister)
        if existing is not None:
            why.append(
                (
                    EXISTING_ANTI_AFFINITY_REASON,
                    _EXISTING_TEXT,
                    existing,
                )
            )
            ok &= ~existing
        return ok, why

    def _anti_text(self, terms: tuple[AffinityTerm, ...]) -> str:
        got = self._texts.get(terms)
        if got is None:
            if len(self._texts) > 10_000:
                self._texts.clear()
            got = self._texts[terms] = "hold a pod repelled by anti-affinity " + "; ".join(
                t.describe() for t in terms
            )
        return got

    def _shared_parts(
        self, pod: PodInfo, lister: Snapshot
    ) -> tuple[Mask | None, Mask | None] | None:
        """``(rows failing the pod's anti-affinity terms or None without terms, rows failing
        the counted and placed pods' anti-affinity or None when none matches)``, from the
        parts pods of equal terms (and matching the same held terms) share, extended by the
        pods placed since; None for a pod counted or placed itself (evaluated on its own:
        it must not count against itself)."""
        if pod.counted_node is not None:
            return None
        table = lister.table
        base = (
            lister.removed_version,
            lister.cache.version,
            id(table),
            table.epoch,
            table.capacity,
            self.namespaces.version,
        )
        if base != self._base:
            self._base = base
            self._states = _PlacedFolds()
        states = self._states
        if lister.placed and lister.is_placed(pod.key):
            return None
        ns = self.namespaces.labels
        c = pod.constraints
        anti: Mask | None = None
        if c is not None and c.anti_affinity:
            terms = c.anti_affinity
            got: _AntiIn = states.get(
                ("anti-in", terms),
                lister,
                functools.partial(_AntiIn, terms, ns, lister, self.domains, self._in_namespace),
                _AntiIn.step,
            )
            anti = got.marks.take()
        held: set[AffinityTerm] = set()
        for t in lister.cache.index.anti_terms_for(pod.labels):
            if t.matches(pod.namespace, pod.labels, ns, unknown_as_empty=True):
                held.add(t)
        if lister.placed:
            placed = self.folds.get("anti-holders", lister, dict, _fold_anti_holders)
            for t in placed:
                if t not in held and t.matches(
                    pod.namespace, pod.labels, ns, unknown_as_empty=True
                ):
                    held.add(t)
        if not held:
            return anti, None
        which = frozenset(held)
        ex: _Existing = states.get(
            ("existing", which),
            lister,
            functools.partial(_Existing, which, lister, self.domains),
            _Existing.step,
        )
        return anti, ex.marks.take() if ex.held else None

    def _affinity_failing(self, pod: PodInfo, c: PodConstraints, lister: Snapshot) -> Mask:
        table = lister.table
        counts = self._affinity_counts(c.affinity, lister)
        has_keys = np.zeros(table.capacity, dtype=bool)
        has_keys[table.present_rows()] = True
        exist = has_keys.copy()
        for t in c.affinity:
            ids, values = self.domains.of(table, t.topology_key)
            has_keys &= ids >= 0
            good = np.zeros(len(values) + 1, dtype=bool)  # the last entry: no such label
            for v, i in values.items():
                good[i] = counts.get((t.topology_key, v), 0) > 0
            exist &= good[ids]
        ns = self.namespaces.labels
        if not counts and all(t.matches(pod.namespace, pod.labels, ns) for t in c.affinity):
            return ~has_keys  # the first pod of a self-affine group: any node with the keys
        return ~(has_keys & exist)

    def _existing_failing(self, pod: PodInfo, lister: Snapshot) -> Mask | None:
        """Rows in a domain where a counted pod's anti-affinity term matches ``pod``."""
        cache = lister.cache
        table = lister.table
        removed = lister.removed
        holders: list[tuple[AffinityTerm, int]] = []
        ns = self.namespaces.labels
        for t in cache.index.anti_terms_for(pod.labels):
            if not t.matches(pod.namespace, pod.labels, ns, unknown_as_empty=True):
                continue
            for other in cache.index.anti_terms[t].values():
                row = other.counted_node
                if (
                    row is not None
                    and other is not pod
                    and (not removed or other.key not in removed)
                ):
                    holders.append((t, row))
        placed = self.folds.get("anti-holders", lister, dict, _fold_anti_holders)
        flags: list[tuple[str, Mask]] = []
        for t, (rows, by_domain) in placed.items():
            if not t.matches(pod.namespace, pod.labels, ns, unknown_as_empty=True):
                continue
            if pod.key in rows:  # (re-evaluating a placed pod: not against itself)
                holders.extend((t, r) for k, r in rows.items() if k != pod.key)
            else:
                flags.append((t.topology_key, by_domain(table, self.domains)))
        if not holders and not flags:
            return None
        bad: dict[str, npt.NDArray[np.bool_]] = {}
        for key, domain_flags in flags:
            _, values = self.domains.of(table, key)
            per_key = bad.get(key)
            if per_key is None:
                bad[key] = domain_flags.copy()
            else:
                per_key |= domain_flags
        for t, row in holders:
            v = table.labels[row].get(t.topology_key)
            if v is None:
                continue
            _, values = self.domains.of(table, t.topology_key)
            per_key = bad.get(t.topology_key)
            if per_key is None:
                per_key = bad[t.topology_key] = np.zeros(len(values) + 1, dtype=bool)
            per_key[values[v]] = True
        failing = np.zeros(table.capacity, dtype=bool)
        for key, per_key in bad.items():
            failing |= per_key[self.domains.of(table, key)[0]]
        return failing

    def explain_group(
        self, pods: Sequence[PodInfo], placed: set[tuple[str, str]], lister: SharedLister
    ) -> list[str]:
        """Per anti-affinity term the gang's pods hold against each other: ``anti-affinity
        app=w on kubernetes.io/hostname: 3 nodes for 4 pods``."""
        table = lister.table
        out: list[str] = []
        seen: set[AffinityTerm] = set()
        for pod in pods:
            c = pod.constraints
            for t in c.anti_affinity if c is not None else ():
                if t in seen:
                    continue
                seen.add(t)
                ns = self.namespaces.labels
                mates = sum(1 for q in pods if t.matches(q.namespace, q.labels, ns))
                _, values = self.domains.of(table, t.topology_key)
                if mates > len(values):
                    noun = "nodes" if t.topology_key == "kubernetes.io/hostname" else "domains"
                    out.append(
                        f"anti-affinity {t.describe()}: {len(values)} {noun} for {mates} pods"
                    )
        return out
