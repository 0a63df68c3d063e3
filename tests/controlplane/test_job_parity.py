"""Job parity: what kube-controller-manager v1.37.2 creates for a Job == ``plan_job(job)``.

The real Job controller (WorkloadWithJob on) creates the Workload and the PodGroup; our adapter
plans them from the same Job (as read back from the server, with its UID). Names,
ownerReferences, ``spec.controllerRef`` and ``spec`` must be equal. PodGroup specs are
compared after the server's defaulting of *both* sides (our PodGroup is dry-run created in a
scratch namespace), so admission-filled fields (priority, preemptionPolicy, disruptionMode)
count too.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from workloadbuilder.api import Workload, from_dict, object_to_dict
from workloadbuilder.errors import WorkloadBuilderError
from workloadbuilder.kinds import NotManagedError, Plan, plan_job
from workloadbuilder.testing import ControlPlane, RestClient, wait_for
from workloadbuilder.testing.builders import make_job

pytestmark = [pytest.mark.controlplane, pytest.mark.controllermanager]

SCHED = "/apis/scheduling.k8s.io/v1beta1"
RACK = "topology.kubernetes.io/rack"


def _prune(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _prune(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_prune(v) for v in value]
    return value


def _job(
    name: str,
    *,
    parallelism: int | None = 2,
    completions: int | None = None,
    scheduling: dict[str, Any] | None = None,
    indexed: bool = False,
    pod_spec: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    job = make_job(name).annotations(annotations or {})
    if parallelism is not None:
        job.parallelism(parallelism).completions(
            completions if completions is not None else parallelism
        )
    if indexed:
        job.indexed()
    if scheduling is not None:
        job.scheduling(scheduling)
    for key, value in (pod_spec or {}).items():
        job.field(f"spec.template.spec.{key}", value)
    return job.obj()


#: (shape id, job) for root Jobs (the controller creates Workload + PodGroup).
ROOT_SHAPES: list[tuple[str, dict[str, Any]]] = [
    ("no-scheduling", _job("plain", parallelism=2)),
    ("parallelism-unset", _job("single", parallelism=None)),
    (
        "basic-explicit",
        _job("basic", parallelism=3, scheduling={"schedulingPolicy": {"basic": {}}}),
    ),
    (
        "gang-no-min-count",
        _job("gang", parallelism=3, scheduling={"schedulingPolicy": {"gang": {}}}),
    ),
    (
        "gang-min-count",
        _job(
            "gang-min",
            parallelism=4,
            completions=8,
            scheduling={"schedulingPolicy": {"gang": {"minCount": 2}}},
        ),
    ),
    (
        "gang-parallelism-unset",
        _job("gang-p1", parallelism=None, scheduling={"schedulingPolicy": {"gang": {}}}),
    ),
    # 57 characters is the longest Job name whose template name "<job>-pgt-0" is a DNS label.
    ("long-name-57", _job("j" * 57, parallelism=2, scheduling={"schedulingPolicy": {"gang": {}}})),
    ("long-name-50-basic", _job("long-" + "x" * 45, parallelism=1)),
    ("indexed", _job("indexed", parallelism=4, indexed=True)),
    (
        "indexed-gang",
        _job(
            "indexed-gang",
            parallelism=3,
            indexed=True,
            scheduling={"schedulingPolicy": {"gang": {}}},
        ),
    ),
    (
        "gang-topology-all",
        _job(
            "tas",
            parallelism=2,
            scheduling={
                "schedulingPolicy": {"gang": {"minCount": 2}},
                "schedulingConstraints": {"topology": [{"key": RACK}]},
                "disruptionMode": {"all": {}},
            },
        ),
    ),
    (
        "single-disruption",
        _job("single-dm", parallelism=2, scheduling={"disruptionMode": {"single": {}}}),
    ),
    (
        "resource-claims",
        _job(
            "claims",
            parallelism=2,
            scheduling={
                "schedulingPolicy": {"gang": {}},
                "resourceClaims": [
                    {"name": "shared", "resourceClaimTemplateName": "gpu-template"},
                    {"name": "nic", "resourceClaimName": "nic-claim"},
                ],
            },
        ),
    ),
]


@pytest.fixture(scope="module")
def kcm(control_plane_kcm: ControlPlane) -> Iterator[RestClient]:
    with control_plane_kcm.client() as client:
        yield client


@pytest.fixture(scope="module")
def scratch_ns(control_plane_kcm: ControlPlane) -> str:
    """A namespace for dry-run creates of our planned PodGroups."""
    return control_plane_kcm.create_namespace("scratch-")


def _create_job(api: RestClient, ns: str, job: dict[str, Any]) -> dict[str, Any]:
    resp = api.create(f"/apis/batch/v1/namespaces/{ns}/jobs", job)
    assert resp.status == 201, f"{resp.status}: {resp.message}"
    return resp.body


def _controlled_by(obj: dict[str, Any], uid: str) -> bool:
    return any(
        r.get("uid") == uid and r.get("controller")
        for r in obj["metadata"].get("ownerReferences", [])
    )


def _wait_objects(
    api: RestClient, ns: str, job_uid: str, *, want_workload: bool
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    def fetch() -> tuple[dict[str, Any] | None, dict[str, Any]] | None:
        wls = [
            w
            for w in api.get(f"{SCHED}/namespaces/{ns}/workloads").body.get("items", [])
            if _controlled_by(w, job_uid)
        ]
        pgs = [
            p
            for p in api.get(f"{SCHED}/namespaces/{ns}/podgroups").body.get("items", [])
            if _controlled_by(p, job_uid)
        ]
        if len(pgs) != 1 or (want_workload and len(wls) != 1):
            return None
        return (wls[0] if wls else None), pgs[0]

    return wait_for(fetch, what="the Job controller's Workload/PodGroup")


def _wait_pods(api: RestClient, ns: str, job: dict[str, Any], count: int) -> list[dict[str, Any]]:
    uid = job["metadata"]["uid"]

    def fetch() -> list[dict[str, Any]] | None:
        pods = [
            p
            for p in api.get(f"/api/v1/namespaces/{ns}/pods").body.get("items", [])
            if _controlled_by(p, uid)
        ]
        return pods if len(pods) >= count else None

    return wait_for(fetch, what=f"{count} pods of Job {job['metadata']['name']}")


def _with_kind(doc: dict[str, Any], kind: str) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    out.setdefault("apiVersion", "scheduling.k8s.io/v1beta1")
    out.setdefault("kind", kind)
    return out


def _server_defaulted_pod_group(
    api: RestClient, ns: str, planned: dict[str, Any]
) -> dict[str, Any]:
    doc = copy.deepcopy(planned)
    doc["metadata"] = {"name": planned["metadata"]["name"]}
    resp = api.create(f"{SCHED}/namespaces/{ns}/podgroups", doc, dry_run=True)
    assert resp.status == 201, f"our planned PodGroup is rejected: {resp.status} {resp.message}"
    spec: dict[str, Any] = resp.body["spec"]
    return spec


def _assert_workload_parity(live: dict[str, Any], plan: Plan) -> None:
    ours = object_to_dict(plan.workload, api_version="v1beta1")
    assert live["metadata"]["name"] == ours["metadata"]["name"]
    assert live["metadata"]["ownerReferences"] == ours["metadata"]["ownerReferences"]
    assert live["spec"]["controllerRef"] == ours["spec"]["controllerRef"]
    assert _prune(live["spec"]) == _prune(ours["spec"])


def _assert_pod_group_parity(
    api: RestClient, scratch: str, live: dict[str, Any], plan: Plan
) -> None:
    assert len(plan.pod_groups) == 1
    ours = object_to_dict(plan.pod_groups[0], api_version="v1beta1")
    assert live["metadata"]["name"] == ours["metadata"]["name"]
    assert live["metadata"]["ownerReferences"] == ours["metadata"]["ownerReferences"]
    # Everything we set is what the controller set ...
    for key, value in _prune(ours["spec"]).items():
        assert _prune(live["spec"]).get(key) == value, key
    # ... and after the server's defaulting the whole specs are equal.
    assert _prune(live["spec"]) == _prune(_server_defaulted_pod_group(api, scratch, ours))


@pytest.mark.parametrize(("shape", "job"), ROOT_SHAPES, ids=[s for s, _ in ROOT_SHAPES])
def test_root_job_parity(
    control_plane_kcm: ControlPlane,
    kcm: RestClient,
    scratch_ns: str,
    shape: str,
    job: dict[str, Any],
) -> None:
    ns = control_plane_kcm.create_namespace("job-")
    created = _create_job(kcm, ns, job)
    workload, pod_group = _wait_objects(kcm, ns, created["metadata"]["uid"], want_workload=True)
    assert workload is not None

    plan = plan_job(created)
    assert plan.owns_workload
    _assert_workload_parity(workload, plan)
    plan = plan.with_workload_uid(workload["metadata"]["uid"])
    _assert_pod_group_parity(kcm, scratch_ns, pod_group, plan)

    # Pods: the controller points them at the PodGroup; our plan maps them the same way.
    parallelism = created["spec"].get("parallelism", 1)
    for pod in _wait_pods(kcm, ns, created, parallelism):
        expected = pod["spec"].get("schedulingGroup", {}).get("podGroupName")
        assert expected == pod_group["metadata"]["name"]
        assert plan.pod_group_for(pod) == expected
        # v1.37.2: pods are owned by the Job only (no ownerReference to the PodGroup).
        assert [r["kind"] for r in pod["metadata"]["ownerReferences"]] == ["Job"]


def test_job_with_priority_class_parity(
    control_plane_kcm: ControlPlane, kcm: RestClient, scratch_ns: str
) -> None:
    pc = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "parity-high"},
        "value": 1000,
    }
    assert kcm.create("/apis/scheduling.k8s.io/v1/priorityclasses", pc).status in (201, 409)
    ns = control_plane_kcm.create_namespace("job-")
    job = _job(
        "prio",
        parallelism=2,
        scheduling={"schedulingPolicy": {"gang": {}}},
        pod_spec={"priorityClassName": "parity-high"},
    )
    created = _create_job(kcm, ns, job)
    workload, pod_group = _wait_objects(kcm, ns, created["metadata"]["uid"], want_workload=True)
    assert workload is not None
    plan = plan_job(created)
    _assert_workload_parity(workload, plan)
    assert workload["spec"]["podGroupTemplates"][0]["priorityClassName"] == "parity-high"
    _assert_pod_group_parity(
        kcm, scratch_ns, pod_group, plan.with_workload_uid(workload["metadata"]["uid"])
    )
    assert pod_group["spec"]["priority"] == 1000


def test_delegated_job_parity(
    control_plane_kcm: ControlPlane, kcm: RestClient, scratch_ns: str
) -> None:
    """A Job owned by a parent controller with the group-template annotation: the controller
    creates only a PodGroup from the parent's Workload template."""
    ns = control_plane_kcm.create_namespace("job-")
    # The "parent controller" object: any real object (the GC keeps the Job while it exists).
    parent = kcm.create(
        f"/api/v1/namespaces/{ns}/configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "trainer"}},
    ).body
    parent_wl = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": "trainer-wl"},
        "spec": {
            "controllerRef": {"apiGroup": "", "kind": "ConfigMap", "name": "trainer"},
            "podGroupTemplates": [
                {"name": "leader", "schedulingPolicy": {"basic": {}}},
                {
                    "name": "workers",
                    "schedulingPolicy": {"gang": {"minCount": 3}},
                    "schedulingConstraints": {"topology": [{"key": RACK}]},
                    "disruptionMode": {"all": {}},
                },
            ],
        },
    }
    resp = kcm.create(f"{SCHED}/namespaces/{ns}/workloads", parent_wl)
    assert resp.status == 201, resp.message
    live_parent = resp.body
    job = _job(
        "trainer-workers-0",
        parallelism=3,
        annotations={"scheduling.k8s.io/group-template-name": "workers"},
    )
    job["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": "trainer",
            "uid": parent["metadata"]["uid"],
            "controller": True,
        }
    ]
    created = _create_job(kcm, ns, job)
    _, pod_group = _wait_objects(kcm, ns, created["metadata"]["uid"], want_workload=False)
    # The controller created no Workload of its own.
    assert not [
        w
        for w in kcm.get(f"{SCHED}/namespaces/{ns}/workloads").body["items"]
        if _controlled_by(w, created["metadata"]["uid"])
    ]
    plan = plan_job(created, parent_workload=from_dict(live_parent, Workload))
    assert not plan.owns_workload
    _assert_pod_group_parity(kcm, scratch_ns, pod_group, plan)
    assert pod_group["spec"]["workloadRef"] == {
        "workloadName": "trainer-wl",
        "templateName": "workers",
    }
    for pod in _wait_pods(kcm, ns, created, 3):
        assert plan.pod_group_for(pod) == pod_group["metadata"]["name"]


UNMANAGED: list[tuple[str, dict[str, Any]]] = [
    (
        "bring-your-own-pod-group",
        _job("byo", parallelism=1, pod_spec={"schedulingGroup": {"podGroupName": "mine"}}),
    ),
]


@pytest.mark.parametrize(("shape", "job"), UNMANAGED, ids=[s for s, _ in UNMANAGED])
def test_unmanaged_job_parity(
    control_plane_kcm: ControlPlane, kcm: RestClient, shape: str, job: dict[str, Any]
) -> None:
    ns = control_plane_kcm.create_namespace("job-")
    created = _create_job(kcm, ns, job)
    with pytest.raises(NotManagedError):
        plan_job(created)
    # The controller has synced this Job once its pods exist; by then it created nothing.
    _wait_pods(kcm, ns, created, 1)
    assert kcm.get(f"{SCHED}/namespaces/{ns}/workloads").body["items"] == []
    assert kcm.get(f"{SCHED}/namespaces/{ns}/podgroups").body["items"] == []


def test_controller_owned_job_without_annotation_is_unmanaged(
    control_plane_kcm: ControlPlane, kcm: RestClient
) -> None:
    ns = control_plane_kcm.create_namespace("job-")
    parent = kcm.create(
        f"/api/v1/namespaces/{ns}/configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}},
    ).body
    job = _job("owned", parallelism=1, scheduling={"schedulingPolicy": {"gang": {}}})
    job["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": "owner",
            "uid": parent["metadata"]["uid"],
            "controller": True,
        }
    ]
    created = _create_job(kcm, ns, job)
    with pytest.raises(NotManagedError):
        plan_job(created)
    pods = _wait_pods(kcm, ns, created, 1)
    assert "schedulingGroup" not in pods[0]["spec"]
    assert kcm.get(f"{SCHED}/namespaces/{ns}/workloads").body["items"] == []
    assert kcm.get(f"{SCHED}/namespaces/{ns}/podgroups").body["items"] == []


def test_elastic_min_count_patch_parity(control_plane_kcm: ControlPlane, kcm: RestClient) -> None:
    """Raising parallelism of a gang Job without minCount: the controller patches the
    Workload's and the PodGroup's minCount to what our plan's patches say."""
    ns = control_plane_kcm.create_namespace("job-")
    created = _create_job(
        kcm,
        ns,
        _job(
            "elastic", parallelism=2, completions=6, scheduling={"schedulingPolicy": {"gang": {}}}
        ),
    )
    uid = created["metadata"]["uid"]
    workload, pod_group = _wait_objects(kcm, ns, uid, want_workload=True)
    assert workload is not None
    resp = kcm.patch(f"/apis/batch/v1/namespaces/{ns}/jobs/elastic", {"spec": {"parallelism": 4}})
    assert resp.status == 200, resp.message
    plan = plan_job(resp.body)
    patches = {(p.kind, p.name): p.body for p in plan.patches()}
    assert set(patches) == {
        ("Workload", workload["metadata"]["name"]),
        ("PodGroup", pod_group["metadata"]["name"]),
    }

    def min_counts() -> tuple[int, int] | None:
        wl, pg = _wait_objects(kcm, ns, uid, want_workload=True)
        assert wl is not None
        got = (
            wl["spec"]["podGroupTemplates"][0]["schedulingPolicy"]["gang"]["minCount"],
            pg["spec"]["schedulingPolicy"]["gang"]["minCount"],
        )
        return got if got == (4, 4) else None

    wait_for(min_counts, what="the controller to raise minCount to 4")
    wl_patch = patches[("Workload", workload["metadata"]["name"])]
    assert wl_patch["spec"]["podGroupTemplates"][0]["schedulingPolicy"]["gang"]["minCount"] == 4
    pg_patch = patches[("PodGroup", pod_group["metadata"]["name"])]
    assert pg_patch == {"spec": {"schedulingPolicy": {"gang": {"minCount": 4}}}}


@pytest.mark.parametrize("length", [58, 63])
def test_job_name_too_long_for_template_name(
    control_plane_kcm: ControlPlane, kcm: RestClient, length: int
) -> None:
    """For a Job name longer than 57 characters the template name ``<job>-pgt-0`` exceeds 63
    bytes; v1.37.2's controller fails with a ``FailedWorkloadCreate`` event and creates no
    Workload, PodGroup or pods."""
    ns = control_plane_kcm.create_namespace("job-")
    _create_job(
        kcm, ns, _job("n" * length, parallelism=1, scheduling={"schedulingPolicy": {"gang": {}}})
    )

    def failed_event() -> dict[str, Any] | None:
        for ev in kcm.get(f"/api/v1/namespaces/{ns}/events").body.get("items", []):
            if ev.get("reason") == "FailedWorkloadCreate":
                return dict(ev)
        return None

    event = wait_for(failed_event, what="the FailedWorkloadCreate event")
    assert "spec.podGroupTemplates[0].name" in event["message"]
    assert "must be no more than 63 bytes" in event["message"]
    assert kcm.get(f"{SCHED}/namespaces/{ns}/workloads").body["items"] == []
    assert kcm.get(f"/api/v1/namespaces/{ns}/pods").body["items"] == []


@pytest.mark.parametrize("length", [58, 63])
def test_plan_job_refuses_too_long_names(length: int) -> None:
    """Regression (disagreement found by test_job_name_too_long_for_template_name): our adapter
    must refuse to plan such a Job, as the real controller cannot create its objects."""
    job = _job("n" * length, parallelism=1, scheduling={"schedulingPolicy": {"gang": {}}})
    job["metadata"].update(namespace="default", uid="0f3c2b1a-9d8e-4c7b-a6f5-e4d3c2b1a090")
    with pytest.raises(WorkloadBuilderError):
        plan_job(job)
