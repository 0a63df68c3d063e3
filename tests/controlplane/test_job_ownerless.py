"""A Workload or PodGroup that already exists under the name the Job controller would give it,
without a controller (a user's, pre-created): what kube-controller-manager v1.37.2 does, and
that our Job integration does the same.

Observed on the real binaries (and in ``pkg/controller/job/job_scheduling_manager.go``): the
controller only uses objects with a controller ownerReference to the Job, so a pre-created
object is never adopted; its create fails with ``AlreadyExists`` and the Job's sync fails
and is retried with backoff. A taken Workload name gives a ``FailedWorkloadCreate`` Warning
event per attempt; a taken PodGroup name gives none (only the controller's log). In both
cases the Job gets **no pods** until the name is free; then the controller creates its own
object and the pods.

The root Job's names derive from its uid, so the objects can only be pre-created before the
controller first sees the Job: that test starts kube-controller-manager afterwards. A
delegated child's PodGroup name derives from its parent's Workload, so it is pre-created on
the shared plane.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any

import pytest

from workloadbuilder import integrations
from workloadbuilder.api import object_to_dict
from workloadbuilder.cluster import KubeCluster
from workloadbuilder.integrations.job import SCHEDULING_ANNOTATION, opted_in_job
from workloadbuilder.kinds import plan_job
from workloadbuilder.naming import pod_group_name
from workloadbuilder.runtime import EVENT_FAILED_WORKLOAD_CREATE, Reconciler
from workloadbuilder.testing import ControlPlane, ControlPlaneError, RestClient, wait_for
from workloadbuilder.testing.builders import make_job

pytestmark = [pytest.mark.controlplane, pytest.mark.controllermanager]

SCHED = "/apis/scheduling.k8s.io/v1beta1"
TEMPLATE_ANNOTATION = "scheduling.k8s.io/group-template-name"


def _gang_job(name: str, parallelism: int = 2) -> dict[str, Any]:
    return (
        make_job(name)
        .parallelism(parallelism)
        .completions(parallelism)
        .scheduling({"schedulingPolicy": {"gang": {}}})
        .obj()
    )


def _ownerless(doc: dict[str, Any], ns: str) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    out["metadata"] = {"name": doc["metadata"]["name"], "namespace": ns}
    return out


def _create(api: RestClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    resp = api.create(path, body)
    assert resp.status == 201, f"{resp.status}: {resp.message}"
    return resp.body


def _items(api: RestClient, path: str) -> list[dict[str, Any]]:
    return list(api.get(path).body.get("items", []))


def _events(api: RestClient, ns: str, involved: str) -> list[dict[str, Any]]:
    return [
        e
        for e in _items(api, f"/api/v1/namespaces/{ns}/events")
        if e["involvedObject"]["name"] == involved
    ]


def _controlled_by(obj: dict[str, Any], uid: str) -> bool:
    return any(
        r.get("uid") == uid and r.get("controller")
        for r in obj["metadata"].get("ownerReferences", [])
    )


def _kcm_failures(plane: ControlPlane, job: str, needle: str) -> int:
    """How many of kube-controller-manager's log lines report a failed sync of the Job
    ``<ns>/<name>`` that contains ``needle``."""
    log = (plane.run_dir / "logs" / "kube-controller-manager.log").read_text(errors="replace")
    return sum(
        1
        for line in log.splitlines()
        if "syncing job" in line and f"for Job {job}:" in line and needle in line
    )


def _pods_of(api: RestClient, ns: str, uid: str) -> list[dict[str, Any]]:
    return [p for p in _items(api, f"/api/v1/namespaces/{ns}/pods") if _controlled_by(p, uid)]


@pytest.fixture(scope="module")
def deferred_kcm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A plane whose kube-controller-manager (Job, garbage collector and PodGroup protection
    controllers) starts only when the test says so."""
    plane = ControlPlane(
        tmp_path_factory.mktemp("deferred-kcm"),
        with_controller_manager=True,
        defer_controller_manager=True,
        controllers=(
            "job-controller",
            "garbage-collector-controller",
            "podgroup-protection-controller",
        ),
    )
    with plane:
        yield plane


def test_upstream_job_controller_never_adopts_a_precreated_object(
    deferred_kcm: ControlPlane,
) -> None:
    plane = deferred_kcm
    ns = plane.create_namespace("ownerless-")
    with plane.client() as api:
        # Job "taken-wl": its Workload's name is taken
        a = _create(api, f"/apis/batch/v1/namespaces/{ns}/jobs", _gang_job("taken-wl"))
        plan_a = plan_job(a)
        wl_a = plan_a.workload.metadata.name or ""
        _create(
            api,
            f"{SCHED}/namespaces/{ns}/workloads",
            _ownerless(object_to_dict(plan_a.workload, api_version="v1beta1"), ns),
        )
        # Job "taken-pg": only its PodGroup's name is taken
        b = _create(api, f"/apis/batch/v1/namespaces/{ns}/jobs", _gang_job("taken-pg"))
        plan_b = plan_job(b)
        pg_b = plan_b.pod_groups[0].metadata.name or ""
        _create(
            api,
            f"{SCHED}/namespaces/{ns}/podgroups",
            _ownerless(object_to_dict(plan_b.pod_groups[0], api_version="v1beta1"), ns),
        )

        plane.start_controller_manager()

        def failed_twice() -> list[dict[str, Any]] | None:
            evs = [
                e
                for e in _events(api, ns, "taken-wl")
                if e["reason"] == EVENT_FAILED_WORKLOAD_CREATE
            ]
            return evs if evs and evs[0].get("count", 1) >= 2 else None

        events = wait_for(failed_twice, what="FailedWorkloadCreate events, retried")
        assert events[0]["type"] == "Warning"
        assert events[0]["message"] == (
            f'Failed to create Workload for Job taken-wl: workloads.scheduling.k8s.io "{wl_a}" '
            "already exists"
        )
        taken_pg = f'podgroups.scheduling.k8s.io \\"{pg_b}\\" already exists'
        wait_for(
            lambda: _kcm_failures(plane, f"{ns}/taken-pg", taken_pg) >= 2 or None,
            what="the controller's PodGroup create failing twice",
        )
        # nothing adopted, nothing created after the taken name, no pods
        wl = api.get(f"{SCHED}/namespaces/{ns}/workloads/{wl_a}").body
        assert "ownerReferences" not in wl["metadata"]
        pgs = _items(api, f"{SCHED}/namespaces/{ns}/podgroups")
        assert [p["metadata"]["name"] for p in pgs] == [pg_b]
        assert "ownerReferences" not in pgs[0]["metadata"]
        wls = {w["metadata"]["name"]: w for w in _items(api, f"{SCHED}/namespaces/{ns}/workloads")}
        assert _controlled_by(wls[plan_b.workload.metadata.name or ""], b["metadata"]["uid"])
        assert _items(api, f"/api/v1/namespaces/{ns}/pods") == []
        assert [e["reason"] for e in _events(api, ns, "taken-pg")] == ["WorkloadCreated"]

        # the name is freed: the next retry creates the Job's own PodGroup, then the pods
        assert api.delete(f"{SCHED}/namespaces/{ns}/podgroups/{pg_b}").status == 200

        def own_pod_group() -> dict[str, Any] | None:
            got = [
                p
                for p in _items(api, f"{SCHED}/namespaces/{ns}/podgroups")
                if _controlled_by(p, b["metadata"]["uid"])
            ]
            return got[0] if got else None

        pg = wait_for(own_pod_group, what="the Job's own PodGroup once the name is free")
        assert pg["metadata"]["name"] == pg_b
        pods = wait_for(
            lambda: _pods_of(api, ns, b["metadata"]["uid"]) or None, what="the Job's pods"
        )
        assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods} == {pg_b}
        assert _pods_of(api, ns, a["metadata"]["uid"]) == []


def test_delegated_child_with_a_precreated_pod_group(control_plane_kcm: ControlPlane) -> None:
    """A delegating child Job (controller owner + group-template-name): its PodGroup's name
    is known before the Job exists. Pre-created without an owner, it is not adopted: no pods
    until it is removed, then the controller's own PodGroup and the pods."""
    plane = control_plane_kcm
    ns = plane.create_namespace("ownerless-")
    with plane.client() as api:
        parent = _create(
            api,
            f"/api/v1/namespaces/{ns}/configmaps",
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "trainer"}},
        )
        _create(
            api,
            f"{SCHED}/namespaces/{ns}/workloads",
            {
                "apiVersion": "scheduling.k8s.io/v1beta1",
                "kind": "Workload",
                "metadata": {"name": "trainer-wl"},
                "spec": {
                    "controllerRef": {"apiGroup": "", "kind": "ConfigMap", "name": "trainer"},
                    "podGroupTemplates": [
                        {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 2}}}
                    ],
                },
            },
        )
        name = pod_group_name("trainer-wl", "workers")
        _create(
            api,
            f"{SCHED}/namespaces/{ns}/podgroups",
            {
                "apiVersion": "scheduling.k8s.io/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": name},
                "spec": {
                    "workloadRef": {"workloadName": "trainer-wl", "templateName": "workers"},
                    "schedulingPolicy": {"gang": {"minCount": 2}},
                },
            },
        )
        job = make_job("trainer-workers-0").parallelism(2).completions(2).obj()
        job["metadata"]["annotations"] = {TEMPLATE_ANNOTATION: "workers"}
        job["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "name": "trainer",
                "uid": parent["metadata"]["uid"],
                "controller": True,
            }
        ]
        child = _create(api, f"/apis/batch/v1/namespaces/{ns}/jobs", job)
        taken = f'podgroups.scheduling.k8s.io \\"{name}\\" already exists'
        wait_for(
            lambda: _kcm_failures(plane, f"{ns}/trainer-workers-0", taken) >= 1 or None,
            what="the delegated PodGroup's create failing",
        )
        pg = api.get(f"{SCHED}/namespaces/{ns}/podgroups/{name}").body
        assert "ownerReferences" not in pg["metadata"]
        assert _pods_of(api, ns, child["metadata"]["uid"]) == []
        assert _events(api, ns, "trainer-workers-0") == []
        assert _items(api, f"{SCHED}/namespaces/{ns}/workloads")[0]["metadata"]["name"] == (
            "trainer-wl"
        )

        assert api.delete(f"{SCHED}/namespaces/{ns}/podgroups/{name}").status == 200

        def own() -> dict[str, Any] | None:
            got = [
                p
                for p in _items(api, f"{SCHED}/namespaces/{ns}/podgroups")
                if _controlled_by(p, child["metadata"]["uid"])
            ]
            return got[0] if got else None

        assert wait_for(own, what="the child's own PodGroup")["metadata"]["name"] == name
        pods = wait_for(
            lambda: _pods_of(api, ns, child["metadata"]["uid"]) or None, what="the pods"
        )
        assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods} == {name}


async def test_our_job_integration_does_the_same(control_plane: ControlPlane) -> None:
    """Our opt-in Job integration on the real API server (no kube-controller-manager): the
    pre-created ownerless Workload is left alone with the same FailedWorkloadCreate event, no
    PodGroup is created, and the reconcile is retried (the webhook side, no group for a pod
    whose PodGroup name is taken, is tests/controllers/test_reconciler.py)."""
    ns = control_plane.create_namespace("ownerless-")
    with control_plane.client() as api:
        job = make_job("taken-wl").parallelism(2).completions(2).obj()
        job["metadata"]["annotations"] = {
            SCHEDULING_ANNOTATION: '{"schedulingPolicy": {"gang": {}}}'
        }
        created = _create(api, f"/apis/batch/v1/namespaces/{ns}/jobs", job)
        effective = opted_in_job(created)
        assert effective is not None
        plan = plan_job(effective)
        wl_name = plan.workload.metadata.name or ""
        _create(
            api,
            f"{SCHED}/namespaces/{ns}/workloads",
            _ownerless(object_to_dict(plan.workload, api_version="v1beta1"), ns),
        )
        cluster = KubeCluster.from_kubeconfig(control_plane.kubeconfig)
        rec = Reconciler(cluster, integrations.integration_for("job"), watch_pods=False)
        await rec.start()
        try:
            await rec.until_idle()
            events = [
                e
                for e in _events(api, ns, "taken-wl")
                if e["reason"] == EVENT_FAILED_WORKLOAD_CREATE
            ]
            assert [(e["type"], e["message"]) for e in events] == [
                (
                    "Warning",
                    f"Failed to create Workload for Job taken-wl: workloads.scheduling.k8s.io "
                    f'"{wl_name}" already exists',
                )
            ]
            assert (
                "ownerReferences"
                not in (api.get(f"{SCHED}/namespaces/{ns}/workloads/{wl_name}").body["metadata"])
            )
            assert _items(api, f"{SCHED}/namespaces/{ns}/podgroups") == []
            assert rec.next_wakeup() is not None  # retried with backoff
        finally:
            await rec.stop()
            await cluster.close()


def test_start_controller_manager_needs_a_deferred_plane(
    control_plane: ControlPlane, deferred_kcm: ControlPlane
) -> None:
    with pytest.raises(ControlPlaneError, match="defer_controller_manager=True"):
        control_plane.start_controller_manager()
    with contextlib.suppress(ControlPlaneError):  # started by the test above, or now
        deferred_kcm.start_controller_manager()
    with pytest.raises(ControlPlaneError, match="already running"):
        deferred_kcm.start_controller_manager()
