"""What the :class:`~workloadbuilder.runtime.Reconciler` reads of the objects it owns and what
it reports: the condition and event names, an object's metadata (:func:`meta_of`, named
fields instead of a tuple), :data:`ObjKey`, :class:`ReconcileResult` and the
:class:`Outcome` it is built from."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from workloadbuilder.api import PodGroup, Workload, to_dict
from workloadbuilder.cluster import KubeObject

__all__ = [
    "CONDITION_GANG_SCHEDULED",
    "CONDITION_INITIALLY_SCHEDULED",
    "EVENT_FAILED_COMPILATION",
    "EVENT_FAILED_WORKLOAD_CREATE",
    "EVENT_GANG_PREEMPTED",
    "EVENT_GANG_SCHEDULED",
    "EVENT_GANG_UNSCHEDULABLE",
    "EVENT_NAME_CONFLICT",
    "Meta",
    "ObjKey",
    "Outcome",
    "OwnerRef",
    "ReconcileResult",
    "api_group",
    "gang_min",
    "kind_of",
    "meta_of",
    "templates_of",
]

#: the PodGroup condition the scheduler writes
CONDITION_INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"
#: event reasons recorded on the owner
EVENT_GANG_SCHEDULED = "GangScheduled"
EVENT_GANG_UNSCHEDULABLE = "GangUnschedulable"
EVENT_GANG_PREEMPTED = "GangPreempted"
EVENT_FAILED_COMPILATION = "FailedWorkloadCompilation"
EVENT_NAME_CONFLICT = "SchedulingObjectConflict"
#: kube-controller-manager's reason when its Workload's name is taken (or creation failed)
EVENT_FAILED_WORKLOAD_CREATE = "FailedWorkloadCreate"
#: the owner condition written for integrations that declare a ``conditions_path``
CONDITION_GANG_SCHEDULED = "GangScheduled"

ObjKey = tuple[str, str, str]  # (kind, namespace, name)


@attrs.frozen
class OwnerRef:
    """One ``metadata.ownerReferences`` entry (``controller`` False when unset)."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool


@attrs.frozen
class Meta:
    """The metadata a reconcile reads of a model or a dict."""

    name: str
    namespace: str
    uid: str
    deletion_timestamp: str | None
    owner_refs: list[OwnerRef]


def meta_of(obj: KubeObject) -> Meta:
    """The name, namespace, uid, deletionTimestamp and ownerReferences of a model or a dict."""
    if isinstance(obj, dict):
        meta = obj.get("metadata") or {}
        refs = [
            OwnerRef(
                str(r.get("apiVersion") or ""),
                str(r.get("kind") or ""),
                str(r.get("name") or ""),
                str(r.get("uid") or ""),
                r.get("controller") is True,
            )
            for r in meta.get("ownerReferences") or []
            if isinstance(r, Mapping)
        ]
        return Meta(
            str(meta.get("name") or ""),
            str(meta.get("namespace") or ""),
            str(meta.get("uid") or ""),
            meta.get("deletionTimestamp"),
            refs,
        )
    m = obj.metadata
    refs = [
        OwnerRef(r.api_version, r.kind, r.name, r.uid, r.controller is True)
        for r in m.owner_references
    ]
    return Meta(m.name or "", m.namespace or "", m.uid or "", m.deletion_timestamp, refs)


def api_group(api_version: str) -> str:
    """The API group of an ``apiVersion`` (``""`` for the core group)."""
    return api_version.split("/")[0] if "/" in api_version else ""


def kind_of(obj: KubeObject) -> str:
    """The ``kind`` of a model or a dict."""
    return str(obj.get("kind")) if isinstance(obj, dict) else obj.kind


def gang_min(obj: KubeObject) -> int | None:
    """A gang PodGroup's ``minCount`` (None for other objects)."""
    if isinstance(obj, PodGroup) and obj.spec.scheduling_policy.gang is not None:
        return obj.spec.scheduling_policy.gang.min_count
    return None


def templates_of(obj: KubeObject) -> Any:
    """A Workload's PodGroup and CompositePodGroup templates as data (None for other
    objects), to compare a live Workload with the planned one."""
    if isinstance(obj, Workload):
        return (
            [to_dict(t) for t in obj.spec.pod_group_templates],
            [to_dict(t) for t in obj.spec.composite_pod_group_templates],
        )
    return None


@attrs.frozen(kw_only=True)
class ReconcileResult:
    """What one reconcile did (returned by :meth:`Reconciler.reconcile`, for tests and
    metrics)."""

    created: tuple[ObjKey, ...] = ()
    adopted: tuple[ObjKey, ...] = ()
    patched: tuple[ObjKey, ...] = ()
    deleted: tuple[ObjKey, ...] = ()
    events: tuple[str, ...] = ()
    requeue_after: float | None = None


class Outcome:
    """What one reconcile did so far (the mutable form of :class:`ReconcileResult`)."""

    def __init__(self) -> None:
        self.created: list[ObjKey] = []
        self.adopted: list[ObjKey] = []
        self.patched: list[ObjKey] = []
        self.deleted: list[ObjKey] = []
        self.events: list[str] = []
        self.requeue_after: float | None = None

    def result(self) -> ReconcileResult:
        """The frozen :class:`ReconcileResult`."""
        return ReconcileResult(
            created=tuple(self.created),
            adopted=tuple(self.adopted),
            patched=tuple(self.patched),
            deleted=tuple(self.deleted),
            events=tuple(self.events),
            requeue_after=self.requeue_after,
        )
