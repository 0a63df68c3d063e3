"""The TrainJob operator's whole integration (master + workers, one gang)."""

from __future__ import annotations

from typing import Any

from workloadbuilder.builder import PodSet, simple_workload
from workloadbuilder.cluster import ResourceInfo, register_resource
from workloadbuilder.kinds import GroupVersionKind, Plan

TRAINJOB = register_resource(
    ResourceInfo(group="example.com", version="v1", kind="TrainJob", plural="trainjobs")
)


class TrainJobIntegration:
    """One gang: the master and every worker are scheduled all-or-nothing."""

    gvk = GroupVersionKind(group="example.com", versions=("v1",), kind="TrainJob")
    conditions_path = "status.conditions"  # the Reconciler keeps a GangScheduled condition

    def plan(self, obj: Any, /, **options: Any) -> Plan:
        meta, spec = obj["metadata"], obj["spec"]
        return simple_workload(
            name=meta["name"],
            namespace=meta["namespace"],
            owner=obj,
            priority_class_name=spec.get("priorityClassName"),
            pod_sets=[PodSet(name="trainer", replicas=1 + int(spec["workers"]))],
        )
