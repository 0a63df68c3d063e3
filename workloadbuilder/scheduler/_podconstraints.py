"""Pods' own placement constraints, gang-aware: NodePorts, InterPodAffinity (required terms)
and PodTopologySpread (``DoNotSchedule``), plus the volume plugins this scheduler does not have
yet (VolumeBinding, VolumeRestrictions, NodeVolumeLimits), which refuse the pods that need them
instead of binding them as if their volumes were not there.

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
* **PodTopologySpread**: for each ``DoNotSchedule`` constraint, the node must carry the key;
  matching pods of the pod's namespace (not terminating) are counted per domain over the nodes
  that carry every constraint's key and pass ``nodeAffinityPolicy`` / ``nodeTaintsPolicy``;
  the node fails when its domain's count + 1 (if the pod matches its own selector) minus the
  smallest domain count exceeds ``maxSkew`` (the minimum is 0 while there are fewer domains
  than ``minDomains``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

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
from workloadbuilder.scheduler._nodematch import node_matches_affinity, tolerates_all
from workloadbuilder.scheduler._podspec import AffinityTerm, PodConstraints, SpreadConstraint
from workloadbuilder.scheduler._snapshot import Snapshot

if TYPE_CHECKING:
    from workloadbuilder.cluster import Cluster
    from workloadbuilder.scheduler._cache import Cache, NodeTable, PodInfo

__all__ = [
    "CONSTRAINT_PLUGINS",
    "InterPodAffinity",
    "NodePorts",
    "NodeVolumeLimits",
    "PodTopologySpread",
    "VolumeBinding",
    "VolumeRestrictions",
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

_NODE_EVENTS = ClusterEventWithHint(ClusterEvent("Node", ActionType.ADD | ActionType.UPDATE_NODE))
_ASSIGNED = ClusterEventWithHint(ClusterEvent("AssignedPod", ActionType.ADD | ActionType.DELETE))
_ASSIGNED_DELETE = ClusterEventWithHint(ClusterEvent("AssignedPod", ActionType.DELETE))


# ---- what a cycle sees: counted pods, less removed victims, plus the cycle's own -----------------


def _cache_of(lister: SharedLister) -> Cache | None:
    return lister.cache if isinstance(lister, Snapshot) else None


def _counted(lister: SharedLister) -> Iterator[tuple[PodInfo, int]]:
    """Every pod counted on a node as ``lister`` sees it, with its row."""
    cache = _cache_of(lister)
    if cache is None:
        return
    assert isinstance(lister, Snapshot)
    removed = lister.removed
    for p in cache.running.values():
        row = p.counted_node
        if row is not None and (not removed or p.key not in removed):
            yield p, row
    yield from _assumed(lister)


def _assumed(lister: Snapshot) -> Iterator[tuple[PodInfo, int]]:
    """The pods the cycle placed so far (not yet counted in the cache)."""
    for p, row in lister.assumed_since(0):
        if p.counted_node is None:
            yield p, row


def _state_token(lister: SharedLister) -> tuple[Any, ...]:
    """What the plugins' answers depend on: the cache's counted pods, the victims removed and
    the pods assumed (the snapshot's log position), and the node table."""
    cache = _cache_of(lister)
    assert isinstance(lister, Snapshot) and cache is not None
    t = lister.table
    return (id(lister), lister.mark(), lister.removed_version, cache.version, t.epoch)


class _Domains:
    """Per topology key, each node row's domain as a small integer (-1: no such label), for
    one node-table epoch."""

    def __init__(self) -> None:
        self._key: tuple[int, int, int] = (-1, -1, -1)
        self._ids: dict[str, tuple[npt.NDArray[np.int64], dict[str, int]]] = {}

    def of(self, table: NodeTable, key: str) -> tuple[npt.NDArray[np.int64], dict[str, int]]:
        """``(row -> domain id, value -> domain id)`` of ``key`` over present nodes."""
        token = (id(table), table.epoch, table.capacity)
        if token != self._key:
            self._ids.clear()
            self._key = token
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


class _ReserveBase:
    """The parts of the Reserve protocol these plugins do not use: nothing to write before
    binding and nothing to release (the cycle's assumptions are the state)."""

    name = ""

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


class _MaskPlugin(_ReserveBase):
    """A plugin whose verdict over all rows is one mask per pod and cycle state; the last
    mask is kept so that ``filter_pod`` on candidate rows costs a lookup."""

    def __init__(self) -> None:
        self._last: tuple[Any, tuple[Any, ...], Mask, list[tuple[str, str, Mask]]] | None = None
        self.domains = _Domains()

    def _evaluate(
        self, pod: PodInfo, lister: SharedLister
    ) -> tuple[Mask, list[tuple[str, str, Mask]]]:
        """``(feasible mask, [(short, long, failing mask)...])`` for ``pod`` now."""
        raise NotImplementedError

    def _verdict(
        self, pod: PodInfo, lister: SharedLister
    ) -> tuple[Mask, list[tuple[str, str, Mask]]]:
        token = _state_token(lister)
        last = self._last
        if last is not None and last[0] is pod and last[1] == token:
            return last[2], last[3]
        mask, why = self._evaluate(pod, lister)
        self._last = (pod, token, mask, why)
        return mask, why

    def feasible_rows(self, pod: PodInfo, lister: SharedLister) -> Mask | None:
        """The rows where the pod passes now."""
        if _cache_of(lister) is None:
            return None
        return self._verdict(pod, lister)[0]

    def filter_pod(self, pod: PodInfo, lister: SharedLister, row: int) -> Any:
        """True when the pod passes on ``row`` now, else None."""
        if _cache_of(lister) is None:
            return True
        mask = self._verdict(pod, lister)[0]
        return True if row < mask.size and mask[row] else None

    def diagnose_pod(
        self, pod: PodInfo, lister: SharedLister, rows: Rows
    ) -> list[tuple[str, str, int]]:
        """Per reason, the rows of ``rows`` that fail for it (each row under its first)."""
        if _cache_of(lister) is None or rows.size == 0:
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


class NodePorts(_MaskPlugin):
    """A node cannot run two pods asking for the same host port (kube-scheduler's
    NodePorts)."""

    name = "NodePorts"

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """A pod holding ports leaves its node, or a node appears."""
        return [_ASSIGNED_DELETE, _NODE_EVENTS]

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
        holders: Iterable[tuple[PodInfo, int]] = (
            (p, p.counted_node)
            for p in cache.with_host_ports.values()
            if p.counted_node is not None and (not removed or p.key not in removed)
        )
        for other, row in [*holders, *_assumed(lister)]:
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


# ---- InterPodAffinity ----------------------------------------------------------------------------


class InterPodAffinity(_MaskPlugin):
    """Required pod affinity and anti-affinity, and the anti-affinity of the pods already
    counted against the incoming pod (kube-scheduler's InterPodAffinity Filter)."""

    name = "InterPodAffinity"

    def __init__(self) -> None:
        super().__init__()
        self._cache: Cache | None = None
        #: the snapshot and log position of the first pod with anti-affinity terms this
        #: cycle placed (so pods without terms are checked against it while it is there)
        self._anti_snap: Snapshot | None = None
        self._anti_mark = 0
        self._base: dict[Any, dict[tuple[str, str], int]] = {}
        self._base_token: tuple[Any, ...] = ()

    def bind_cache(self, cache: Cache) -> None:
        """The scheduler's cache: the counted pods with anti-affinity terms hold against
        every incoming pod, so :meth:`applies` needs to know whether there are any."""
        self._cache = cache

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """A pod is bound or leaves its node, or a node appears or changes labels."""
        return [_ASSIGNED, _NODE_EVENTS]

    def applies(self, pod: PodInfo) -> bool:
        """Pods with required terms, and every pod while some counted pod (or a pod placed in
        the current cycle) has anti-affinity terms."""
        c = pod.constraints
        if c is not None and (c.affinity or c.anti_affinity):
            return True
        if self._cache is None or self._cache.with_anti_affinity:
            return True  # (not bound to the cache yet: checked, to be safe)
        snap = self._anti_snap
        return snap is not None and snap.mark() > self._anti_mark

    def pre_filter_pod(self, pod: PodInfo, lister: SharedLister) -> Status:
        """A term whose namespaceSelector needs Namespace labels is refused (not watched)."""
        c = pod.constraints
        if c is not None:
            for why in c.unsupported:
                if why.startswith("InterPodAffinity"):
                    return Status(
                        code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE, message=why, plugin=self.name
                    )
        return SUCCESS

    def reserve_pod(self, pod: PodInfo, lister: SharedLister, row: int, plan: Any) -> None:
        """Remember that the cycle now holds a pod with anti-affinity terms."""
        c = pod.constraints
        if not (c is not None and c.anti_affinity and isinstance(lister, Snapshot)):
            return
        if self._anti_snap is not lister or lister.mark() < self._anti_mark:
            self._anti_snap, self._anti_mark = lister, lister.mark()

    def _incoming_counts(
        self, terms: tuple[AffinityTerm, ...], need_all: bool, lister: Snapshot
    ) -> dict[tuple[str, str], int]:
        """Per ``(topology key, value)``: the counted pods matching all of ``terms``
        (affinity) or each term (anti-affinity), as upstream's ``affinityCounts``."""
        table = lister.table
        cache = lister.cache
        token = (id(table), table.epoch, cache.version, lister.removed_version, id(lister))
        if token != self._base_token:
            self._base.clear()
            self._base_token = token
        key = (terms, need_all)
        base = self._base.get(key)
        if base is None:
            base = {}
            removed = lister.removed
            for p in cache.running.values():
                row = p.counted_node
                if row is None or (removed and p.key in removed):
                    continue
                _count_terms(base, terms, need_all, p, table.labels[row])
            self._base[key] = base
        counts = dict(base)
        for p, row in _assumed(lister):
            _count_terms(counts, terms, need_all, p, table.labels[row])
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
        ok = np.ones(cap, dtype=bool)
        if c is not None and c.affinity:
            failing = self._affinity_failing(pod, c, lister)
            text = "do not match pod affinity " + "; ".join(t.describe() for t in c.affinity)
            why.append((AFFINITY_REASON, text, failing))
            ok &= ~failing
        if c is not None and c.anti_affinity:
            counts = self._incoming_counts(c.anti_affinity, False, lister)
            failing = np.zeros(cap, dtype=bool)
            for t in c.anti_affinity:
                ids, values = self.domains.of(table, t.topology_key)
                for (k, v), n in counts.items():
                    if k == t.topology_key and n > 0 and v in values:
                        failing |= ids == values[v]
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
                    "are in a domain where a pod's anti-affinity repels this pod",
                    existing,
                )
            )
            ok &= ~existing
        return ok, why

    def _affinity_failing(self, pod: PodInfo, c: PodConstraints, lister: Snapshot) -> Mask:
        table = lister.table
        counts = self._incoming_counts(c.affinity, True, lister)
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
        if not counts and all(t.matches(pod.namespace, pod.labels) for t in c.affinity):
            return ~has_keys  # the first pod of a self-affine group: any node with the keys
        return ~(has_keys & exist)

    def _existing_failing(self, pod: PodInfo, lister: Snapshot) -> Mask | None:
        """Rows in a domain where a counted pod's anti-affinity term matches ``pod``."""
        cache = lister.cache
        table = lister.table
        removed = lister.removed
        holders = [
            (p, p.counted_node)
            for p in cache.with_anti_affinity.values()
            if p.counted_node is not None and (not removed or p.key not in removed)
        ]
        holders.extend(
            (p, row)
            for p, row in _assumed(lister)
            if p.constraints is not None and p.constraints.anti_affinity
        )
        if not holders:
            return None
        failing = np.zeros(table.capacity, dtype=bool)
        for other, row in holders:
            if other is pod or other.constraints is None:
                continue
            labels = table.labels[row]
            for t in other.constraints.anti_affinity:
                v = labels.get(t.topology_key)
                if v is None or not t.matches(pod.namespace, pod.labels):
                    continue
                ids, values = self.domains.of(table, t.topology_key)
                failing |= ids == values[v]
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
                mates = sum(1 for q in pods if t.matches(q.namespace, q.labels))
                _, values = self.domains.of(table, t.topology_key)
                if mates > len(values):
                    noun = "nodes" if t.topology_key == "kubernetes.io/hostname" else "domains"
                    out.append(
                        f"anti-affinity {t.describe()}: {len(values)} {noun} for {mates} pods"
                    )
        return out


def _count_terms(
    counts: dict[tuple[str, str], int],
    terms: tuple[AffinityTerm, ...],
    need_all: bool,
    p: PodInfo,
    labels: dict[str, str],
) -> None:
    if need_all:
        if not all(t.matches(p.namespace, p.labels) for t in terms):
            return
        for t in terms:
            v = labels.get(t.topology_key)
            if v is not None:
                counts[(t.topology_key, v)] = counts.get((t.topology_key, v), 0) + 1
        return
    for t in terms:
        if t.matches(p.namespace, p.labels):
            v = labels.get(t.topology_key)
            if v is not None:
                counts[(t.topology_key, v)] = counts.get((t.topology_key, v), 0) + 1


# ---- PodTopologySpread ---------------------------------------------------------------------------


class PodTopologySpread(_MaskPlugin):
    """``whenUnsatisfiable: DoNotSchedule`` topology spread constraints (kube-scheduler's
    PodTopologySpread Filter)."""

    name = "PodTopologySpread"

    def __init__(self) -> None:
        super().__init__()
        self._base: dict[Any, dict[int, int]] = {}
        self._base_token: tuple[Any, ...] = ()

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """A pod is bound or leaves its node, or a node appears or changes labels."""
        return [_ASSIGNED, _NODE_EVENTS]

    def applies(self, pod: PodInfo) -> bool:
        """Pods with ``DoNotSchedule`` constraints."""
        c = pod.constraints
        return c is not None and any(s.hard for s in c.spread)

    def pre_filter_pod(self, pod: PodInfo, lister: SharedLister) -> Status:
        """Holds on every node."""
        return SUCCESS

    def _evaluate(
        self, pod: PodInfo, lister: SharedLister
    ) -> tuple[Mask, list[tuple[str, str, Mask]]]:
        assert pod.constraints is not None and isinstance(lister, Snapshot)
        table = lister.table
        cap = table.capacity
        hard = pod.constraints.hard_spread
        present = np.zeros(cap, dtype=bool)
        present[table.present_rows()] = True
        # nodes that carry every constraint's key (the others count nowhere)
        all_keys = present.copy()
        for c in hard:
            all_keys &= self.domains.of(table, c.topology_key)[0] >= 0
        rows = np.flatnonzero(all_keys)
        affine = np.zeros(cap, dtype=bool)
        tolerated = np.zeros(cap, dtype=bool)
        for r in rows:
            labels, name = table.labels[r], table.names[r] or ""
            affine[r] = node_matches_affinity(pod.req, labels, name)
            tolerated[r] = tolerates_all(pod.req.toleration_list(), table.taints[r])
        missing = np.zeros(cap, dtype=bool)
        skewed = np.zeros(cap, dtype=bool)
        details: list[str] = []
        token = (id(table), table.epoch, lister.cache.version, lister.removed_version, id(lister))
        if token != self._base_token:
            self._base.clear()
            self._base_token = token
        for c in hard:
            ids, values = self.domains.of(table, c.topology_key)
            missing |= present & (ids < 0)
            eligible = all_keys.copy()
            if c.honor_node_affinity:
                eligible &= affine
            if c.honor_node_taints:
                eligible &= tolerated
            key = (c, pod.namespace, pod.req, tuple(s.topology_key for s in hard))
            base = self._base.get(key)
            if base is None:
                base = dict.fromkeys((int(i) for i in ids[eligible]), 0)
                removed = lister.removed
                for p in lister.cache.running.values():
                    row = p.counted_node
                    if row is None or p.deleting or p.namespace != pod.namespace:
                        continue
                    gone = removed and p.key in removed
                    if eligible[row] and not gone and c.selector.matches(p.labels):
                        base[int(ids[row])] += 1
                self._base[key] = base
            counts = dict(base)
            for p, row in _assumed(lister):
                if p.namespace == pod.namespace and eligible[row] and c.selector.matches(p.labels):
                    d = int(ids[row])
                    counts[d] = counts.get(d, 0) + 1
            low = min(counts.values()) if counts else 0
            if len(counts) < c.min_domains:
                low = 0
            self_match = 1 if c.selector.matches(pod.labels) else 0
            per_domain = np.zeros(len(values) + 1, dtype=np.int64)  # last: no such label
            for d, n in counts.items():
                per_domain[d] = n
            skew = per_domain[ids] + self_match - low
            bad = (ids >= 0) & (skew > c.max_skew)
            if bad.any():
                details.append(f"{c.describe()} (domain minimum {low})")
            skewed |= bad & present
        skewed &= ~missing
        long_skew = "would exceed " + "; ".join(details) if details else "would exceed maxSkew"
        return ~(missing | skewed) & present, [
            (SPREAD_LABEL_REASON, "lack a topology key of the pod's spread constraints", missing),
            (SPREAD_REASON, long_skew, skewed),
        ]


# ---- volume plugins not implemented yet: refuse, never ignore ------------------------------------


class _Refusing(_ReserveBase):
    """A plugin this scheduler does not implement yet: a pod that needs it stays pending with
    a reason naming it (UnschedulableAndUnresolvable), instead of being bound as if its
    volumes were not there."""

    def applies(self, pod: PodInfo) -> bool:
        """Pods with something this plugin would have to evaluate."""
        c = pod.constraints
        return c is not None and any(u.startswith(self.name + ":") for u in c.unsupported)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """Only the pod's own change can help (its volumes are immutable: in practice none)."""
        return [
            ClusterEventWithHint(
                ClusterEvent("Pod", ActionType.UPDATE_POD_REQUIREMENTS),
                lambda key, old, new: (
                    key[0] == "Pod" and (key[1], key[2]) == (new.namespace, new.name)
                ),
            )
        ]

    def pre_filter_pod(self, pod: PodInfo, lister: SharedLister) -> Status:
        """Refused, naming the volume and the missing plugin."""
        c = pod.constraints
        reasons = [u for u in (c.unsupported if c is not None else ()) if u.startswith(self.name)]
        if not reasons:
            return SUCCESS
        text = "; ".join(u.split(": ", 1)[1] for u in reasons)
        return Status(code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE, message=text, plugin=self.name)

    def feasible_rows(self, pod: PodInfo, lister: SharedLister) -> Mask | None:
        """No opinion per node (the PreFilter verdict decides)."""
        return None

    def filter_pod(self, pod: PodInfo, lister: SharedLister, row: int) -> Any:
        """Never reached for a refused pod; passes otherwise."""
        return None if self.pre_filter_pod(pod, lister).code is not Code.SUCCESS else True

    def diagnose_pod(
        self, pod: PodInfo, lister: SharedLister, rows: Rows
    ) -> list[tuple[str, str, int]]:
        """The PreFilter verdict says it all."""
        return []


class VolumeBinding(_Refusing):
    """PersistentVolumeClaims and generic ephemeral volumes: not implemented yet, refused."""

    name = "VolumeBinding"


class VolumeRestrictions(_Refusing):
    """In-tree disks that cannot be shared between nodes: not implemented yet, refused."""

    name = "VolumeRestrictions"


class NodeVolumeLimits(_Refusing):
    """Inline CSI and attachable volumes counted against node limits: not implemented yet,
    refused."""

    name = "NodeVolumeLimits"


#: the plugins of this module, in kube-scheduler's default order
CONSTRAINT_PLUGINS: tuple[type[Any], ...] = (
    NodePorts,
    VolumeRestrictions,
    NodeVolumeLimits,
    VolumeBinding,
    PodTopologySpread,
    InterPodAffinity,
)


def constraint_spread_of(pod: PodInfo) -> tuple[SpreadConstraint, ...]:
    """The pod's ``DoNotSchedule`` spread constraints (for explanations)."""
    return pod.constraints.hard_spread if pod.constraints is not None else ()
