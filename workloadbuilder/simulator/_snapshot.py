"""``simulate --from-cluster``: a read-only snapshot of what the scheduler sees, as a scenario.

:func:`snapshot_documents` lists (never writes) the kinds in :data:`SNAPSHOT_KINDS` through any
:class:`~workloadbuilder.cluster.Cluster` and returns them as scenario documents: server-set
metadata and pod status dropped, bound pods keeping ``spec.nodeName`` (they run as they are:
their remaining run time is their ``sim.workloadbuilder.io/duration`` annotation, else until the
end), pending pods as they wait. :func:`whatif_answers` tells, per new workload of ``-f``, when
it started, where, what it preempted, or why it did not start.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs
import yaml

from workloadbuilder.api import object_to_dict
from workloadbuilder.cluster import Cluster, KubeObject
from workloadbuilder.errors import ApiError, WorkloadBuilderError
from workloadbuilder.simulator._result import SimulationResult

__all__ = [
    "SNAPSHOT_KINDS",
    "ClusterReadError",
    "WhatIfAnswer",
    "dump_documents",
    "snapshot_documents",
    "snapshot_groups",
    "whatif_answers",
]

#: (kind, API group for messages, plural for messages): the kinds the snapshot lists, in the
#: order the scenario creates them (classes and storage before the pods that use them)
SNAPSHOT_KINDS: tuple[tuple[str, str, str], ...] = (
    ("PriorityClass", "scheduling.k8s.io", "priorityclasses"),
    ("Node", "", "nodes"),
    ("CSINode", "storage.k8s.io", "csinodes"),
    ("StorageClass", "storage.k8s.io", "storageclasses"),
    ("PersistentVolume", "", "persistentvolumes"),
    ("PersistentVolumeClaim", "", "persistentvolumeclaims"),
    ("DeviceClass", "resource.k8s.io", "deviceclasses"),
    ("ResourceSlice", "resource.k8s.io", "resourceslices"),
    ("ResourceClaimTemplate", "resource.k8s.io", "resourceclaimtemplates"),
    ("ResourceClaim", "resource.k8s.io", "resourceclaims"),
    ("PodDisruptionBudget", "policy", "poddisruptionbudgets"),
    ("Workload", "scheduling.k8s.io", "workloads"),
    ("CompositePodGroup", "scheduling.k8s.io", "compositepodgroups"),
    ("PodGroup", "scheduling.k8s.io", "podgroups"),
    ("Pod", "", "pods"),
)

#: kinds whose status the scheduler reads (a Node's allocatable, a PV's/PVC's phase)
_KEEP_STATUS = frozenset({"Node", "PersistentVolume", "PersistentVolumeClaim"})
_META_KEEP = ("name", "namespace", "labels", "annotations")
_PAGE = 500


class ClusterReadError(WorkloadBuilderError):
    """The cluster could not be read (the message names the kind and, on 403, the missing
    permission)."""


def _as_dict(obj: KubeObject) -> dict[str, Any]:
    """The wire form of a listed object (the cluster decodes scheduling kinds)."""
    return obj if isinstance(obj, dict) else object_to_dict(obj)


def _clean(kind: str, api_version: str, listed: KubeObject) -> dict[str, Any]:
    obj = _as_dict(listed)
    if kind in ("Workload", "PodGroup", "CompositePodGroup"):
        api_version = str(obj.get("apiVersion") or api_version)
    meta = obj.get("metadata") or {}
    doc: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {k: copy.deepcopy(meta[k]) for k in _META_KEEP if meta.get(k)},
    }
    for key, value in obj.items():
        if key in ("apiVersion", "kind", "metadata"):
            continue
        if key == "status" and kind not in _KEEP_STATUS:
            continue
        doc[key] = copy.deepcopy(value)
    if kind == "Node":
        status = doc.get("status") or {}
        doc["status"] = {k: status[k] for k in ("allocatable", "capacity") if k in status}
    return doc


def _skip_pod(listed: KubeObject) -> bool:
    """Pods the scheduler no longer sees: finished ones and those being deleted."""
    pod = _as_dict(listed)
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed") or bool(
        (pod.get("metadata") or {}).get("deletionTimestamp")
    )


def _builtin_class(listed: KubeObject) -> bool:
    """The API server's own PriorityClasses (``system-*``), which every cluster has."""
    name = str((_as_dict(listed).get("metadata") or {}).get("name") or "")
    return name.startswith("system-")


def _plural(kind: str) -> str:
    return kind + ("es" if kind.endswith("s") else "s")


async def _list_all(
    cluster: Cluster, kind: str, group: str, plural: str, namespace: str | None
) -> list[KubeObject]:
    items: list[KubeObject] = []
    token: str | None = None
    while True:
        try:
            page = await cluster.list(kind, namespace, limit=_PAGE, continue_token=token)
        except ApiError as e:
            where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
            res = f"{plural}.{group}" if group else plural
            if e.status == 403:
                raise ClusterReadError(
                    f'cannot read {_plural(kind)}: forbidden: the user cannot list resource "{res}"'
                    f"{where} (the snapshot needs get/list on {res}; see "
                    "examples/simulations/from-cluster-clusterrole.yaml)"
                ) from None
            if e.status == 404:
                return items  # the kind is not served (an API group not enabled)
            raise ClusterReadError(f"cannot read {_plural(kind)}{where}: {e}") from None
        except WorkloadBuilderError:
            raise
        except Exception as e:  # the transport: connection refused, TLS, DNS
            raise ClusterReadError(
                f"cannot read {_plural(kind)}: the cluster cannot be reached: "
                f"{type(e).__name__}: {e}"
            ) from None
        items.extend(page.items)
        token = page.continue_token
        if not token:
            return items


async def snapshot_documents(
    cluster: Cluster,
    namespaces: Sequence[str] = (),
    *,
    progress: Callable[[str, int], None] | None = None,
) -> list[dict[str, Any]]:
    """List what the scheduler sees (read-only) and return it as scenario documents.

    ``namespaces`` limits the namespaced kinds (empty: all); cluster-scoped kinds are always
    listed whole. ``progress(kind, count)`` is called after each kind."""
    from workloadbuilder.cluster import resource_info

    docs: list[dict[str, Any]] = []
    for kind, group, plural in SNAPSHOT_KINDS:
        info = resource_info(kind)
        scopes: Iterable[str | None] = namespaces if info.namespaced and namespaces else (None,)
        count = 0
        for ns in scopes:
            for obj in await _list_all(cluster, kind, group, plural, ns):
                if (kind == "Pod" and _skip_pod(obj)) or (
                    kind == "PriorityClass" and _builtin_class(obj)
                ):
                    continue
                docs.append(_clean(kind, info.api_version, obj))
                count += 1
        if progress is not None:
            progress(kind, count)
    return docs


def dump_documents(docs: Iterable[dict[str, Any]], header: str = "") -> str:
    """Multi-document YAML of ``docs`` (a scenario file ``workloadbuilder simulate`` reads)."""
    body = yaml.safe_dump_all(list(docs), sort_keys=False, explicit_start=True)
    return (header + body) if header else body


@attrs.frozen(kw_only=True)
class WhatIfAnswer:
    """The answer for one PodGroup of a new workload."""

    namespace: str
    name: str
    owner: str
    started: bool
    starts_at: float | None
    nodes: tuple[str, ...]
    domains: dict[str, str | list[str]]
    #: ``Kind namespace/name (N pods)`` of each unit it preempted
    preempts: tuple[str, ...]
    #: why it did not start (the scheduler's explanation), None when it started
    reason: str | None

    def to_json(self) -> dict[str, Any]:
        """The ``whatIf[]`` entry of ``-o json``."""
        return {
            "namespace": self.namespace,
            "name": self.name,
            "owner": self.owner or None,
            "started": self.started,
            "startsAt": None if self.starts_at is None else round(self.starts_at, 6),
            "nodes": list(self.nodes),
            "domains": self.domains,
            "preempts": list(self.preempts),
            "reason": self.reason,
        }

    def line(self) -> str:
        """One line of the table."""
        what = f"{self.namespace}/{self.name}"
        if not self.started:
            return f"{what}: cannot start: {self.reason or 'unschedulable'}"
        at = "now" if not self.starts_at else f"at {self.starts_at:g}s"
        where = ", ".join(self.nodes)
        doms = ", ".join(
            f"{k}={v if isinstance(v, str) else ','.join(v)}" for k, v in self.domains.items()
        )
        out = f"{what}: starts {at} on {where}"
        if doms:
            out += f" ({doms})"
        if self.preempts:
            out += "; preempts " + "; ".join(self.preempts)
        return out


def snapshot_groups(docs: Iterable[dict[str, Any]]) -> set[tuple[str, str]]:
    """``(namespace, name)`` of the PodGroups in snapshot documents."""
    return {
        (d["metadata"].get("namespace", "default"), d["metadata"]["name"])
        for d in docs
        if d.get("kind") == "PodGroup"
    }


def whatif_answers(result: SimulationResult, existing: set[tuple[str, str]]) -> list[WhatIfAnswer]:
    """The answer per new PodGroup: each PodGroup of the run that is not one of ``existing``
    (the snapshot's, :func:`snapshot_groups`) came from the ``-f`` objects."""
    answers: list[WhatIfAnswer] = []
    for g in result.groups:
        if (g.namespace, g.name) in existing:
            continue
        preempts: list[str] = []
        for p in result.preemptions:
            pre = p.preemptor
            if pre.namespace != g.namespace or pre.name not in (g.name, g.parent):
                continue
            for v in p.victims:
                preempts.append(f"{v.kind} {v.namespace}/{v.name} ({v.pods} pods)")
        answers.append(
            WhatIfAnswer(
                namespace=g.namespace,
                name=g.name,
                owner=g.owner,
                started=g.scheduled_at is not None,
                starts_at=g.scheduled_at,
                nodes=g.nodes,
                domains=dict(g.domains),
                preempts=tuple(preempts),
                reason=None if g.scheduled_at is not None else (g.message or g.wait_message),
            )
        )
    return answers
