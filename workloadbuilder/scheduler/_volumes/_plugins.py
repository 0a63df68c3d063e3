"""The volume plugins: VolumeRestrictions, NodeVolumeLimits, VolumeBinding and VolumeZone, as
kube-scheduler v1.37.2 runs them (``pkg/scheduler/framework/plugins/{volumerestrictions,
nodevolumelimits,volumebinding,volumezone}``), gang-aware: the pods a cycle placed before
count as pods on their nodes, and the PersistentVolumes the cycle chose for one pod's claims
are not offered to another's.

They are Reserve plugins (asked pod by pod for the node the cycle is about to choose): each
evaluates a pod over every node row once per cycle state (a mask and the reasons of the rows
that fail), so ``filter_pod`` on a candidate row is a lookup."""

from __future__ import annotations

import asyncio
import copy
import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
import numpy.typing as npt

from workloadbuilder.errors import ApiError, Conflict, NotFound
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
from workloadbuilder.scheduler._podconstraints import ReserveBase
from workloadbuilder.scheduler._podspec import EPHEMERAL_SOURCE, PVC_SOURCE, PodVolume
from workloadbuilder.scheduler._snapshot import Snapshot
from workloadbuilder.scheduler._volumes._match import (
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    IN_TREE_DRIVERS,
    NO_PROVISIONER,
    RWOP,
    ZONE_LABELS,
    bound_to_claim,
    claim_class,
    fully_bound,
    ga_label,
    in_tree_source,
    meta,
    pv_class,
    pv_fits_node,
    pv_topologies,
    storage_request,
    volume_candidates,
)
from workloadbuilder.scheduler._volumes._state import ClaimKey, VolumeState

if TYPE_CHECKING:
    from workloadbuilder.cluster import Cluster
    from workloadbuilder.scheduler._cache import PodInfo

__all__ = [
    "NodeVolumeLimits",
    "VolumeBinding",
    "VolumeBindingPlan",
    "VolumeRestrictions",
    "VolumeZone",
]

_log = logging.getLogger(__name__)
Mask = npt.NDArray[np.bool_]

#: upstream's Filter reasons (the short reason of a FailedScheduling event)
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
DISK_CONFLICT = "node(s) had no available disk"
RWOP_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
    "already in-use by another pod"
)
ZONE_CONFLICT = "node(s) had no available volume zone"
MAX_VOLUME_COUNT = "node(s) exceed max volume count"
_MIGRATED_PLUGINS = "storage.alpha.kubernetes.io/migrated-plugins"
_WFFC = "WaitForFirstConsumer"
#: the volume kinds every volume plugin requeues on (any change may help a rejected pod)
_VOLUME_KINDS = (
    "PersistentVolumeClaim",
    "PersistentVolume",
    "StorageClass",
    "CSINode",
    "CSIDriver",
    "VolumeAttachment",
)
_ANY = ActionType.ADD | ActionType.UPDATE_OBJECT | ActionType.DELETE


def _unresolvable(message: str) -> Status:
    return Status(code=Code.UNSCHEDULABLE_AND_UNRESOLVABLE, message=message)


def _not_found(kind: str, name: str) -> str:
    """The API server's NotFound wording (``persistentvolumeclaim "data" not found``)."""
    return f'{kind} "{name}" not found'


def _volumes(pod: PodInfo) -> tuple[PodVolume, ...]:
    c = pod.constraints
    return c.volumes if c is not None else ()


def _is_for_pod(pod: PodInfo, pvc: Mapping[str, Any]) -> bool:
    """A generic ephemeral volume's claim is controlled by the pod."""
    m = meta(pvc)
    if m.get("namespace") != pod.namespace:
        return False
    return any(
        isinstance(r, Mapping) and r.get("controller") and r.get("uid") == pod.uid
        for r in m.get("ownerReferences") or ()
    )


def _not_for_pod(pod: PodInfo, pvc: Mapping[str, Any]) -> str:
    m = meta(pvc)
    return (
        f"PVC {m.get('namespace')}/{m.get('name')} was not created for pod "
        f"{pod.namespace}/{pod.name} (pod is not owner)"
    )


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    s = obj.get("spec")
    return s if isinstance(s, Mapping) else {}


def _present(lister: SharedLister) -> Mask:
    """Every present node row passes."""
    return np.asarray(lister.table.present, dtype=bool).copy()


@attrs.define(eq=False)
class _Verdict:
    """A pod's verdict over every node row: ``ok`` per row, and per row that fails its
    ``(short, long)`` reasons."""

    ok: Mask
    reasons: dict[int, list[tuple[str, str]]]
    plans: dict[int, Any] = attrs.field(factory=dict)
    #: VolumeBinding's per-pod context (its plans and reasons are made per row on demand)
    context: Any = None


class _VolumePlugin(ReserveBase):
    """What the volume plugins share: the volume state, and a verdict per pod and cycle
    state (the last one kept)."""

    #: nothing to check for a pod without volumes
    pod_scoped = True
    #: each row under every one of its reasons in the diagnosis (VolumeBinding: upstream
    #: appends every reason of a node), else under its first
    _all_reasons = False

    def __init__(self, state: VolumeState | None = None) -> None:
        self._state = state or VolumeState()
        self._last: tuple[Any, tuple[Any, ...], _Verdict] | None = None

    def use_volume_state(self, state: VolumeState) -> None:
        """Use the scheduler's volume state (fed by its informers)."""
        self._state = state

    @property
    def state(self) -> VolumeState:
        """The volume state the plugin reads."""
        return self._state

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """Any volume object added, changed or deleted; a node appears or changes; a pod
        counted on a node leaves it."""
        return [
            *(ClusterEventWithHint(ClusterEvent(kind, _ANY)) for kind in _VOLUME_KINDS),
            ClusterEventWithHint(ClusterEvent("Node", ActionType.ADD | ActionType.UPDATE_NODE)),
            ClusterEventWithHint(ClusterEvent("AssignedPod", ActionType.DELETE)),
        ]

    def _token(self, lister: SharedLister) -> tuple[Any, ...]:
        s = self._state
        t = lister.table
        if isinstance(lister, Snapshot):
            return (
                id(lister),
                lister.mark(),
                lister.removed_version,
                lister.cache.version,
                t.epoch,
                s.version,
            )
        return (id(lister), t.epoch, s.version, object())  # never reused

    def pre_filter_pod(self, pod: PodInfo, lister: SharedLister) -> Status:
        """A verdict that holds on every node (each plugin has its own)."""
        raise NotImplementedError

    def _evaluate(self, pod: PodInfo, lister: SharedLister) -> _Verdict:
        raise NotImplementedError

    def _verdict(self, pod: PodInfo, lister: SharedLister) -> _Verdict:
        token = self._token(lister)
        last = self._last
        if last is not None and last[0] is pod and last[1] == token:
            return last[2]
        v = self._evaluate(pod, lister)
        self._last = (pod, token, v)
        return v

    def feasible_rows(self, pod: PodInfo, lister: SharedLister) -> Mask | None:
        """The rows where the pod's volumes fit now."""
        if not self.pre_filter_pod(pod, lister).ok:
            return None
        return self._verdict(pod, lister).ok

    def filter_pod(self, pod: PodInfo, lister: SharedLister, row: int) -> Any:
        """A plan (truthy) when the pod's volumes fit on ``row`` now, else None."""
        if not self.pre_filter_pod(pod, lister).ok:
            return None
        v = self._verdict(pod, lister)
        if row >= v.ok.size or not v.ok[row]:
            return None
        return v.plans.get(row, True)

    def diagnose_pod(
        self, pod: PodInfo, lister: SharedLister, rows: Rows
    ) -> list[tuple[str, str, int]]:
        """Per reason, how many rows of ``rows`` fail for it."""
        if not self.pre_filter_pod(pod, lister).ok:
            return []
        v = self._verdict(pod, lister)
        counts: dict[tuple[str, str], int] = {}
        for row in rows.tolist():
            why = v.reasons.get(row)
            for r in (why or ())[: None if self._all_reasons else 1]:
                counts[r] = counts.get(r, 0) + 1
        return [(short, long_, n) for (short, long_), n in counts.items()]

    # ---- what the plugins share ------------------------------------------------------

    def _node_pods(self, pod: PodInfo, lister: SharedLister) -> dict[int, list[PodInfo]]:
        """The pods with volumes counted on each row now: bound or assumed ones (less the
        snapshot's removed victims) and the ones the cycle placed."""
        base = self._state.pods_by_row()
        removed: Mapping[Any, Any] = getattr(lister, "removed", None) or {}
        placed: Sequence[tuple[PodInfo, int]] = getattr(lister, "placed", None) or ()
        if not removed and not placed:
            return base
        out: dict[int, list[PodInfo]] = {}
        for row, pods in base.items():
            kept = [p for p in pods if p.key not in removed] if removed else pods
            if kept:
                out[row] = kept
        for p, row in placed:
            if p.constraints is not None and p.constraints.volumes and p.key != pod.key:
                out.setdefault(row, []).append(p)
        return out

    def _rows(self, lister: SharedLister) -> list[int]:
        return [int(r) for r in lister.table.present_rows()]


# ---- VolumeRestrictions ------------------------------------------------------------------


def _disk_conflict(v: PodVolume, other: PodVolume) -> bool:
    """Two in-tree disks that cannot be used by pods on one node (upstream's
    ``isVolumeConflict``)."""
    if v.source != other.source:
        return False
    if v.source == "gcePersistentDisk":
        return v.disk == other.disk and not (v.read_only and other.read_only)
    if v.source == "awsElasticBlockStore":
        return v.disk == other.disk
    if v.source == "iscsi":
        return v.disk == other.disk and not (v.read_only and other.read_only)
    if v.source == "rbd":
        return (
            bool(v.monitors & other.monitors)
            and v.disk == other.disk
            and not (v.read_only and other.read_only)
        )
    return False


_RESTRICTED = ("gcePersistentDisk", "awsElasticBlockStore", "rbd", "iscsi")


class VolumeRestrictions(_VolumePlugin):
    """In-tree disks a node cannot share between pods (GCE PD, AWS EBS, RBD, iSCSI), and
    ReadWriteOncePod claims already used by another pod (kube-scheduler's
    VolumeRestrictions)."""

    name = "VolumeRestrictions"
    #: its verdict changes when pods leave a node (preemption asks again without victims)
    frees_with_victims = True

    def applies(self, pod: PodInfo) -> bool:
        """Pods with a claim or one of the restricted in-tree disks."""
        return any(v.source == PVC_SOURCE or v.source in _RESTRICTED for v in _volumes(pod))

    def _rwop(self, pod: PodInfo) -> set[str] | Status:
        out: set[str] = set()
        for v in _volumes(pod):
            if v.source != PVC_SOURCE:
                continue
            pvc = self._state.pvc((pod.namespace, v.claim))
            if pvc is None:
                return _unresolvable(_not_found("persistentvolumeclaim", v.claim))
            if RWOP in (_spec(pvc).get("accessModes") or ()):
                out.add(v.claim)
        return out

    def pre_filter_pod(self, pod: PodInfo, lister: SharedLister) -> Status:
        """Every claim of the pod exists."""
        got = self._rwop(pod)
        return got if isinstance(got, Status) else SUCCESS

    def _evaluate(self, pod: PodInfo, lister: SharedLister) -> _Verdict:
        table = lister.table
        ok = np.zeros(table.capacity, dtype=bool)
        reasons: dict[int, list[tuple[str, str]]] = {}
        rwop = self._rwop(pod)
        assert not isinstance(rwop, Status)
        pods = self._node_pods(pod, lister)
        in_use: set[str] = set()
        if rwop:
            for others in pods.values():
                for o in others:
                    if o.namespace == pod.namespace and o.key != pod.key:
                        in_use.update(v.claim for v in _volumes(o) if v.source == PVC_SOURCE)
            in_use &= rwop
        disks = [v for v in _volumes(pod) if v.source in _RESTRICTED]
        if not disks and not in_use:
            return _Verdict(_present(lister), reasons)
        for row in self._rows(lister):
            if disks:
                hit = next(
                    (
                        (v, o)
                        for o in pods.get(row, ())
                        if o.key != pod.key
                        for v in disks
                        for ov in _volumes(o)
                        if _disk_conflict(v, ov)
                    ),
                    None,
                )
                if hit is not None:
                    v, o = hit
                    long_ = (
                        f"run pod {o.namespace}/{o.name} using the {v.source} disk "
                        f"{'/'.join(v.disk)} of volume {v.name!r}"
                    )
                    reasons[row] = [(DISK_CONFLICT, long_)]
                    continue
            if in_use:
                claims = ", ".join(f'"{c}"' for c in sorted(in_use))
                reasons[row] = [
                    (RWOP_CONFLICT, f"cannot be used: ReadWriteOncePod claim {claims} is in use")
                ]
                continue
            ok[row] = True
        return _Verdict(ok, reasons)


# ---- VolumeZone ----------------------------------------------------------------------------


class VolumeZone(_VolumePlugin):
    """A bound PersistentVolume's zone and region labels must match the node's (kube-
    scheduler's VolumeZone)."""

    name = "VolumeZone"

    def applies(self, pod: PodInfo) -> bool:
        """Pods with ``persistentVolumeClaim`` volumes."""
        return any(v.source == PVC_SOURCE for v in _volumes(pod))

    def _topologies(self, pod: PodInfo) -> list[tuple[str, str, frozenset[str]]] | Status:
        s = self._state
        out: list[tuple[str, str, frozenset[str]]] = []
        for v in _volumes(pod):
            if v.source != PVC_SOURCE:
                continue
            if not v.claim:
                return _unresolvable("PersistentVolumeClaim had no name")
            pvc = s.pvc((pod.namespace, v.claim))
            if pvc is None:
                return _unresolvable(_not_found("persistentvolumeclaim", v.claim))
            pv_name = str(_spec(pvc).get("volumeName") or "")
            if not pv_name:
                cls = claim_class(pvc)
                if not cls:
                    return _unresolvable(
                        "PersistentVolumeClaim had no pv name and storageClass name"
                    )
                sc = s.classes.get(cls)
                if sc is None:
                    return _unresolvable(_not_found("storageclass.storage.k8s.io", cls))
                mode = sc.get("volumeBindingMode")
                if mode is None:
                    return _unresolvable(f'VolumeBindingMode not set for StorageClass "{cls}"')
                if mode == _WFFC:
                    continue
                return _unresolvable("PersistentVolume had no name")
            pv = s.pv(pv_name)
            if pv is None:
                return _unresolvable(_not_found("persistentvolume", pv_name))
            out.extend((pv_name, key, values) for key, values in pv_topologies(pv))
        return out

    def pre_filter_pod(self, pod: PodInfo, lister: SharedLister) -> Status:
        """Every claim exists, and a claim not bound yet is WaitForFirstConsumer."""
        got = self._topologies(pod)
        return got if isinstance(got, Status) else SUCCESS

    def _evaluate(self, pod: PodInfo, lister: SharedLister) -> _Verdict:
        table = lister.table
        ok = np.zeros(table.capacity, dtype=bool)
        reasons: dict[int, list[tuple[str, str]]] = {}
        topo = self._topologies(pod)
        assert not isinstance(topo, Status)
        if not topo:
            return _Verdict(_present(lister), reasons)
        for row in self._rows(lister):
            labels = table.labels[row]
            if not topo or not any(k in labels for k in ZONE_LABELS):
                ok[row] = True
                continue
            bad = None
            for pv, key, values in topo:
                value = labels.get(key)
                if value is None:
                    value = labels.get(ga_label(key))
                if value is None or value not in values:
                    bad = (pv, key, values)
                    break
            if bad is None:
                ok[row] = True
                continue
            pv, key, values = bad
            want = ", ".join(sorted(values))
            reasons[row] = [(ZONE_CONFLICT, f'are not in {key} {want} of PersistentVolume "{pv}"')]
        return _Verdict(ok, reasons)


# ---- NodeVolumeLimits ---------------------------------------------------------------------


def _in_tree_handle(source: str, value: str) -> str:
    if source == "awsElasticBlockStore" and value.startswith("aws://"):
        return value.rsplit("/", 1)[-1]  # aws://<zone>/<volume id>
    return value


_IN_TREE_PROVISIONERS = {plugin: driver for driver, _, plugin in IN_TREE_DRIVERS.values()}


class NodeVolumeLimits(_VolumePlugin):
    """A node's CSINode ``spec.drivers[].allocatable.count`` bounds the CSI volumes of the
    pods on it (kube-scheduler's NodeVolumeLimits): the pod's claims (through their
    PersistentVolume's CSI source, or their StorageClass's provisioner while unbound) and its
    in-tree disks CSI migration turns into CSI volumes, counted once per volume with those of
    the pods on the node (the pods the cycle placed there included) and the node's
    VolumeAttachments."""

    name = "NodeVolumeLimits"
    frees_with_victims = True

    def applies(self, pod: PodInfo) -> bool:
        """Pods with a claim or an in-tree disk CSI migration translates."""
        return any(v.uses_claim or v.source in IN_TREE_DRIVERS for v in _volumes(pod))

    def pre_filter_pod(self, pod: PodInfo, lister: SharedLister) -> Status:
        """Nothing holds on every node (its Filter looks the claims up)."""
        return SUCCESS

    def _missing(self, pod: PodInfo) -> str | None:
        """Why the pod's claims cannot be counted on any node (a claim that does not exist,
        an ephemeral one not the pod's), or None."""
        for v in _volumes(pod):
            if not v.uses_claim:
                continue
            name = v.claim_for(pod.name)
            pvc = self._state.pvc((pod.namespace, name))
            if pvc is None:
                return f"looking up PVC {pod.namespace}/{name}: " + _not_found(
                    "persistentvolumeclaim", name
                )
            if v.source == EPHEMERAL_SOURCE and not _is_for_pod(pod, pvc):
                return _not_for_pod(pod, pvc)
        return None

    def _driver_of_claim(
        self, pvc: Mapping[str, Any], csi_node: Mapping[str, Any] | None
    ) -> tuple[str, str]:
        s = self._state
        pv_name = str(_spec(pvc).get("volumeName") or "")
        pv = s.pv(pv_name) if pv_name else None
        if pv is None:
            return self._driver_of_class(pvc, csi_node)
        csi = _spec(pv).get("csi")
        if isinstance(csi, Mapping):
            return str(csi.get("driver") or ""), str(csi.get("volumeHandle") or "")
        src = in_tree_source(pv)
        if src is None or src[0] not in IN_TREE_DRIVERS or csi_node is None:
            return "", ""
        driver, field, _ = IN_TREE_DRIVERS[src[0]]
        value = str((_spec(pv).get(src[0]) or {}).get(field) or "")
        return driver, _in_tree_handle(src[0], value)

    def _driver_of_class(
        self, pvc: Mapping[str, Any], csi_node: Mapping[str, Any] | None
    ) -> tuple[str, str]:
        cls = claim_class(pvc)
        sc = self._state.classes.get(cls) if cls else None
        if sc is None:
            return "", ""
        m = meta(pvc)
        handle = f"{self._state.volume_id_prefix}-{m.get('namespace')}/{m.get('name')}"
        provisioner = str(sc.get("provisioner") or "")
        if provisioner in _IN_TREE_PROVISIONERS:
            if csi_node is None:
                return "", ""
            return _IN_TREE_PROVISIONERS[provisioner], handle
        return provisioner, handle

    def _attachable(
        self, pod: PodInfo, csi_node: Mapping[str, Any] | None, into: dict[str, str]
    ) -> None:
        """The pod's volumes as CSI volumes: unique name -> driver (claims that do not exist
        are not counted)."""
        for v in _volumes(pod):
            if v.uses_claim:
                pvc = self._state.pvc((pod.namespace, v.claim_for(pod.name)))
                if pvc is None:
                    continue
                driver, handle = self._driver_of_claim(pvc, csi_node)
            elif v.source in IN_TREE_DRIVERS and csi_node is not None:
                driver = IN_TREE_DRIVERS[v.source][0]
                handle = _in_tree_handle(v.source, v.disk[0] if v.disk else "")
            else:
                continue
            if driver and handle:
                into[f"{driver}/{handle}"] = driver

    def _attachments(self, node: str) -> dict[str, str]:
        out: dict[str, str] = {}
        s = self._state
        for va in s.attachments.values():
            spec = _spec(va)
            if spec.get("nodeName") != node or not spec.get("attacher"):
                continue
            pv_name = (spec.get("source") or {}).get("persistentVolumeName")
            pv = s.pv(str(pv_name)) if pv_name else None
            csi = _spec(pv).get("csi") if pv is not None else None
            if isinstance(csi, Mapping):
                out[f"{spec['attacher']}/{csi.get('volumeHandle')}"] = str(spec["attacher"])
        return out

    def _evaluate(self, pod: PodInfo, lister: SharedLister) -> _Verdict:
        s = self._state
        table = lister.table
        ok = np.zeros(table.capacity, dtype=bool)
        reasons: dict[int, list[tuple[str, str]]] = {}
        missing = self._missing(pod)
        if missing is not None:  # VolumeBinding's PreFilter says so first when enabled
            return _Verdict(ok, {r: [(missing, missing)] for r in self._rows(lister)})
        if not s.csi_nodes and not any(
            _spec(d).get("preventPodSchedulingIfMissing") for d in s.csi_drivers.values()
        ):  # no node declares limits, no driver must be installed
            return _Verdict(_present(lister), reasons)
        pods = self._node_pods(pod, lister)
        for row in self._rows(lister):
            name = table.names[row] or ""
            csi_node = s.csi_nodes.get(name)
            new: dict[str, str] = {}
            self._attachable(pod, csi_node, new)
            if not new:
                ok[row] = True
                continue
            drivers = (_spec(csi_node).get("drivers") or ()) if csi_node is not None else ()
            installed = {str(d.get("name")) for d in drivers if isinstance(d, Mapping)}
            missing = next(
                (
                    d
                    for d in sorted(set(new.values()))
                    if _spec(s.csi_drivers.get(d) or {}).get("preventPodSchedulingIfMissing")
                    and d not in installed
                ),
                None,
            )
            if missing is not None:
                text = f"{missing} CSI driver is not installed on the node"
                reasons[row] = [(text, f"don't have the {missing} CSI driver installed")]
                continue
            limits: dict[str, int] = {}
            for d in drivers:
                count = (
                    (d.get("allocatable") or {}).get("count") if isinstance(d, Mapping) else None
                )
                if isinstance(count, int):
                    limits[str(d.get("name"))] = count
            if not limits:
                ok[row] = True
                continue
            attached: dict[str, str] = {}
            for o in pods.get(row, ()):
                if o.key != pod.key:
                    self._attachable(o, csi_node, attached)
            used: dict[str, int] = {}
            for unique, driver in attached.items():
                new.pop(unique, None)
                used[driver] = used.get(driver, 0) + 1
            for unique, driver in self._attachments(name).items():
                if unique not in attached:
                    used[driver] = used.get(driver, 0) + 1
            wanted: dict[str, int] = {}
            for driver in new.values():
                wanted[driver] = wanted.get(driver, 0) + 1
            over = next(
                (
                    (d, n)
                    for d, n in sorted(wanted.items())
                    if d in limits and used.get(d, 0) + n > limits[d]
                ),
                None,
            )
            if over is None:
                ok[row] = True
                continue
            d, n = over
            reasons[row] = [
                (
                    MAX_VOLUME_COUNT,
                    f"have {used.get(d, 0)} of {limits[d]} {d} volumes attached "
                    f"(the pod needs {n} more)",
                )
            ]
        return _Verdict(ok, reasons)


# ---- VolumeBinding ----------------------------------------------------------------------------


@attrs.define(eq=False)
class VolumeBindingPlan:
    """What VolumeBinding decided for one pod on one node: the PersistentVolumes to bind to
    its WaitForFirstConsumer claims (``bindings``: PV, claim) and the claims to provision
    there (``provisions``: claim, node); PreBind writes them."""

    pod: tuple[str, str]
    bindings: list[tuple[str, ClaimKey]]
    provisions: list[tuple[ClaimKey, str]]
    #: the writes PreBind made (undone when the pod is not bound), with the resourceVersion
    #: each object had before (an informer still showing it has not seen the write yet)
    written_pvs: dict[str, str] = attrs.field(factory=dict)
    written_pvcs: dict[ClaimKey, str] = attrs.field(factory=dict)

    def __bool__(self) -> bool:
        return True


def _seen_write(obj: Mapping[str, Any], before: str | None) -> bool:
    """PreBind wrote ``obj`` (then at ``before``) and the informer shows a later version."""
    return before is not None and str(meta(obj).get("resourceVersion") or "") != before


@attrs.frozen
class _PodClaims:
    bound: tuple[tuple[ClaimKey, Mapping[str, Any]], ...]
    delay: tuple[tuple[ClaimKey, Mapping[str, Any]], ...]


@attrs.frozen(eq=False)
class _Context:
    """A pod's claims as VolumeBinding evaluates them in one cycle state: the
    WaitForFirstConsumer ones smallest first, and each one's candidate volumes."""

    claims: _PodClaims
    ordered: list[tuple[ClaimKey, Mapping[str, Any]]]
    candidates: dict[ClaimKey, tuple[list[Mapping[str, Any]], bool]]


def _topology_fits(terms: Any, labels: Mapping[str, str]) -> bool:
    """A StorageClass's ``allowedTopologies`` (terms ORed, expressions ANDed; none: every
    node)."""
    if not terms:
        return True
    for term in terms:
        exprs = term.get("matchLabelExpressions") or () if isinstance(term, Mapping) else ()
        if all(
            labels.get(str(e.get("key"))) in {str(v) for v in e.get("values") or ()} for e in exprs
        ):
            return True
    return False


class VolumeBinding(_VolumePlugin):
    """PersistentVolumeClaims and generic ephemeral volumes (kube-scheduler's VolumeBinding):
    every claim must exist; an unbound ``Immediate`` claim keeps the pod pending; a bound
    claim's PersistentVolume node affinity restricts the nodes; a ``WaitForFirstConsumer``
    claim needs, on the node, an available PersistentVolume it can bind to (class, capacity,
    access modes, volume mode, selector, node affinity: the smallest one) or a StorageClass
    that provisions there. PreBind binds the chosen volumes (``spec.claimRef``) or sets the
    claim's ``volume.kubernetes.io/selected-node``, then waits for the PV controller to bind
    the claims; a pod that is not bound after all gets those writes undone."""

    name = "VolumeBinding"
    _all_reasons = True
    #: seconds PreBind waits for the PV controller (upstream's ``bindTimeoutSeconds``)
    bind_timeout: float = 600.0

    def __init__(self, state: VolumeState | None = None) -> None:
        super().__init__(state)
        self._masks: dict[str, tuple[tuple[Any, ...], Mask]] = {}
        self._pending: dict[tuple[str, str], VolumeBindingPlan] = {}
        self._locks: dict[ClaimKey, asyncio.Lock] = {}

    def applies(self, pod: PodInfo) -> bool:
        """Pods with a claim (``persistentVolumeClaim`` or generic ``ephemeral``)."""
        return any(v.uses_claim for v in _volumes(pod))

    def _claims(self, pod: PodInfo) -> _PodClaims | Status:
        s = self._state
        found: list[tuple[ClaimKey, Mapping[str, Any]]] = []
        for v in _volumes(pod):
            if not v.uses_claim:
                continue
            name = v.claim_for(pod.name)
            key = (pod.namespace, name)
            pvc = s.pvc(key)
            if pvc is None:
                if v.source == EPHEMERAL_SOURCE:
                    return _unresolvable(
                        "waiting for ephemeral volume controller to create the "
                        f'persistentvolumeclaim "{name}"'
                    )
                return _unresolvable(_not_found("persistentvolumeclaim", name))
            if (pvc.get("status") or {}).get("phase") == "Lost":
                return _unresolvable(
                    f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume '
                    f'"{_spec(pvc).get("volumeName") or ""}"'
                )
            if meta(pvc).get("deletionTimestamp"):
                return _unresolvable(f'persistentvolumeclaim "{name}" is being deleted')
            if v.source == EPHEMERAL_SOURCE and not _is_for_pod(pod, pvc):
                return _unresolvable(_not_for_pod(pod, pvc))
            found.append((key, pvc))
        bound: list[tuple[ClaimKey, Mapping[str, Any]]] = []
        delay: list[tuple[ClaimKey, Mapping[str, Any]]] = []
        immediate = False
        for key, claim in found:
            if fully_bound(claim):
                bound.append((key, claim))
                continue
            cls = claim_class(claim)
            sc = s.classes.get(cls) if cls else None
            if sc is not None and sc.get("volumeBindingMode") is None:
                return _unresolvable(f'VolumeBindingMode not set for StorageClass "{cls}"')
            wffc = sc is not None and sc.get("volumeBindingMode") == _WFFC
            if wffc and not _spec(claim).get("volumeName"):
                delay.append((key, claim))
            else:
                immediate = True
        if immediate:
            return _unresolvable(UNBOUND_IMMEDIATE)
        for _, claim in bound:
            pv = s.pv(str(_spec(claim).get("volumeName")))
            src = in_tree_source(pv) if pv is not None else None
            if src is not None and any(
                src[1] in str(meta(n).get("annotations", {}).get(_MIGRATED_PLUGINS, "")).split(",")
                for n in s.csi_nodes.values()
            ):
                return _unresolvable(
                    f'PersistentVolume "{meta(pv or {}).get("name")}" ({src[0]}) is migrated to '
                    "CSI on some nodes: this scheduler does not translate its node affinity"
                )
        for key, claim in delay:
            klass = s.classes.get(claim_class(claim)) or {}
            driver = s.csi_drivers.get(str(klass.get("provisioner") or ""))
            if (
                driver is not None
                and _spec(driver).get("storageCapacity")
                and storage_request(claim) > 0
            ):
                return _unresolvable(
                    f'claim "{key[1]}": CSIDriver "{meta(driver).get("name")}" has '
                    "storageCapacity: true; this scheduler does not evaluate "
                    "CSIStorageCapacity objects"
                )
        return _PodClaims(tuple(bound), tuple(delay))

    def pre_filter_pod(self, pod: PodInfo, lister: SharedLister) -> Status:
        """Every claim exists and is usable; none is an unbound Immediate claim."""
        got = self._claims(pod)
        return got if isinstance(got, Status) else SUCCESS

    def _pv_mask(self, pv: Mapping[str, Any], lister: SharedLister) -> Mask:
        """Per node row, whether the volume's node affinity holds there (cached per volume
        version and node-table epoch)."""
        table = lister.table
        m = meta(pv)
        name = str(m.get("name"))
        token = (str(m.get("resourceVersion") or ""), id(table), table.epoch, table.capacity)
        got = self._masks.get(name)
        if got is not None and got[0] == token:
            return got[1]
        mask = np.zeros(table.capacity, dtype=bool)
        if not _spec(pv).get("nodeAffinity"):
            mask[:] = table.present
        else:
            for row in self._rows(lister):
                mask[row] = pv_fits_node(pv, table.labels[row])
        if len(self._masks) > 100_000:
            self._masks.clear()
        self._masks[name] = (token, mask)
        return mask

    def _provision_mask(self, sc: Mapping[str, Any] | None, lister: SharedLister) -> Mask:
        """Per node row, whether the class provisions there (a provisioner, and its
        ``allowedTopologies``)."""
        table = lister.table
        provisioner = str((sc or {}).get("provisioner") or "")
        if sc is None or not provisioner or provisioner == NO_PROVISIONER:
            return np.zeros(table.capacity, dtype=bool)
        terms = sc.get("allowedTopologies")
        if not terms:
            return np.asarray(table.present, dtype=bool).copy()
        mask = np.zeros(table.capacity, dtype=bool)
        for row in self._rows(lister):
            mask[row] = _topology_fits(terms, table.labels[row])
        return mask

    def _context(self, claims: _PodClaims, lister: SharedLister) -> _Context:
        """What the per-node evaluation of ``claims`` reads, computed once per pod and cycle
        state: each WaitForFirstConsumer claim's candidate volumes (and whether one is
        pre-bound to it), the volumes other claims of the cycle took, node masks."""
        s = self._state
        classes = {claim_class(pvc) for _, pvc in claims.delay}
        by_class: dict[str, list[dict[str, Any]]] = {c: [] for c in classes}
        if classes:
            for vol in s.volumes():
                same = by_class.get(pv_class(vol))
                if same is not None:
                    same.append(vol)
        taken = dict(s.tentative_pvs)
        ordered = sorted(claims.delay, key=lambda kv: storage_request(kv[1]))
        cands: dict[ClaimKey, tuple[list[Mapping[str, Any]], bool]] = {}
        for key, pvc in ordered:
            mine = [pv for pv, c in taken.items() if c == key]
            held = s.pv(mine[0]) if mine else None
            if held is not None:  # an earlier pod of the cycle chose it for this claim
                cands[key] = ([held], True)
                continue
            got, prebound = volume_candidates(pvc, by_class.get(claim_class(pvc), ()))
            if not prebound:
                got = [pv for pv in got if str(meta(pv).get("name")) not in taken]
            cands[key] = (got, prebound)
        return _Context(claims, ordered, cands)

    def _evaluate(self, pod: PodInfo, lister: SharedLister) -> _Verdict:
        claims = self._claims(pod)
        assert not isinstance(claims, Status)
        s = self._state
        table = lister.table
        ok = _present(lister)
        if not claims.delay and all(
            (pv := s.pv(str(_spec(pvc).get("volumeName")))) is not None
            and not _spec(pv).get("nodeAffinity")
            for _, pvc in claims.bound
        ):  # nothing depends on the node (the common case: claims bound, volumes anywhere)
            return _Verdict(ok, {})
        ctx = self._context(claims, lister)
        for _, pvc in claims.bound:
            pv = s.pv(str(_spec(pvc).get("volumeName")))
            if pv is None:
                ok[:] = False
                break
            ok &= self._pv_mask(pv, lister)
        to_match = 0
        for key, pvc in ctx.ordered:
            selected = s.tentative_pvcs.get(key) or (meta(pvc).get("annotations") or {}).get(
                ANN_SELECTED_NODE
            )
            if selected is not None:
                only = np.zeros(table.capacity, dtype=bool)
                row = table.index.get(str(selected))
                if row is not None:
                    only[row] = True
                ok &= only
                continue
            to_match += 1
            fits = self._provision_mask(s.classes.get(claim_class(pvc)), lister)
            for vol in ctx.candidates[key][0]:
                fits = fits | self._pv_mask(vol, lister)
            ok &= fits
        if to_match > 1:  # claims may compete for one volume of a node: the greedy decides
            for row in np.flatnonzero(ok).tolist():
                if isinstance(self._plan(pod, ctx, lister, row), list):
                    ok[row] = False
        return _Verdict(ok, {}, {}, ctx)

    def filter_pod(self, pod: PodInfo, lister: SharedLister, row: int) -> Any:
        """The plan for the pod's claims on ``row``, or None."""
        if not self.pre_filter_pod(pod, lister).ok:
            return None
        v = self._verdict(pod, lister)
        if row >= v.ok.size or not v.ok[row]:
            return None
        if v.context is None:
            return VolumeBindingPlan(pod.key, [], [])
        got = self._plan(pod, v.context, lister, row)
        return None if isinstance(got, list) else got

    def diagnose_pod(
        self, pod: PodInfo, lister: SharedLister, rows: Rows
    ) -> list[tuple[str, str, int]]:
        """Per reason, how many rows of ``rows`` fail for it (a row under every reason it
        has, as upstream counts them)."""
        if not self.pre_filter_pod(pod, lister).ok:
            return []
        v = self._verdict(pod, lister)
        ctx = v.context
        counts: dict[tuple[str, str], int] = {}
        for row in rows.tolist():
            if row < v.ok.size and v.ok[row]:
                continue
            got = self._plan(pod, ctx, lister, row) if ctx is not None else None
            for r in got if isinstance(got, list) else ():
                counts[r] = counts.get(r, 0) + 1
        return [(short, long_, n) for (short, long_), n in counts.items()]

    def _plan(
        self, pod: PodInfo, ctx: _Context, lister: SharedLister, row: int
    ) -> VolumeBindingPlan | list[tuple[str, str]]:
        """The plan for the pod's claims on the node of ``row``, or the reasons it fails
        there (as upstream's ``FindPodVolumes``)."""
        s = self._state
        table = lister.table
        node = table.names[row] or ""
        labels = table.labels[row]
        out: list[tuple[str, str]] = []
        for key, pvc in ctx.claims.bound:
            pv_name = str(_spec(pvc).get("volumeName"))
            pv = s.pv(pv_name)
            if pv is None:
                out.append((PV_NOT_EXIST, f'lack PersistentVolume "{pv_name}" of claim "{key[1]}"'))
                break
            if not self._pv_mask(pv, lister)[row]:
                out.append(
                    (
                        NODE_CONFLICT,
                        f'don\'t match the node affinity of PersistentVolume "{pv_name}" '
                        f'(claim "{key[1]}")',
                    )
                )
                break
        bindings: list[tuple[str, ClaimKey]] = []
        provisions: list[tuple[ClaimKey, str]] = []
        to_provision: list[tuple[ClaimKey, Mapping[str, Any]]] = []
        to_match: list[tuple[ClaimKey, Mapping[str, Any]]] = []
        for key, pvc in ctx.ordered:
            selected = s.tentative_pvcs.get(key) or (meta(pvc).get("annotations") or {}).get(
                ANN_SELECTED_NODE
            )
            if selected is not None:
                if selected != node:
                    out.append((BIND_CONFLICT, f'are not the node selected for claim "{key[1]}"'))
                    return out
                to_provision.append((key, pvc))
            else:
                to_match.append((key, pvc))
        chosen: set[str] = set()
        for key, pvc in to_match:
            cands, prebound = ctx.candidates[key]
            match: Mapping[str, Any] | None = None
            for cand in cands:
                if str(meta(cand).get("name")) in chosen:
                    continue
                if self._pv_mask(cand, lister)[row]:
                    match = cand
                    break
                if prebound:  # the pre-bound volume does not fit here: no other does
                    break
            if match is None:
                to_provision.append((key, pvc))
                continue
            name = str(meta(match).get("name"))
            chosen.add(name)
            bindings.append((name, key))
        for key, pvc in to_provision:
            cls = claim_class(pvc)
            sc = s.classes.get(cls) if cls else None
            provisioner = str((sc or {}).get("provisioner") or "")
            if sc is None or not provisioner or provisioner == NO_PROVISIONER:
                why = (
                    f'have no available PersistentVolume for claim "{key[1]}" '
                    f'(class "{cls}", which does not provision)'
                )
                out.append((BIND_CONFLICT, why))
                break
            if not _topology_fits(sc.get("allowedTopologies"), labels):
                why = f'are outside the allowed topologies of class "{cls}" (claim "{key[1]}")'
                out.append((BIND_CONFLICT, why))
                break
            provisions.append((key, node))
        if out:
            return out
        return VolumeBindingPlan(pod.key, bindings, provisions)

    def shape_key(self, pod: PodInfo, lister: SharedLister) -> Any:
        """No sharing of failed rows between pods (volumes get taken in a cycle)."""
        return None

    def reserve_pod(self, pod: PodInfo, lister: SharedLister, row: int, plan: Any) -> None:
        """Take the plan's volumes and provisions tentatively (undone on revert)."""
        if not isinstance(plan, VolumeBindingPlan) or not (plan.bindings or plan.provisions):
            return
        undo = self._state.reserve(plan.bindings, plan.provisions)
        record = getattr(lister, "record", None)
        if callable(record):
            record(plan, undo)

    def commit(self, reservations: Sequence[Any]) -> None:
        """Assume the cycle's bindings and selected nodes until the informers show them."""
        s = self._state
        for r in reservations:
            if not isinstance(r, VolumeBindingPlan):
                continue
            for pv, key in r.bindings:
                pvc = s.pvc(key)
                if pvc is not None:
                    s.assume_binding(pv, pvc)
            for key, node in r.provisions:
                s.assume_selected_node(key, ANN_SELECTED_NODE, node)
            self._pending[r.pod] = r

    # ---- binding ---------------------------------------------------------------------

    async def pre_bind(self, cluster: Cluster, pod: PodInfo, node: str) -> Status:
        """Bind the chosen volumes and mark the claims to provision (updates, as upstream's
        binder), then wait until the PV controller has bound every claim of the pod."""
        plan = self._pending.get(pod.key)
        if plan is None:
            return SUCCESS
        s = self._state
        try:
            for pv_name, key in plan.bindings:
                async with self._locks.setdefault(key, asyncio.Lock()):
                    pv = s.pvs.get(pv_name)
                    pvc = s.pvcs.get(key)
                    if pv is None or pvc is None:
                        return self._error(f'PersistentVolume "{pv_name}" or its claim is gone')
                    if bound_to_claim(pv, pvc):
                        continue
                    new = copy.deepcopy(pv)
                    m = meta(pvc)
                    new["spec"]["claimRef"] = {
                        "kind": "PersistentVolumeClaim",
                        "apiVersion": "v1",
                        "namespace": m.get("namespace"),
                        "name": m.get("name"),
                        "uid": m.get("uid"),
                        "resourceVersion": m.get("resourceVersion"),
                    }
                    new["metadata"].setdefault("annotations", {})[ANN_BOUND_BY_CONTROLLER] = "yes"
                    await cluster.update(new)
                    plan.written_pvs[pv_name] = str(meta(pv).get("resourceVersion") or "")
            for key, target in plan.provisions:
                async with self._locks.setdefault(key, asyncio.Lock()):
                    pvc = s.pvcs.get(key)
                    if pvc is None:
                        return self._error(_not_found("persistentvolumeclaim", key[1]))
                    anns = meta(pvc).get("annotations") or {}
                    if anns.get(ANN_SELECTED_NODE) == target or _spec(pvc).get("volumeName"):
                        continue
                    new = copy.deepcopy(pvc)
                    new["metadata"].setdefault("annotations", {})[ANN_SELECTED_NODE] = target
                    await cluster.update(new)
                    plan.written_pvcs[key] = str(meta(pvc).get("resourceVersion") or "")
        except ApiError as e:
            return self._error(f"binding volumes: {e}")
        return await self._wait_bound(pod, plan)

    def _error(self, message: str) -> Status:
        return Status(code=Code.ERROR, message=message, plugin=self.name)

    async def _wait_bound(self, pod: PodInfo, plan: VolumeBindingPlan) -> Status:
        s = self._state
        deadline = time.monotonic() + self.bind_timeout
        while True:
            waiting: list[str] = []
            for pv_name, key in plan.bindings:
                pvc = s.pvcs.get(key)
                pv = s.pvs.get(pv_name)
                if pvc is None:
                    return self._error(_not_found("persistentvolumeclaim", key[1]))
                if (
                    pv is not None
                    and _spec(pv).get("claimRef") is None
                    and _seen_write(pv, plan.written_pvs.get(pv_name))
                ):
                    return self._error(
                        f'binding volumes: PersistentVolume "{pv_name}" claimRef has been removed'
                    )
                if not fully_bound(pvc):
                    waiting.append(key[1])
            for key, _ in plan.provisions:
                pvc = s.pvcs.get(key)
                if pvc is None:
                    return self._error(_not_found("persistentvolumeclaim", key[1]))
                anns = meta(pvc).get("annotations") or {}
                reset = not _spec(pvc).get("volumeName") and ANN_SELECTED_NODE not in anns
                if reset and _seen_write(pvc, plan.written_pvcs.get(key)):
                    return self._error(
                        f'binding volumes: selectedNode annotation reset for PVC "{key[1]}"'
                    )
                if not fully_bound(pvc):
                    waiting.append(key[1])
            if not waiting:
                self._pending.pop(pod.key, None)
                return SUCCESS
            left = deadline - time.monotonic()
            if left <= 0:
                names = ", ".join(f'"{w}"' for w in waiting)
                return self._error(f"binding volumes: timed out waiting for claims {names}")
            await s.wait_changed(min(left, 1.0))

    async def unreserve(self, cluster: Cluster, pod: PodInfo) -> None:
        """The pod will not be bound: forget the assumed bindings, and undo the writes the PV
        controller has not acted on (a PV's ``claimRef`` whose claim is not bound to it, a
        selected node of a claim not provisioned yet)."""
        plan = self._pending.pop(pod.key, None)
        if plan is None:
            return
        s = self._state
        for pv_name, _ in plan.bindings:
            s.forget_pv(pv_name)
        for key, _ in plan.provisions:
            s.forget_pvc(key)
        for pv_name in plan.written_pvs:
            claim = next(k for p, k in plan.bindings if p == pv_name)
            await self._undo(cluster, pv_name, functools.partial(self._unbound_pv, pv_name, claim))
        for key in plan.written_pvcs:
            await self._undo(cluster, key[1], functools.partial(self._unselected_pvc, key))

    def _unbound_pv(self, pv_name: str, claim: ClaimKey) -> dict[str, Any] | None:
        """The PV without the claimRef PreBind wrote, or None when there is nothing to undo
        (gone, or the PV controller bound them)."""
        s = self._state
        pv = s.pvs.get(pv_name)
        pvc = s.pvcs.get(claim)
        if pv is None or (pvc is not None and _spec(pvc).get("volumeName") == pv_name):
            return None
        if (pv.get("status") or {}).get("phase") == "Bound" or "claimRef" not in _spec(pv):
            return None
        new = copy.deepcopy(pv)
        new["spec"].pop("claimRef", None)
        (new["metadata"].get("annotations") or {}).pop(ANN_BOUND_BY_CONTROLLER, None)
        return new

    def _unselected_pvc(self, key: ClaimKey) -> dict[str, Any] | None:
        """The claim without the selected node PreBind wrote, or None (gone, provisioned)."""
        pvc = self._state.pvcs.get(key)
        anns = (meta(pvc).get("annotations") or {}) if pvc is not None else {}
        if pvc is None or _spec(pvc).get("volumeName") or ANN_SELECTED_NODE not in anns:
            return None
        new = copy.deepcopy(pvc)
        new["metadata"]["annotations"].pop(ANN_SELECTED_NODE, None)
        return new

    async def _undo(
        self, cluster: Cluster, name: str, undone: Callable[[], dict[str, Any] | None]
    ) -> None:
        """Write ``undone()`` (built from the informer's copy); on a conflict (the informer
        had not seen the latest version yet) again once it delivered a change, a few times."""
        for _ in range(5):
            obj = undone()
            if obj is None:
                return
            try:
                await cluster.update(obj)
                return
            except NotFound:
                return
            except Conflict:
                await self._state.wait_changed(1.0)
            except ApiError as e:
                _log.warning("undoing the volume binding of %s failed: %s", name, e)
                return
        _log.warning("undoing the volume binding of %s failed: conflicts", name)
