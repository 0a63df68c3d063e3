"""The stand-in controllers go through the SDK's integration registry."""

from __future__ import annotations

from typing import Any

import pytest

from workloadbuilder.kinds import IntegrationRegistry, JobIntegration
from workloadbuilder.simulator._controllers import controls, plan_object


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


def test_lws_restart_follows_the_restart_policy() -> None:
    """The replica group (its ``group-index``) is recreated with RecreateGroupOnPodRestart
    (also when unset, the LWS v1 default) and RecreateGroupAfterStart; the pod alone with
    None and the deprecated Default."""
    from workloadbuilder.kinds.lws import lws_pods
    from workloadbuilder.simulator._controllers import lws_restart
    from workloadbuilder.testing.builders import make_lws, make_pod_template

    lws = make_lws("serve").replicas(2).size(2)
    obj = lws.worker_template(make_pod_template().container_name("c")).obj()
    pod = next(p for p in lws_pods(obj) if p["metadata"]["name"] == "serve-1-1")
    assert lws_restart(obj, pod) == ("RecreateGroupOnPodRestart", "1")
    lwt = obj["spec"]["leaderWorkerTemplate"]
    for policy, want in (
        ("RecreateGroupOnPodRestart", ("RecreateGroupOnPodRestart", "1")),
        ("RecreateGroupAfterStart", ("RecreateGroupAfterStart", "1")),
        ("None", None),
        ("Default", None),
    ):
        lwt["restartPolicy"] = policy
        assert lws_restart(obj, pod) == want, policy
