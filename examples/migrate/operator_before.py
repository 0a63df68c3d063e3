"""The "before" of docs/operator-guide.md section 7: a TrainJob operator that gang-schedules
with a hand-rolled scheduler-plugins coscheduling PodGroup (scheduling.x-k8s.io/v1alpha1).

It writes the PodGroup and labels the pods itself, and so must also own, by hand, what the
SDK's Reconciler does for an integration: ownership, name conflicts, resize, cleanup."""

from __future__ import annotations

import contextlib
from typing import Any

from workloadbuilder.cluster import Cluster, ResourceInfo, register_resource
from workloadbuilder.errors import AlreadyExists, NotFound

COSCHEDULING_PODGROUP = register_resource(
    ResourceInfo(
        group="scheduling.x-k8s.io", version="v1alpha1", kind="PodGroup", plural="podgroups"
    ),
    default=False,
)
LABEL = "scheduling.x-k8s.io/pod-group"


def owner_ref(trainjob: dict[str, Any]) -> dict[str, Any]:
    meta = trainjob["metadata"]
    return {
        "apiVersion": trainjob["apiVersion"],
        "kind": trainjob["kind"],
        "name": meta["name"],
        "uid": meta.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def desired_objects(trainjob: dict[str, Any]) -> list[dict[str, Any]]:
    """The coscheduling PodGroup and the pods of a TrainJob (master + workers)."""
    meta, spec = trainjob["metadata"], trainjob["spec"]
    name, ns, size = meta["name"], meta["namespace"], 1 + int(spec["workers"])
    group = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns, "ownerReferences": [owner_ref(trainjob)]},
        "spec": {"minMember": size, "scheduleTimeoutSeconds": 60},
    }
    pods = []
    for i in range(size):
        pod_spec = {**spec["template"]["spec"], "schedulerName": "scheduler-plugins-scheduler"}
        if spec.get("priorityClassName"):
            pod_spec["priorityClassName"] = spec["priorityClassName"]
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{name}-{i}",
                    "namespace": ns,
                    "labels": {LABEL: name},
                    "ownerReferences": [owner_ref(trainjob)],
                },
                "spec": pod_spec,
            }
        )
    return [group, *pods]


async def reconcile(cluster: Cluster, trainjob: dict[str, Any]) -> None:
    """Create what is missing; resize the group when the worker count changed."""
    group, *pods = desired_objects(trainjob)
    try:
        await cluster.create(group)
    except AlreadyExists:
        current = await cluster.get(
            COSCHEDULING_PODGROUP, group["metadata"]["name"], group["metadata"]["namespace"]
        )
        assert isinstance(current, dict)
        owners = current["metadata"].get("ownerReferences") or []
        if not any(o.get("uid") == trainjob["metadata"].get("uid") for o in owners):
            raise RuntimeError("the PodGroup name is taken by another controller") from None
        if current["spec"].get("minMember") != group["spec"]["minMember"]:
            patch = {"spec": {"minMember": group["spec"]["minMember"]}}
            await cluster.patch(
                COSCHEDULING_PODGROUP,
                current["metadata"]["name"],
                patch,
                current["metadata"]["namespace"],
            )
    for pod in pods:
        with contextlib.suppress(AlreadyExists):
            await cluster.create(pod)


async def cleanup(cluster: Cluster, trainjob: dict[str, Any]) -> None:
    """Delete the PodGroup when the TrainJob goes (the pods go with their ownerReference)."""
    meta = trainjob["metadata"]
    with contextlib.suppress(NotFound):
        await cluster.delete(COSCHEDULING_PODGROUP, meta["name"], meta["namespace"])
