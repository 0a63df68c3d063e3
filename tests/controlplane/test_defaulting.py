"""What the v1.37.2 API server defaults and stamps, and that our models keep all of it.

Findings are written up in docs/controlplane.md ("Server defaults").
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from workloadbuilder.api import object_from_dict, object_to_dict
from workloadbuilder.testing import ControlPlane, RestClient, wait_for

pytestmark = pytest.mark.controlplane

GROUP = "/apis/scheduling.k8s.io"
FINALIZER = "scheduling.k8s.io/podgroup-protection"


def _prune(value: Any) -> Any:
    """Drop ``null`` members (the server emits ``null`` for unset lists/structs without
    ``omitempty``; absent and ``null`` mean the same)."""
    if isinstance(value, dict):
        return {k: _prune(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_prune(v) for v in value]
    return value


def _pg(name: str, **spec: Any) -> dict[str, Any]:
    spec.setdefault("schedulingPolicy", {"gang": {"minCount": 2}})
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": spec,
    }


def _cpg(name: str, **spec: Any) -> dict[str, Any]:
    spec.setdefault("workloadRef", {"workloadName": "w", "templateName": "root"})
    spec.setdefault("schedulingPolicy", {"gang": {"minGroupCount": 1}})
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha3",
        "kind": "CompositePodGroup",
        "metadata": {"name": name},
        "spec": spec,
    }


def _priority_class(value: int, preemption: str | None = None, **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": f"pc-{secrets.token_hex(3)}"},
        "value": value,
        **extra,
    }
    if preemption:
        doc["preemptionPolicy"] = preemption
    return doc


def _create(api: RestClient, path: str, doc: dict[str, Any]) -> dict[str, Any]:
    resp = api.create(path, doc)
    assert resp.status == 201, f"{resp.status}: {resp.message}"
    return resp.body


def _create_priority_class(api: RestClient, namespace: str, doc: dict[str, Any]) -> str:
    """Create a PriorityClass and wait until the Priority admission plugin's informer sees it
    (right after the create, admission may still answer "no PriorityClass ... was found")."""
    name = str(_create(api, "/apis/scheduling.k8s.io/v1/priorityclasses", doc)["metadata"]["name"])
    probe = _pg(
        f"probe-{secrets.token_hex(3)}",
        priorityClassName=name,
        preemptionPolicy=doc.get("preemptionPolicy", "PreemptLowerPriority"),
    )

    def seen() -> bool | None:
        resp = api.create(f"{GROUP}/v1beta1/namespaces/{namespace}/podgroups", probe, dry_run=True)
        return None if "no PriorityClass with name" in resp.message else True

    wait_for(seen, what=f"PriorityClass {name} to reach the Priority admission plugin")
    return name


def _assert_model_round_trip(server_doc: dict[str, Any]) -> None:
    """Our codec keeps every field of the server's answer (spec, status, metadata)."""
    back = object_to_dict(object_from_dict(server_doc))
    for key in ("spec", "status", "metadata"):
        assert _prune(back.get(key) or {}) == _prune(server_doc.get(key) or {}), key


def test_pod_group_defaults(api: RestClient, namespace: str) -> None:
    body = _create(api, f"{GROUP}/v1beta1/namespaces/{namespace}/podgroups", _pg("pg"))
    assert body["spec"] == {
        "schedulingPolicy": {"gang": {"minCount": 2}},
        "disruptionMode": {"single": {}},  # declarative default
        "preemptionPolicy": "PreemptLowerPriority",  # default (PodGroupPreemptionPolicy on)
        "priority": 0,  # Priority admission: no class, no global default
    }
    assert body["metadata"]["finalizers"] == [FINALIZER]  # PodGroupProtection admission
    assert "priorityClassName" not in body["spec"]
    _assert_model_round_trip(body)


def test_pod_group_status_is_dropped_on_create(api: RestClient, namespace: str) -> None:
    doc = _pg("with-status")
    doc["status"] = {
        "conditions": [
            {
                "type": "PodGroupInitiallyScheduled",
                "status": "True",
                "reason": "Scheduled",
                "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    }
    body = _create(api, f"{GROUP}/v1beta1/namespaces/{namespace}/podgroups", doc)
    assert not body.get("status", {}).get("conditions")


def test_dry_run_create_also_defaults(api: RestClient, namespace: str) -> None:
    resp = api.create(f"{GROUP}/v1beta1/namespaces/{namespace}/podgroups", _pg("dry"), dry_run=True)
    assert resp.status == 201
    assert resp.body["spec"]["disruptionMode"] == {"single": {}}
    assert resp.body["metadata"]["finalizers"] == [FINALIZER]
    assert api.get(f"{GROUP}/v1beta1/namespaces/{namespace}/podgroups/dry").status == 404


def test_priority_and_preemption_policy_come_from_the_priority_class(
    api: RestClient, namespace: str
) -> None:
    name = _create_priority_class(api, namespace, _priority_class(500))
    pc = api.get(f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}").body
    assert pc["preemptionPolicy"] == "PreemptLowerPriority"  # PriorityClass default
    pg = _create(
        api,
        f"{GROUP}/v1beta1/namespaces/{namespace}/podgroups",
        _pg("pg-mid", priorityClassName=name),
    )
    assert (pg["spec"]["priority"], pg["spec"]["preemptionPolicy"]) == (500, "PreemptLowerPriority")
    cpg = _create(
        api,
        f"{GROUP}/v1alpha3/namespaces/{namespace}/compositepodgroups",
        _cpg("cpg-mid", priorityClassName=name),
    )
    assert (cpg["spec"]["priority"], cpg["spec"]["preemptionPolicy"]) == (
        500,
        "PreemptLowerPriority",
    )
    _assert_model_round_trip(pg)
    _assert_model_round_trip(cpg)


def test_never_priority_class_needs_an_explicit_preemption_policy(
    api: RestClient, namespace: str
) -> None:
    """Upstream quirk: defaulting fills preemptionPolicy=PreemptLowerPriority before the
    Priority admission plugin computes Never from the class, which it then rejects."""
    name = _create_priority_class(api, namespace, _priority_class(1000, "Never"))
    path = f"{GROUP}/v1beta1/namespaces/{namespace}/podgroups"
    denied = api.create(path, _pg("implicit", priorityClassName=name))
    assert denied.status == 403
    assert "must not be provided in pod group spec" in denied.message
    assert "computed Never" in denied.message
    cpg_path = f"{GROUP}/v1alpha3/namespaces/{namespace}/compositepodgroups"
    denied = api.create(cpg_path, _cpg("implicit", priorityClassName=name))
    assert denied.status == 403 and "computed Never" in denied.message
    ok = _create(api, path, _pg("explicit", priorityClassName=name, preemptionPolicy="Never"))
    assert (ok["spec"]["priority"], ok["spec"]["preemptionPolicy"]) == (1000, "Never")


def test_priority_admission_rejections(api: RestClient, namespace: str) -> None:
    path = f"{GROUP}/v1beta1/namespaces/{namespace}/podgroups"
    mismatch = api.create(path, _pg("prio", priority=7))
    assert mismatch.status == 403
    assert "must match the priority computed (0)" in mismatch.message
    missing = api.create(path, _pg("missing", priorityClassName="no-such-class"))
    assert missing.status == 403
    assert "no PriorityClass with name no-such-class was found" in missing.message


def test_composite_pod_group_defaults_and_no_finalizer(api: RestClient, namespace: str) -> None:
    body = _create(api, f"{GROUP}/v1alpha3/namespaces/{namespace}/compositepodgroups", _cpg("cpg"))
    assert body["spec"]["disruptionMode"] == {"single": {}}
    assert body["spec"]["preemptionPolicy"] == "PreemptLowerPriority"
    assert body["spec"]["priority"] == 0
    # v1.37.2's PodGroupProtection admission stamps PodGroups only.
    assert "finalizers" not in body["metadata"]
    _assert_model_round_trip(body)


def test_workload_templates_are_not_defaulted(api: RestClient, namespace: str) -> None:
    template = {
        "name": "a",
        "schedulingPolicy": {"basic": {}},
        # No Priority admission on Workloads: an unknown class and any priority are kept.
        "priorityClassName": "does-not-exist",
        "priority": 7,
    }
    doc = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": "w"},
        "spec": {"podGroupTemplates": [template]},
    }
    body = _create(api, f"{GROUP}/v1beta1/namespaces/{namespace}/workloads", doc)
    assert _prune(body["spec"]) == {"podGroupTemplates": [template]}
    # Unset struct without omitempty comes back as an explicit null.
    assert body["spec"]["podGroupTemplates"][0]["schedulingConstraints"] is None
    assert "finalizers" not in body["metadata"]
    _assert_model_round_trip(body)


@pytest.fixture(scope="module")
def private_plane(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """A plane of our own: a global-default PriorityClass would leak into other tests."""
    with ControlPlane(bin_dir=control_plane.bin_dir) as plane:
        yield plane


def test_global_default_priority_class_applies_to_pod_groups(private_plane: ControlPlane) -> None:
    ns = private_plane.create_namespace("prio-")
    with private_plane.client() as api:
        pc = _create(
            api,
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            _priority_class(42, globalDefault=True),
        )

        def created() -> dict[str, Any] | None:
            # The admission plugin reads PriorityClasses from an informer: poll until seen.
            resp = api.create(
                f"{GROUP}/v1beta1/namespaces/{ns}/podgroups",
                _pg(f"pg-{secrets.token_hex(3)}"),
                dry_run=True,
            )
            assert resp.status == 201, resp.message
            return resp.body if resp.body["spec"]["priority"] == 42 else None

        body = wait_for(created, what="the global default PriorityClass to apply")
        assert body["spec"]["priorityClassName"] == pc["metadata"]["name"]
        wl = {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "Workload",
            "metadata": {"name": "w"},
            "spec": {"podGroupTemplates": [{"name": "a", "schedulingPolicy": {"basic": {}}}]},
        }
        wbody = _create(api, f"{GROUP}/v1beta1/namespaces/{ns}/workloads", wl)
        assert "priorityClassName" not in wbody["spec"]["podGroupTemplates"][0]


def test_pod_group_finalizer_is_removed_by_kcm_once_unused(control_plane_kcm: ControlPlane) -> None:
    ns = control_plane_kcm.create_namespace("fin-")
    with control_plane_kcm.client() as api:
        pgs = f"{GROUP}/v1beta1/namespaces/{ns}/podgroups"
        pods = f"/api/v1/namespaces/{ns}/pods"
        _create(api, pgs, _pg("held"))
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "member"},
            "spec": {
                "schedulingGroup": {"podGroupName": "held"},
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
            },
        }
        _create(api, pods, pod)
        assert api.delete(f"{pgs}/held").status == 200

        def terminating() -> dict[str, Any] | None:
            body = api.get(f"{pgs}/held").body
            return body if body.get("metadata", {}).get("deletionTimestamp") else None

        held = wait_for(terminating, what="deletionTimestamp")
        assert held["metadata"]["finalizers"] == [FINALIZER]
        # v1.37.2 does NOT reject new pods that reference a terminating PodGroup.
        late = dict(pod, metadata={"name": "late"})
        assert api.create(pods, late).status == 201
        for name in ("member", "late"):
            assert api.request("DELETE", f"{pods}/{name}", {"gracePeriodSeconds": 0}).status == 200
        wait_for(
            lambda: True if api.get(f"{pgs}/held").status == 404 else None,
            what="the protection controller to release the PodGroup",
        )


def test_resource_claim_controller_creates_one_claim_per_pod_group(
    control_plane_kcm: ControlPlane,
) -> None:
    """DRAWorkloadResourceClaims: a PodGroup template claim becomes one ResourceClaim owned by
    the PodGroup, recorded in the PodGroup's and the pod's status."""
    ns = control_plane_kcm.create_namespace("dra-")
    with control_plane_kcm.client() as api:
        dra = f"/apis/resource.k8s.io/v1/namespaces/{ns}"
        template = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "gpu"},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {"name": "g", "exactly": {"deviceClassName": "gpu.example.com"}}
                        ]
                    }
                }
            },
        }
        _create(api, f"{dra}/resourceclaimtemplates", template)
        claim = {"name": "shared", "resourceClaimTemplateName": "gpu"}
        pg = _create(
            api,
            f"{GROUP}/v1beta1/namespaces/{ns}/podgroups",
            _pg("trainers", schedulingPolicy={"gang": {"minCount": 1}}, resourceClaims=[claim]),
        )
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "trainer-0"},
            "spec": {
                "schedulingGroup": {"podGroupName": "trainers"},
                "resourceClaims": [claim],
                "containers": [
                    {
                        "name": "c",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"claims": [{"name": "shared"}]},
                    }
                ],
            },
        }
        _create(api, f"/api/v1/namespaces/{ns}/pods", pod)

        def claims() -> list[dict[str, Any]] | None:
            items = api.get(f"{dra}/resourceclaims").body.get("items", [])
            return items or None

        (rc,) = wait_for(claims, what="the ResourceClaim for the PodGroup")
        assert rc["metadata"]["generateName"] == "trainers-shared-"
        assert rc["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] == "shared"
        (owner,) = rc["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
            "PodGroup",
            "trainers",
            pg["metadata"]["uid"],
            True,
        )
        expected = [{"name": "shared", "resourceClaimName": rc["metadata"]["name"]}]

        def statuses() -> tuple[Any, Any] | None:
            pg_status = api.get(f"{GROUP}/v1beta1/namespaces/{ns}/podgroups/trainers").body.get(
                "status", {}
            )
            pod_status = api.get(f"/api/v1/namespaces/{ns}/pods/trainer-0").body.get("status", {})
            got = (pg_status.get("resourceClaimStatuses"), pod_status.get("resourceClaimStatuses"))
            return got if got == (expected, expected) else None

        wait_for(statuses, what="resourceClaimStatuses on the PodGroup and the pod")
