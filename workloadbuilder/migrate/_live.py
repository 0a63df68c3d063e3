"""Reading the sources from a live cluster and creating the migrated objects there.

Read-only unless asked to apply: :func:`read_cluster` lists the old group objects and the
objects that make pods in one namespace; :func:`apply_objects` creates the new scheduling
objects with a server-side dry run of every one first, and leaves the objects that already
exist (running pods, their controllers) alone, reporting them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from workloadbuilder.cluster import Cluster, ResourceInfo
from workloadbuilder.errors import ApiError, NotFound
from workloadbuilder.migrate._report import MigrationError

__all__ = ["SCHEDULING_KINDS", "ApplyResult", "apply_objects", "read_cluster"]

#: what :func:`apply_objects` creates; everything else is the user's to update
SCHEDULING_KINDS = ("Workload", "CompositePodGroup", "PodGroup")

_READ = (
    ResourceInfo(
        group="scheduling.volcano.sh", version="v1beta1", kind="PodGroup", plural="podgroups"
    ),
    ResourceInfo(
        group="scheduling.x-k8s.io", version="v1alpha1", kind="PodGroup", plural="podgroups"
    ),
    ResourceInfo(group="", version="v1", kind="Pod", plural="pods"),
    ResourceInfo(group="batch", version="v1", kind="Job", plural="jobs"),
    ResourceInfo(group="apps", version="v1", kind="Deployment", plural="deployments"),
    ResourceInfo(group="apps", version="v1", kind="StatefulSet", plural="statefulsets"),
    ResourceInfo(group="apps", version="v1", kind="ReplicaSet", plural="replicasets"),
    ResourceInfo(group="jobset.x-k8s.io", version="v1alpha2", kind="JobSet", plural="jobsets"),
    ResourceInfo(
        group="leaderworkerset.x-k8s.io",
        version="v1",
        kind="LeaderWorkerSet",
        plural="leaderworkersets",
    ),
)
_GROUP_KINDS = ("scheduling.volcano.sh/v1beta1", "scheduling.x-k8s.io/v1alpha1")
_SERVER_META = ("resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink")


def _clean(obj: dict[str, Any]) -> dict[str, Any]:
    obj.pop("status", None)
    meta = obj.get("metadata") or {}
    for key in _SERVER_META:
        meta.pop(key, None)
    return obj


def _controlled(obj: dict[str, Any]) -> bool:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return any(isinstance(r, dict) and r.get("controller") for r in refs)


async def read_cluster(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    """The migration's input from ``namespace`` of a live cluster: Volcano and coscheduling
    PodGroups (when their CRDs are served), and the Pods, Jobs, Deployments, StatefulSets,
    ReplicaSets, JobSets and LeaderWorkerSets that no controller owns (an owned object's
    pods come from its owner's template). ``scheduling.k8s.io/v1alpha2`` cannot be read:
    v1.37 does not serve it. Server-written fields (status, resourceVersion, ...) are
    dropped; UIDs stay, so the new objects are owned by the live controllers."""
    out: list[dict[str, Any]] = []
    for info in _READ:
        token: str | None = None
        while True:
            try:
                page = await cluster.list(info, namespace, limit=500, continue_token=token)
            except NotFound:  # the CRD is not installed
                break
            for item in page.items:
                if not isinstance(item, dict):
                    continue
                if item.get("apiVersion") not in _GROUP_KINDS and _controlled(item):
                    continue
                out.append(_clean(item))
            token = page.continue_token
            if not token:
                break
    return out


@attrs.frozen(kw_only=True)
class ApplyResult:
    """What :func:`apply_objects` created, and the objects it left alone (with why)."""

    created: tuple[str, ...]
    untouched: tuple[str, ...]


def _name(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{obj.get('kind')} {meta.get('namespace', '')}/{meta.get('name', '')}"


async def apply_objects(
    cluster: Cluster, objects: Sequence[dict[str, Any]], *, only_new: bool
) -> ApplyResult:
    """Create ``objects`` in order: a server-side dry run of every one first (nothing is
    created unless all pass), then the creates. With ``only_new`` (a live read) only the
    Workloads, CompositePodGroups and PodGroups are created; the other objects exist
    already: a running pod's ``spec.schedulingGroup`` cannot change, so they are listed as
    untouched (recreate them from the printed manifests). Raises :class:`MigrationError`
    when the dry run refuses an object (nothing is created then)."""
    todo = [o for o in objects if not only_new or o.get("kind") in SCHEDULING_KINDS]
    untouched = tuple(
        f"{_name(o)}: exists; not changed (recreate it from the printed manifest to join "
        "its new group: a pod's schedulingGroup is immutable)"
        for o in objects
        if only_new and o.get("kind") not in SCHEDULING_KINDS
    )
    for obj in todo:
        try:
            await cluster.create(obj, dry_run=True)
        except ApiError as e:
            raise MigrationError(
                _name(obj), "", f"refused by the server-side dry run: {e}"
            ) from None
    created: list[str] = []
    for obj in todo:
        await cluster.create(obj)
        created.append(_name(obj))
    return ApplyResult(created=tuple(created), untouched=untouched)
