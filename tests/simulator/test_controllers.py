"""The stand-in controllers go through the SDK's integration registry."""

from __future__ import annotations

from typing import Any

import pytest

from simulator._controllers import controls, plan_object
from workloadbuilder.kinds import IntegrationRegistry, JobIntegration


def _job() -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns", "uid": "u-1"},
        "spec": {
            "parallelism": 2,
            "scheduling": {"schedulingPolicy": {"gang": {}}},
            "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
        },
    }


def test_the_played_kinds() -> None:
    assert controls("batch/v1", "Job")
    assert controls("jobset.x-k8s.io/v1alpha2", "JobSet")
    assert controls("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
    assert not controls("jobset.x-k8s.io/v1alpha1", "JobSet")
    assert not controls("workloadbuilder.io/v1alpha1", "GenericWorkload")


def test_plan_object_uses_the_given_registry() -> None:
    planned = plan_object(_job(), IntegrationRegistry([JobIntegration()]))
    assert [o.kind for o in planned.objects] == ["Workload", "PodGroup"]
    (run,) = planned.runs
    pods = run.initial_pods()
    group = planned.objects[1].metadata.name
    assert [p["spec"]["schedulingGroup"]["podGroupName"] for p in pods] == [group, group]
    with pytest.raises(ValueError, match="no controller for kind 'Job'"):
        plan_object(_job(), IntegrationRegistry())
    generic = {"apiVersion": "workloadbuilder.io/v1alpha1", "kind": "GenericWorkload"}
    with pytest.raises(ValueError, match="no controller for kind 'GenericWorkload'"):
        plan_object(generic)
