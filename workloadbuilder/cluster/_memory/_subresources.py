"""Subresources and helper APIs of :class:`MemoryCluster`: ``pods/binding``, ``pods/eviction``
(with PodDisruptionBudgets, computed on the spot: there is no disruption controller) and
core/v1 Events."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from workloadbuilder.cluster._memory._common import TERMINAL, Now, conflict, uid_conflict
from workloadbuilder.cluster._memory._lifecycle import Lifecycle
from workloadbuilder.cluster._memory._storage import Storage
from workloadbuilder.cluster._memory._writes import Writes
from workloadbuilder.cluster._protocol import ResourceInfo, resource_info
from workloadbuilder.cluster._selectors import label_selector_from_dict
from workloadbuilder.errors import ApiError, TooManyRequests

__all__ = ["EventRecorder", "PodBinding", "PodEviction", "pdb_budget"]

#: the resource named in binding conflicts ("Operation cannot be fulfilled on pods/binding ...")
_BINDING = ResourceInfo(group="", version="v1", kind="Binding", plural="pods/binding")


class PodBinding:
    """``pods/binding``: assign a pod to a node."""

    def __init__(self, storage: Storage, lifecycle: Lifecycle, now: Now) -> None:
        self._storage = storage
        self._lifecycle = lifecycle
        self._now = now
        self._pod = resource_info("Pod")

    def bind(self, namespace: str, pod_name: str, node_name: str, pod_uid: str | None) -> None:
        """Set ``spec.nodeName`` and ``PodScheduled=True``; ``Conflict`` when the pod is
        already bound, is being deleted, has scheduling gates or ``pod_uid`` differs."""
        store, rec = self._storage.require(self._pod, namespace, pod_name)
        meta = rec.doc["metadata"]
        if pod_uid is not None and pod_uid != meta.get("uid"):
            raise uid_conflict(_BINDING, pod_name, pod_uid, meta.get("uid"))
        if meta.get("deletionTimestamp"):
            raise conflict(
                _BINDING,
                pod_name,
                f"pod {pod_name} is being deleted, cannot be assigned to a host",
            )
        spec = rec.doc.get("spec") or {}
        if spec.get("nodeName"):
            raise conflict(
                _BINDING,
                pod_name,
                f'pod {pod_name} is already assigned to node "{spec["nodeName"]}"',
            )
        if spec.get("schedulingGates"):
            raise conflict(
                _BINDING, pod_name, f"pod {pod_name} has non-empty .spec.schedulingGates"
            )
        new = dict(rec.doc)
        new["spec"] = {**spec, "nodeName": node_name}
        status = dict(rec.doc.get("status") or {})
        conditions = [c for c in status.get("conditions") or () if c.get("type") != "PodScheduled"]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": self._now(),
            }
        )
        status["conditions"] = conditions
        new["status"] = status
        new["metadata"] = dict(meta)
        self._lifecycle.commit(store, (namespace, pod_name), rec, new)


class PodEviction:
    """``policy/v1`` Eviction, checked against the matching PodDisruptionBudget."""

    def __init__(self, storage: Storage, lifecycle: Lifecycle) -> None:
        self._storage = storage
        self._lifecycle = lifecycle

    def evict(self, namespace: str, pod_name: str) -> None:
        """Pending and terminal pods are deleted at once; otherwise a matching
        PodDisruptionBudget must allow a disruption (``TooManyRequests`` if not)."""
        info = resource_info("Pod")
        store, rec = self._storage.require(info, namespace, pod_name)
        phase = (rec.doc.get("status") or {}).get("phase")
        if phase not in ("Pending", *TERMINAL):
            labels = rec.doc["metadata"].get("labels") or {}
            pdbs = self._storage.kind(resource_info("PodDisruptionBudget"))
            matching = [
                (k, r)
                for k, r in pdbs.iter_sorted(namespace)
                if label_selector_from_dict((r.doc.get("spec") or {}).get("selector"))(labels)
            ]
            if len(matching) > 1:
                raise ApiError(
                    "This pod has more than one PodDisruptionBudget, which the eviction "
                    "subresource does not support.",
                    status=500,
                    reason="InternalError",
                )
            if matching:
                pkey, prec = matching[0]
                allowed, desired, healthy = pdb_budget(self._storage, prec.doc, namespace)
                if allowed <= 0:
                    raise TooManyRequests(
                        "Cannot evict pod as it would violate the pod's disruption budget.",
                        body={
                            "details": {
                                "causes": [
                                    {
                                        "reason": "DisruptionBudget",
                                        "message": f"The disruption budget {pkey[1]} needs "
                                        f"{desired} healthy pods and has {healthy} currently",
                                    }
                                ]
                            }
                        },
                    )
        rec = store.get(namespace, pod_name) or rec
        self._lifecycle.delete(store, (namespace, pod_name), rec, "Background")


def pdb_budget(storage: Storage, pdb: Mapping[str, Any], namespace: str) -> tuple[int, int, int]:
    """(disruptionsAllowed, desiredHealthy, currentHealthy) of a PodDisruptionBudget,
    computed now from the pods it selects."""
    spec = pdb.get("spec") or {}
    selects = label_selector_from_dict(spec.get("selector"))
    expected = 0
    healthy = 0
    for _, rec in storage.kind(resource_info("Pod")).iter_sorted(namespace):
        doc = rec.doc
        m = doc["metadata"]
        status = doc.get("status") or {}
        if m.get("deletionTimestamp") or status.get("phase") in TERMINAL:
            continue
        if not selects(m.get("labels") or {}):
            continue
        expected += 1
        ready = next((c for c in status.get("conditions") or () if c.get("type") == "Ready"), None)
        if status.get("phase") == "Running" and (ready is None or ready.get("status") == "True"):
            healthy += 1

    def amount(value: Any) -> int:
        if isinstance(value, str) and value.endswith("%"):
            return -(-int(value[:-1]) * expected // 100)
        return int(value)

    if spec.get("minAvailable") is not None:
        desired = amount(spec["minAvailable"])
    elif spec.get("maxUnavailable") is not None:
        desired = max(0, expected - amount(spec["maxUnavailable"]))
    else:
        desired = 0
    return max(0, healthy - desired), desired, healthy


class EventRecorder:
    """core/v1 Events, created through the write verbs (so watchers see them)."""

    def __init__(self, writes: Writes, now: Now) -> None:
        self._writes = writes
        self._now = now
        self._event = resource_info("Event")

    def record(
        self,
        namespace: str,
        involved_object: Mapping[str, Any],
        reason: str,
        message: str,
        type: Literal["Normal", "Warning"],
        reporting_component: str,
    ) -> None:
        """Create an Event about ``involved_object``."""
        now = self._now()
        involved = {
            k: involved_object[k]
            for k in (
                "apiVersion",
                "kind",
                "name",
                "namespace",
                "uid",
                "resourceVersion",
                "fieldPath",
            )
            if involved_object.get(k)
        }
        involved.setdefault("namespace", namespace)
        doc: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "generateName": f"{involved_object.get('name', 'event')}.",
                "namespace": namespace,
            },
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "type": type,
            "source": {"component": reporting_component},
            "reportingComponent": reporting_component,
            "reportingInstance": reporting_component,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        self._writes.create(self._event, doc, namespace)
