"""The scheduler cache: nodes (as numpy tables), pods, PodGroups, CompositePodGroups and
PriorityClasses, kept current by the informers, plus the pods *assumed* on nodes while
their binding is in flight."""

from __future__ import annotations

import datetime
import logging
import operator
from collections.abc import Collection, Iterator, Mapping
from types import MappingProxyType
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from workloadbuilder.api import CompositePodGroup, PodGroup
from workloadbuilder.resources import CPU, MEMORY, PODS, parse_quantity
from workloadbuilder.resources import EPHEMERAL_STORAGE as EPHEMERAL
from workloadbuilder.scheduler._pdb import DisruptionBudget, disruption_budget
from workloadbuilder.scheduler._podindex import PodIndex
from workloadbuilder.scheduler._podspec import PodConstraints, pod_constraints
from workloadbuilder.scheduler._resources import PodRequirements, pod_requirements

__all__ = ["Cache", "GroupInfo", "GroupKey", "NodeTable", "PodInfo", "PodKey"]

_log = logging.getLogger(__name__)

PodKey = tuple[str, str]  # (namespace, name)
GroupKey = tuple[str, str]

_TERMINAL = ("Succeeded", "Failed")
_DEFAULT_MAX_PODS = 110


@attrs.define(slots=True, eq=False)
class PodInfo:
    """What the scheduler knows about one non-terminal pod."""

    namespace: str
    name: str
    uid: str
    scheduler_name: str
    group: str | None
    priority: int | None
    priority_class_name: str | None
    node_name: str | None
    req: PodRequirements
    first_seen: float
    seq: int
    deleting: bool = False
    #: ``spec.schedulingGates`` is non-empty (the SchedulingGates PreEnqueue plugin)
    gated: bool = False
    assumed_node: str | None = None
    counted_node: int | None = None
    conditions: tuple[dict[str, Any], ...] = ()
    last_failure: str | None = None
    #: reason and clock time of the last ``PodScheduled=False`` written (``last_failure``)
    last_failure_reason: str = ""
    last_failure_at: float = float("-inf")
    #: ``status.nominatedNodeName`` (the placement holding it is tried first)
    nominated_node: str | None = None
    #: ``spec.preemptionPolicy`` (``PreemptLowerPriority`` when unset)
    preemption_policy: str | None = None
    #: ``metadata.labels`` (PodDisruptionBudgets select victims by them)
    labels: dict[str, str] = attrs.field(factory=dict)
    #: ``status.resourceClaimStatuses`` as ``(name, resourceClaimName or None)``
    claim_statuses: tuple[tuple[str, str | None], ...] = ()
    #: ``status.startTime`` as a Unix time (None: not started; preemption orders victims by it)
    start_time: float | None = None
    #: host ports, required pod (anti-)affinity, spread constraints (None: none at all)
    constraints: PodConstraints | None = None
    #: ``(apiVersion, kind, name)`` of the owner reference with ``controller: true``
    #: (PodTopologySpread's default constraints select by the pod's ReplicaSet etc.)
    controller: tuple[str, str, str] | None = None

    @property
    def key(self) -> PodKey:
        """``(namespace, name)``."""
        return (self.namespace, self.name)

    @property
    def scheduled(self) -> bool:
        """Bound, or assumed on a node while its binding is in flight."""
        return self.node_name is not None or self.assumed_node is not None

    @property
    def group_key(self) -> GroupKey | None:
        """``(namespace, podGroupName)`` or None for a pod without ``schedulingGroup``."""
        return (self.namespace, self.group) if self.group else None

    def ref(self) -> dict[str, Any]:
        """An ``involvedObject`` reference for events."""
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": self.name,
            "namespace": self.namespace,
            "uid": self.uid,
        }


def _claim_statuses(status: Mapping[str, Any]) -> tuple[tuple[str, str | None], ...]:
    raw = status.get("resourceClaimStatuses") or ()
    return tuple(
        (str(s.get("name") or ""), s.get("resourceClaimName") or None)
        for s in raw
        if isinstance(s, Mapping)
    )


class NodeTable:
    """Nodes as rows of numpy arrays: allocatable and used amounts per resource column, and
    the static properties the filters and scores read. Rows of deleted nodes are recycled.

    What only the scores read (``PreferNoSchedule`` taints, ``status.images``) is kept apart
    from what the filters read: a change to it does not bump ``epoch`` (no filter verdict
    depends on it) and does not count as a scheduling-relevant change in :meth:`upsert`."""

    def __init__(self, capacity: int = 64) -> None:
        self.columns: dict[str, int] = {}
        self.column_names: list[str] = []
        self.alloc: npt.NDArray[np.int64] = np.zeros((capacity, 0), dtype=np.int64)
        self.used: npt.NDArray[np.int64] = np.zeros((capacity, 0), dtype=np.int64)
        self.present: npt.NDArray[np.bool_] = np.zeros(capacity, dtype=bool)
        self.unschedulable: npt.NDArray[np.bool_] = np.zeros(capacity, dtype=bool)
        self.tainted: npt.NDArray[np.bool_] = np.zeros(capacity, dtype=bool)
        self.names: list[str | None] = [None] * capacity
        self.labels: list[dict[str, str]] = [{} for _ in range(capacity)]
        self.taints: list[tuple[dict[str, Any], ...]] = [() for _ in range(capacity)]
        #: ``status.declaredFeatures`` (NodeDeclaredFeatures)
        self.features: list[frozenset[str]] = [frozenset() for _ in range(capacity)]
        #: ``PreferNoSchedule`` taints per row (TaintToleration's score), and which rows have any
        self.soft_taints: list[tuple[dict[str, Any], ...]] = [() for _ in range(capacity)]
        self.soft_tainted: npt.NDArray[np.bool_] = np.zeros(capacity, dtype=bool)
        #: ``status.images`` per row: image name -> size in bytes (ImageLocality)
        self.images: list[dict[str, int]] = [{} for _ in range(capacity)]
        #: image name -> ``{row: size}`` of the present nodes listing it
        self.image_rows: dict[str, dict[int, int]] = {}
        #: bumped whenever a node's images change (ImageLocality caches per version)
        self.images_version = 0
        self.index: dict[str, int] = {}
        self._free: list[int] = list(range(capacity - 1, -1, -1))
        #: bumped whenever a node's static properties change (filters cache per epoch)
        self.epoch = 0
        for name in (CPU, MEMORY, PODS, EPHEMERAL):
            self.column(name)

    @property
    def capacity(self) -> int:
        """Number of rows (present or not)."""
        return len(self.names)

    @property
    def count(self) -> int:
        """Number of present nodes."""
        return len(self.index)

    def column(self, resource: str) -> int:
        """The column of a resource, adding it (zero everywhere) when new."""
        col = self.columns.get(resource)
        if col is None:
            col = len(self.column_names)
            self.columns[resource] = col
            self.column_names.append(resource)
            pad = np.zeros((self.capacity, 1), dtype=np.int64)
            self.alloc = np.hstack([self.alloc, pad])
            self.used = np.hstack([self.used, pad.copy()])
            self.epoch += 1
        return col

    def vector(self, requests: tuple[tuple[str, int], ...]) -> npt.NDArray[np.int64]:
        """A request as a dense row over the current columns."""
        cols = [(self.column(name), amount) for name, amount in requests]
        vec = np.zeros(len(self.column_names), dtype=np.int64)
        for col, amount in cols:
            vec[col] = amount
        return vec

    def _grow(self) -> None:
        old = self.capacity
        new = max(64, old * 2)
        self.alloc = np.vstack([self.alloc, np.zeros((new - old, self.alloc.shape[1]), np.int64)])
        self.used = np.vstack([self.used, np.zeros((new - old, self.used.shape[1]), np.int64)])
        for attr in ("present", "unschedulable", "tainted", "soft_tainted"):
            arr = getattr(self, attr)
            setattr(self, attr, np.concatenate([arr, np.zeros(new - old, dtype=bool)]))
        self.names.extend([None] * (new - old))
        self.labels.extend({} for _ in range(new - old))
        self.taints.extend(() for _ in range(new - old))
        self.features.extend(frozenset() for _ in range(new - old))
        self.soft_taints.extend(() for _ in range(new - old))
        self.images.extend({} for _ in range(new - old))
        self._free.extend(range(new - 1, old - 1, -1))

    def upsert(self, node: Mapping[str, Any]) -> tuple[int, bool]:
        """Add or update a node; returns its row and whether anything scheduling-relevant
        (allocatable, labels, taints, unschedulable, declared features) changed."""
        meta = node.get("metadata") or {}
        name = str(meta.get("name"))
        spec = node.get("spec") or {}
        status = node.get("status") or {}
        allocatable = dict(status.get("allocatable") or status.get("capacity") or {})
        allocatable.setdefault(PODS, _DEFAULT_MAX_PODS)
        amounts: dict[int, int] = {}
        for res, qty in allocatable.items():
            try:
                amounts[self.column(str(res))] = parse_quantity(qty, str(res))
            except ValueError:
                _log.warning("node %s: ignoring invalid quantity %s=%r", name, res, qty)
        row = self.index.get(name)
        new = row is None
        if row is None:
            if not self._free:
                self._grow()
            row = self._free.pop()
            self.index[name] = row
            self.names[row] = name
            self.present[row] = True
            self.used[row, :] = 0
        alloc = np.zeros(len(self.column_names), dtype=np.int64)
        for col, amount in amounts.items():
            alloc[col] = amount
        labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
        taints = tuple(
            t for t in spec.get("taints") or () if t.get("effect") in ("NoSchedule", "NoExecute")
        )
        unsched = bool(spec.get("unschedulable"))
        features = frozenset(str(f) for f in status.get("declaredFeatures") or ())
        soft = tuple(t for t in spec.get("taints") or () if t.get("effect") == "PreferNoSchedule")
        self.soft_taints[row] = soft
        self.soft_tainted[row] = bool(soft)
        self._set_images(row, _node_images(status))
        changed = (
            new
            or not np.array_equal(self.alloc[row], alloc)
            or self.labels[row] != labels
            or self.taints[row] != taints
            or bool(self.unschedulable[row]) != unsched
            or self.features[row] != features
        )
        if changed:
            self.features[row] = features
            self.alloc[row] = alloc
            self.labels[row] = labels
            self.taints[row] = taints
            self.unschedulable[row] = unsched
            self.tainted[row] = bool(taints)
            self.epoch += 1
        return row, changed

    def remove(self, name: str) -> int | None:
        """Remove a node; returns its former row."""
        row = self.index.pop(name, None)
        if row is None:
            return None
        self.present[row] = False
        self.names[row] = None
        self.alloc[row] = 0
        self.used[row] = 0
        self.labels[row] = {}
        self.taints[row] = ()
        self.features[row] = frozenset()
        self.soft_taints[row] = ()
        self.soft_tainted[row] = False
        self._set_images(row, {})
        self.unschedulable[row] = False
        self.tainted[row] = False
        self._free.append(row)
        self.epoch += 1
        return row

    def _set_images(self, row: int, images: dict[str, int]) -> None:
        old = self.images[row]
        if old == images:
            return
        for name in old:
            rows = self.image_rows.get(name)
            if rows is not None:
                rows.pop(row, None)
                if not rows:
                    del self.image_rows[name]
        for name, size in images.items():
            self.image_rows.setdefault(name, {})[row] = size
        self.images[row] = images
        self.images_version += 1

    def present_rows(self) -> npt.NDArray[np.intp]:
        """Rows of present nodes, ascending."""
        return np.flatnonzero(self.present)


def _node_images(status: Mapping[str, Any]) -> dict[str, int]:
    """``status.images`` as image name -> size (every name of an image, as kube-scheduler's
    image states: names as the node lists them, sizes of this node's entry)."""
    out: dict[str, int] = {}
    for image in status.get("images") or ():
        if not isinstance(image, Mapping):
            continue
        try:
            size = int(image.get("sizeBytes") or 0)
        except (TypeError, ValueError):
            size = 0
        for name in image.get("names") or ():
            out.setdefault(str(name), size)
    return out


#: every field of a PodInfo, in constructor order (``PodInfo(*_pod_fields(p))`` copies ``p``)
_pod_fields = operator.attrgetter(*(a.name for a in attrs.fields(PodInfo)))


@attrs.define(slots=True, eq=False)
class GroupInfo:
    """A PodGroup as the scheduler tracks it (the object may not have arrived yet)."""

    namespace: str
    name: str
    pod_group: PodGroup | None = None
    members: set[PodKey] = attrs.field(factory=set)
    #: members whose schedulerName is not ours (see :meth:`Cache.quorum_pods`)
    foreign: set[PodKey] = attrs.field(factory=set)
    #: members with a deletionTimestamp
    deleting: int = 0
    first_seen: float = 0.0
    seq: int = 0

    @property
    def key(self) -> GroupKey:
        """``(namespace, name)``."""
        return (self.namespace, self.name)

    @property
    def min_count(self) -> int:
        """``gang.minCount``, 1 for basic groups (and until the object exists)."""
        pg = self.pod_group
        if pg is None or pg.spec.scheduling_policy.gang is None:
            return 1
        return int(pg.spec.scheduling_policy.gang.min_count)

    @property
    def known_pods(self) -> int:
        """Members that are not being deleted (PreEnqueue's "all known pods")."""
        return len(self.members) - self.deleting

    @property
    def is_gang(self) -> bool:
        """Whether the group has a gang policy."""
        return self.pod_group is not None and self.pod_group.spec.scheduling_policy.gang is not None


class Cache:
    """All objects the scheduler reads, indexed for the queue and the cycle. Implements the
    framework's ``SharedLister`` (what PreEnqueue plugins see)."""

    def __init__(self, scheduler_name: str | Collection[str] | None = None) -> None:
        names = (
            None
            if scheduler_name is None
            else frozenset((scheduler_name,) if isinstance(scheduler_name, str) else scheduler_name)
        )
        #: the schedulerNames we serve (one per profile); pending pods of other schedulers
        #: are invisible to our groups, as in kube-scheduler (None: every pod counts)
        self.scheduler_names: frozenset[str] | None = names
        #: the first (or only) of them
        self.scheduler_name: str | None = (
            scheduler_name
            if scheduler_name is None or isinstance(scheduler_name, str)
            else next(iter(scheduler_name), None)
        )
        self.nodes = NodeTable()
        self.node_objects: dict[str, dict[str, Any]] = {}
        self.pods: dict[PodKey, PodInfo] = {}
        self.groups: dict[GroupKey, GroupInfo] = {}
        # read-only views: changes go through the methods below, which keep the index of
        # running pods by priority (running_below) current
        self._composite_groups: dict[GroupKey, CompositePodGroup] = {}
        self._priority_classes: dict[str, dict[str, Any]] = {}
        #: CompositePodGroups by ``(namespace, name)`` (read-only; see
        #: :meth:`upsert_composite_group`)
        self.composite_groups: Mapping[GroupKey, CompositePodGroup] = MappingProxyType(
            self._composite_groups
        )
        #: PriorityClasses by name (read-only; see :meth:`upsert_priority_class`)
        self.priority_classes: Mapping[str, dict[str, Any]] = MappingProxyType(
            self._priority_classes
        )
        #: PodDisruptionBudgets by ``(namespace, name)`` (preemption reprieves their pods first)
        self.budgets: dict[tuple[str, str], DisruptionBudget] = {}
        self._seq = 0
        self._pods_by_uid: dict[str, PodKey] = {}
        self._signatures: dict[PodRequirements, PodRequirements] = {}
        #: pods nominated by preemption -> node (set at once; ``status.nominatedNodeName``
        #: follows through the watch)
        self.nominations: dict[PodKey, str] = {}
        #: the pods counted on a node (bound or assumed), by key (see :meth:`running_below`)
        self.running: dict[PodKey, PodInfo] = {}
        #: pods bound or assumed on a node the table does not have (yet): counted when it
        #: arrives (:meth:`_recount_row`)
        self._unplaced: dict[PodKey, PodInfo] = {}
        #: bumped whenever a counted pod appears, moves, leaves, or changes its labels or
        #: deletion state (what the pod-constraint plugins count is cached per version)
        self.version = 0
        #: the counted pods by label, anti-affinity term and host port (pod constraints)
        self.index: PodIndex[PodInfo] = PodIndex()
        #: the running pods by preemption priority, and the priority each is filed under;
        #: rebuilt from ``running`` on the next query after ``_prio_stale`` is set (a
        #: PriorityClass or CompositePodGroup changed)
        self._by_priority: dict[int, dict[PodKey, PodInfo]] = {}
        self._priority_of: dict[PodKey, int] = {}
        self._prio_stale = False

    def _intern(self, req: PodRequirements) -> PodRequirements:
        """One object per distinct signature (dict lookups then hit on identity)."""
        if len(self._signatures) > 100_000:  # bound the table in long-running schedulers
            self._signatures.clear()
        return self._signatures.setdefault(req, req)

    def next_seq(self) -> int:
        """A monotonically increasing sequence number (first-seen tie-break)."""
        self._seq += 1
        return self._seq

    # ---- SharedLister ----------------------------------------------------------------

    @property
    def table(self) -> NodeTable:
        """The node rows."""
        return self.nodes

    def node_name(self, row: int) -> str:
        """Name of the node in ``row``."""
        name = self.nodes.names[row]
        assert name is not None
        return name

    def get_pod(self, key: PodKey) -> PodInfo | None:
        """A pod by ``(namespace, name)``."""
        return self.pods.get(key)

    def group_members(self, group: GroupInfo) -> Iterator[PodInfo]:
        """The group's known non-terminal pods."""
        return self.members(group)

    # ---- nodes -----------------------------------------------------------------------

    def upsert_node(self, node: dict[str, Any]) -> bool:
        """Add/update a node; True when the change can make pods schedulable."""
        name = str((node.get("metadata") or {}).get("name"))
        self.node_objects[name] = node
        row, changed = self.nodes.upsert(node)
        if changed:
            self._recount_row(name, row)
        return changed

    def remove_node(self, name: str) -> None:
        """Forget a node (its pods stay; they no longer count anywhere)."""
        self.node_objects.pop(name, None)
        row = self.nodes.remove(name)
        if row is None:
            return
        for p in [q for q in self.running.values() if q.counted_node == row]:
            p.counted_node = None
            self.version += 1
            self.index.remove(p)
            self._stop_running(p)
            self._unplaced[p.key] = p

    def _recount_row(self, name: str, row: int) -> None:
        # a (re)added node: count the pods already bound or assumed there (a pod counted
        # on a row is counted on its node's row: only the unplaced ones can be missing)
        for p in [q for q in self._unplaced.values() if (q.node_name or q.assumed_node) == name]:
            if p.counted_node != row:
                self._account(p)

    # ---- PodDisruptionBudgets ----------------------------------------------------------

    def upsert_budget(self, obj: Mapping[str, Any]) -> None:
        """Add or update a PodDisruptionBudget."""
        b = disruption_budget(obj)
        self.budgets[(b.namespace, b.name)] = b

    def remove_budget(self, namespace: str, name: str) -> None:
        """Forget a deleted PodDisruptionBudget."""
        self.budgets.pop((namespace, name), None)

    def budget_list(self) -> list[DisruptionBudget]:
        """Every PodDisruptionBudget, by namespace and name."""
        return [self.budgets[k] for k in sorted(self.budgets)]

    # ---- pods ------------------------------------------------------------------------

    def _account(self, p: PodInfo) -> None:
        """Make the node usage reflect where the pod is (bound or assumed) now."""
        target_name = p.node_name or p.assumed_node
        target = self.nodes.index.get(target_name) if target_name else None
        if target is None and target_name:
            self._unplaced[p.key] = p
        elif self._unplaced:
            self._unplaced.pop(p.key, None)
        was = p.counted_node
        if target == was:
            return
        vec = self.nodes.vector(p.req.requests)
        if was is not None:
            self.nodes.used[was] -= vec
        if target is not None:
            self.nodes.used[target] += vec
        p.counted_node = target
        self.version += 1
        if was is None:
            self.index.add(p)
        elif target is None:
            self.index.remove(p)
        if was is None:
            self._start_running(p)
        elif target is None:
            self._stop_running(p)

    def upsert_pod(self, pod: dict[str, Any], now: float) -> tuple[PodInfo | None, PodInfo | None]:
        """Add/update a pod; returns ``(old, new)`` infos (``new`` is None when the pod is
        terminal and therefore dropped, like upstream's informer field selector)."""
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        status = pod.get("status") or {}
        key = (str(meta.get("namespace") or "default"), str(meta.get("name")))
        old = self.pods.get(key)
        if status.get("phase") in _TERMINAL:
            self.remove_pod(key)
            return old, None
        group = (spec.get("schedulingGroup") or {}).get("podGroupName")
        if old is not None and old.uid == str(meta.get("uid") or ""):
            info = old
            before = PodInfo(*_pod_fields(old))  # a copy (attrs.evolve, 3x cheaper)
            info.node_name = spec.get("nodeName") or None
            deleting = meta.get("deletionTimestamp") is not None
            grp = self.groups.get(info.group_key) if info.group_key is not None else None
            if deleting != info.deleting and grp is not None:
                grp.deleting += 1 if deleting else -1
            labels = dict(meta.get("labels") or {})
            if info.counted_node is not None and (
                deleting != info.deleting or labels != info.labels
            ):
                self.version += 1
                if labels != info.labels:
                    old_labels, info.labels = info.labels, labels
                    self.index.relabel(info, old_labels)
            info.deleting = deleting
            info.gated = bool(spec.get("schedulingGates"))
            info.conditions = tuple(status.get("conditions") or ())
            info.nominated_node = status.get("nominatedNodeName") or None
            info.labels = labels
            info.claim_statuses = _claim_statuses(status)
            info.start_time = _start_time(status)
            info.controller = _controller(meta)
            if info.node_name is not None and info.assumed_node is not None:
                info.assumed_node = None  # binding confirmed (or bound elsewhere)
            if info.node_name is None and info.counted_node is None:
                info.req = self._intern(pod_requirements(pod))
                info.constraints = pod_constraints(pod)
            self._account(info)
            return before, info
        if old is not None:  # same name, new uid: a replacement
            self.remove_pod(key)
            old = None
        prio = spec.get("priority")
        info = PodInfo(
            namespace=key[0],
            name=key[1],
            uid=str(meta.get("uid") or ""),
            scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
            group=str(group) if group else None,
            priority=int(prio) if prio is not None else None,
            priority_class_name=spec.get("priorityClassName"),
            node_name=spec.get("nodeName") or None,
            req=self._intern(pod_requirements(pod)),
            first_seen=now,
            seq=self.next_seq(),
            deleting=meta.get("deletionTimestamp") is not None,
            gated=bool(spec.get("schedulingGates")),
            conditions=tuple(status.get("conditions") or ()),
            nominated_node=status.get("nominatedNodeName") or None,
            preemption_policy=spec.get("preemptionPolicy") or None,
            labels=dict(meta.get("labels") or {}),
            claim_statuses=_claim_statuses(status),
            start_time=_start_time(status),
            constraints=pod_constraints(pod),
            controller=_controller(meta),
        )
        self.pods[key] = info
        self._pods_by_uid[info.uid] = key
        self._account(info)
        if info.group_key is not None:
            g = self._group(info.group_key, now)
            g.members.add(key)
            g.deleting += 1 if info.deleting else 0
            if self.scheduler_names is not None and info.scheduler_name not in self.scheduler_names:
                g.foreign.add(key)
        return None, info

    def remove_pod(self, key: PodKey) -> None:
        """Forget a pod (deleted or terminal) and release its resources."""
        info = self.pods.pop(key, None)
        if info is None:
            return None
        self._pods_by_uid.pop(info.uid, None)
        self._unplaced.pop(key, None)
        if info.counted_node is not None:
            self.nodes.used[info.counted_node] -= self.nodes.vector(info.req.requests)
            info.counted_node = None
            self.version += 1
            self.index.remove(info)
            self._stop_running(info)
        gk = info.group_key
        if gk is not None and gk in self.groups:
            g = self.groups[gk]
            if key in g.members:
                g.members.discard(key)
                g.foreign.discard(key)
                g.deleting -= 1 if info.deleting else 0
            if g.pod_group is None and not g.members:
                del self.groups[gk]
        return None

    def assume(self, info: PodInfo, node: str) -> None:
        """Count a pod on ``node`` while its binding is in flight."""
        info.assumed_node = node
        self._account(info)

    def forget(self, info: PodInfo) -> None:
        """Undo :meth:`assume` (binding failed)."""
        if info.node_name is None:
            info.assumed_node = None
            self._account(info)

    # ---- groups ----------------------------------------------------------------------

    def _group(self, key: GroupKey, now: float) -> GroupInfo:
        g = self.groups.get(key)
        if g is None:
            g = GroupInfo(namespace=key[0], name=key[1], first_seen=now, seq=self.next_seq())
            self.groups[key] = g
        return g

    def upsert_pod_group(self, pg: PodGroup, now: float) -> tuple[PodGroup | None, GroupInfo]:
        """Add/update a PodGroup; returns the previous object and the group."""
        key = (pg.metadata.namespace or "default", pg.metadata.name or "")
        g = self._group(key, now)
        old = g.pod_group
        g.pod_group = pg
        if old is None or _priority_fields(old.spec) != _priority_fields(pg.spec):
            self._refile_members(g)
        return old, g

    def remove_pod_group(self, key: GroupKey) -> GroupInfo | None:
        """Forget a PodGroup object (its pods stay, waiting for it to reappear)."""
        g = self.groups.get(key)
        if g is None:
            return None
        had = g.pod_group is not None
        g.pod_group = None
        if had:
            self._refile_members(g)
        if not g.members:
            del self.groups[key]
        return g

    # ---- CompositePodGroups and PriorityClasses ----------------------------------------

    def set_composite_groups(self, objs: Mapping[GroupKey, CompositePodGroup]) -> None:
        """Replace every CompositePodGroup (an informer's initial list or resync)."""
        self._composite_groups.clear()
        self._composite_groups.update(objs)
        self._prio_stale = True

    def upsert_composite_group(self, key: GroupKey, cpg: CompositePodGroup) -> None:
        """Add or update a CompositePodGroup."""
        old = self._composite_groups.get(key)
        self._composite_groups[key] = cpg
        if old is None or _priority_fields(old.spec) != _priority_fields(cpg.spec):
            self._prio_stale = True

    def remove_composite_group(self, key: GroupKey) -> None:
        """Forget a deleted CompositePodGroup."""
        if self._composite_groups.pop(key, None) is not None:
            self._prio_stale = True

    def set_priority_classes(self, objs: Mapping[str, dict[str, Any]]) -> None:
        """Replace every PriorityClass (an informer's initial list or resync)."""
        self._priority_classes.clear()
        self._priority_classes.update(objs)
        self._prio_stale = True

    def upsert_priority_class(self, name: str, obj: dict[str, Any]) -> None:
        """Add or update a PriorityClass."""
        self._priority_classes[name] = obj
        self._prio_stale = True

    def remove_priority_class(self, name: str) -> None:
        """Forget a deleted PriorityClass."""
        if self._priority_classes.pop(name, None) is not None:
            self._prio_stale = True

    # ---- running pods by preemption priority ---------------------------------------------

    def _start_running(self, p: PodInfo) -> None:
        self.running[p.key] = p
        if not self._prio_stale:
            self._file(p)

    def _stop_running(self, p: PodInfo) -> None:
        if self.running.pop(p.key, None) is not None and not self._prio_stale:
            self._unfile(p.key)

    def _file(self, p: PodInfo) -> None:
        prio = self.preemption_priority(p)
        self._priority_of[p.key] = prio
        bucket = self._by_priority.get(prio)
        if bucket is None:
            bucket = self._by_priority[prio] = {}
        bucket[p.key] = p

    def _unfile(self, key: PodKey) -> None:
        prio = self._priority_of.pop(key, None)
        if prio is None:
            return
        bucket = self._by_priority[prio]
        del bucket[key]
        if not bucket:
            del self._by_priority[prio]

    def _refile_members(self, g: GroupInfo) -> None:
        """The group's priority may have changed: file its running members again."""
        if self._prio_stale:
            return
        for k in g.members:
            p = self.running.get(k)
            if p is not None:
                self._unfile(k)
                self._file(p)

    def running_below(self, priority: int) -> list[PodInfo]:
        """The running pods (counted on a node; terminating ones included) whose
        :meth:`preemption_priority` is strictly below ``priority``, in the order the cache
        first saw them. Costs the number of distinct priorities when there is none (the
        common case of a backlog at one priority), else the pods returned."""
        if self._prio_stale:
            self._by_priority.clear()
            self._priority_of.clear()
            for p in self.running.values():
                self._file(p)
            self._prio_stale = False
        out = [
            p
            for prio, bucket in self._by_priority.items()
            if prio < priority
            for p in bucket.values()
        ]
        out.sort(key=_seq)
        return out

    def visible(self, p: PodInfo) -> bool:
        """Whether a member counts for its group: kube-scheduler knows its own pending pods
        and every bound (or assumed) pod, never the pending pods of other schedulers."""
        return (
            self.scheduler_names is None
            or p.scheduler_name in self.scheduler_names
            or p.node_name is not None
            or p.assumed_node is not None
        )

    def quorum_pods(self, g: GroupInfo) -> int:
        """PreEnqueue's "all known pods" of ``g``: visible members not being deleted."""
        known = g.known_pods
        for k in g.foreign:
            p = self.pods.get(k)
            if p is not None and not p.deleting and not self.visible(p):
                known -= 1
        return known

    def members(self, g: GroupInfo) -> Iterator[PodInfo]:
        """The group's known non-terminal pods."""
        for k in g.members:
            p = self.pods.get(k)
            if p is not None:
                yield p

    def nominated(self) -> Iterator[tuple[PodInfo, int]]:
        """Pending pods of ours with a nominated node (preemption made room for them there)
        and that node's row."""
        for key, node in list(self.nominations.items()):
            p = self.pods.get(key)
            if p is None or p.scheduled or p.deleting:
                del self.nominations[key]
                continue
            row = self.nodes.index.get(node)
            if row is not None:
                yield p, row

    # ---- priorities ------------------------------------------------------------------

    def resolve_priority(self, value: int | None, class_name: str | None) -> int:
        """A pod's/group's numeric priority: the field, else its PriorityClass, else the
        global default class, else 0 (what the Priority admission plugin would set)."""
        if value is not None:
            return value
        if class_name and class_name in self.priority_classes:
            return int(self.priority_classes[class_name].get("value") or 0)
        for pc in self.priority_classes.values():
            if pc.get("globalDefault"):
                return int(pc.get("value") or 0)
        return 0

    def pod_priority(self, p: PodInfo) -> int:
        """Numeric priority of a pod."""
        return self.resolve_priority(p.priority, p.priority_class_name)

    def group_priority(self, g: GroupInfo) -> int:
        """Numeric priority of a PodGroup."""
        pg = g.pod_group
        if pg is None:
            return 0
        return self.resolve_priority(pg.spec.priority, pg.spec.priority_class_name)

    def composite_ancestors(
        self, namespace: str, parent: str | None
    ) -> Iterator[tuple[str, CompositePodGroup]]:
        """``(name, object)`` of the CompositePodGroups from ``parent`` up, following
        ``parentCompositePodGroupName``; stops at one not in the cache, at a name seen
        before and after 8 levels."""
        seen: set[str] = set()
        while parent and parent not in seen and len(seen) < 8:
            seen.add(parent)
            cpg = self.composite_groups.get((namespace, parent))
            if cpg is None:
                return
            yield parent, cpg
            parent = cpg.spec.parent_composite_pod_group_name

    def hierarchy_priority(self, g: GroupInfo) -> int:
        """The priority of ``g``'s hierarchy: the top-most CompositePodGroup's above it,
        else its own (:meth:`group_priority`)."""
        prio = self.group_priority(g)
        pg = g.pod_group
        if pg is not None:
            for _, cpg in self.composite_ancestors(
                g.key[0], pg.spec.parent_composite_pod_group_name
            ):
                prio = self.resolve_priority(cpg.spec.priority, cpg.spec.priority_class_name)
        return prio

    def preemption_priority(self, p: PodInfo) -> int:
        """The priority ``p`` is preempted at: its hierarchy's
        (:meth:`hierarchy_priority`) when its PodGroup object exists, else its own."""
        gk = p.group_key
        g = self.groups.get(gk) if gk is not None else None
        if g is None or g.pod_group is None:
            return self.pod_priority(p)
        return self.hierarchy_priority(g)


def _seq(p: PodInfo) -> int:
    return p.seq


def _priority_fields(spec: Any) -> tuple[object, object, object]:
    """What of a PodGroup's or CompositePodGroup's spec decides its members' priority."""
    return (spec.priority, spec.priority_class_name, spec.parent_composite_pod_group_name)


def _start_time(status: dict[str, Any]) -> float | None:
    """``status.startTime`` (RFC 3339) as a Unix time; None when unset or unreadable."""
    value = status.get("startTime")
    if not value:
        return None
    try:
        return datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _controller(meta: dict[str, Any]) -> tuple[str, str, str] | None:
    """``(apiVersion, kind, name)`` of the pod's controller owner reference, if any."""
    for ref in meta.get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("controller") is True:
            return (str(ref.get("apiVersion") or ""), str(ref.get("kind")), str(ref.get("name")))
    return None
