"""``workloadbuilder.testing.builders``: valid defaults, independent copies, a fixed key order."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from typing import Any

import kubernetes_validate
import pytest

import workloadbuilder.testing
from workloadbuilder import plan_for
from workloadbuilder.api import object_from_dict, object_to_dict
from workloadbuilder.testing import builders
from workloadbuilder.testing.builders import (
    PAUSE_IMAGE,
    make_composite_pod_group,
    make_composite_pod_group_template,
    make_job,
    make_jobset,
    make_lws,
    make_node,
    make_pod,
    make_pod_group,
    make_pod_group_template,
    make_pod_template,
    make_priority_class,
    make_replicated_job,
    make_scheduling,
    make_workload,
)
from workloadbuilder.validation import apply_defaults, validate_job_scheduling, validate_object

K8S_VERSION = "1.37.0"


def schema_errors(obj: dict[str, Any]) -> str | None:
    try:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    except kubernetes_validate.ValidationError as e:
        return f"{'.'.join(str(p) for p in e.path)}: {e.message}"
    return None


def sdk_errors(obj: dict[str, Any]) -> list[str]:
    """The SDK's create validation after the server's defaulting, as the API server does."""
    model = object_from_dict(obj)
    return [str(e) for e in validate_object(apply_defaults(model))]


# ---- defaults are minimal valid objects ----------------------------------------------------


DEFAULTS = {
    "pod": make_pod("p", "ns"),
    "node": make_node("n"),
    "job": make_job("j", "ns"),
    "priority-class": make_priority_class("high", 1000),
    "workload": make_workload("w", "ns"),
    "pod-group": make_pod_group("pg", "ns"),
    "composite-pod-group": make_composite_pod_group("cpg", "ns"),
}


@pytest.mark.parametrize("kind", list(DEFAULTS))
def test_defaults_conform_to_the_v137_schema(kind: str) -> None:
    assert schema_errors(DEFAULTS[kind].obj()) is None


@pytest.mark.parametrize("kind", ["workload", "pod-group", "composite-pod-group"])
def test_default_scheduling_objects_pass_the_sdk_validation(kind: str) -> None:
    assert sdk_errors(DEFAULTS[kind].obj()) == []


def test_minimal_defaults() -> None:
    assert make_pod("p").obj() == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "main", "image": PAUSE_IMAGE}]},
    }
    assert make_job("j", "ns").obj()["spec"] == {
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": PAUSE_IMAGE}],
            }
        }
    }
    assert make_pod_group("g").obj()["spec"] == {"schedulingPolicy": {"basic": {}}}
    assert make_workload("w").obj()["spec"] == {
        "podGroupTemplates": [{"name": "main", "schedulingPolicy": {"basic": {}}}]
    }
    assert make_priority_class("pc").obj() == {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "pc"},
        "value": 0,
    }


# ---- every setter produces what the API accepts ---------------------------------------------


def test_a_fully_set_pod_conforms() -> None:
    pod = (
        make_pod("p", "ns")
        .label("app", "x")
        .annotation("a", "b")
        .owner_reference("batch/v1", "Job", "j", "0f3c2b1a-9d8e-4c7b-a6f5-e4d3c2b1a090")
        .container_name("c")
        .image("x")
        .request("cpu", "1")
        .request("nvidia.com/gpu", 2)
        .limit("nvidia.com/gpu", 2)
        .container("sidecar", resources={"requests": {"memory": "1Gi"}})
        .restart_policy("Never")
        .scheduler_name("wb")
        .pod_group("gang")
        .priority_class("high")
        .node_selector("zone", "z1")
        .node_selectors({"rack": "r1"})
        .toleration("k", "v", effect="NoSchedule", operator="Equal")
        .tolerations({"key": "t", "operator": "Exists"})
        .node_name("n1")
        .pod_resource_claim("gpu", template="gpu-template")
        .obj()
    )
    assert schema_errors(pod) is None
    spec = pod["spec"]
    assert spec["containers"] == [
        {
            "name": "c",
            "image": "x",
            "resources": {
                "requests": {"cpu": "1", "nvidia.com/gpu": "2"},
                "limits": {"nvidia.com/gpu": "2"},
            },
        },
        {"name": "sidecar", "image": PAUSE_IMAGE, "resources": {"requests": {"memory": "1Gi"}}},
    ]
    assert spec["schedulingGroup"] == {"podGroupName": "gang"}
    assert spec["nodeSelector"] == {"zone": "z1", "rack": "r1"}
    assert spec["tolerations"] == [
        {"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"},
        {"key": "t", "operator": "Exists"},
    ]
    assert spec["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}]
    assert pod["metadata"]["ownerReferences"][0]["controller"] is True


def test_a_fake_node_conforms() -> None:
    node = (
        make_node("n1")
        .label("kubernetes.io/hostname", "n1")
        .resources({"cpu": "4", "memory": "16Gi", "pods": 110})
        .allocatable("nvidia.com/gpu", 1)
        .taint("dedicated", "gpu")
        .unschedulable()
        .ready()
        .obj()
    )
    assert schema_errors(node) is None
    assert node["status"]["capacity"] == {"cpu": "4", "memory": "16Gi", "pods": "110"}
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "1"
    assert node["status"]["conditions"][0]["type"] == "Ready"
    assert node["spec"] == {
        "unschedulable": True,
        "taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
    }


def test_a_gang_job_conforms_and_passes_job_scheduling_validation() -> None:
    job = (
        make_job("j", "ns")
        .parallelism(4)
        .completions(8)
        .indexed()
        .gang(min_count=2)
        .topology("topology.kubernetes.io/rack")
        .disruption_mode("all")
        .resource_claim("shared", template="t")
        .request("cpu", "500m")
        .obj()
    )
    assert schema_errors(job) is None
    assert validate_job_scheduling(job) == []
    assert job["spec"]["scheduling"] == {
        "schedulingPolicy": {"gang": {"minCount": 2}},
        "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/rack"}]},
        "disruptionMode": {"all": {}},
        "resourceClaims": [{"name": "shared", "resourceClaimTemplateName": "t"}],
    }
    plan = plan_for(job)
    assert not isinstance(plan, list)
    assert [pg.spec.scheduling_policy.gang for pg in plan.pod_groups] != [None]


def test_jobset_and_lws_are_planned_by_their_adapters() -> None:
    jobset = (
        make_jobset("js", "ns")
        .gang()
        .replicated_job(make_replicated_job("leader"))
        .replicated_job(make_replicated_job("workers").replicas(2).parallelism(3).completions(3))
        .obj()
    )
    lws = make_lws("l", "ns").replicas(2).size(3).gang().obj()
    for doc in (jobset, lws):
        plans = plan_for(doc)
        for plan in plans if isinstance(plans, list) else [plans]:
            for obj in plan.objects():
                assert schema_errors(object_to_dict(obj)) is None
                assert validate_object(apply_defaults(obj)) == []
    assert jobset["spec"]["replicatedJobs"][1]["template"]["spec"]["parallelism"] == 3
    assert lws["spec"]["leaderWorkerTemplate"]["size"] == 3


def test_a_hierarchical_workload_and_its_groups_conform() -> None:
    workload = (
        make_workload("w", "ns")
        .controller_ref("Job", "j", "batch")
        .composite_pod_group_template(
            make_composite_pod_group_template("replica")
            .gang(2)
            .topology("topology.kubernetes.io/zone")
            .pod_group_template(
                make_pod_group_template("slice")
                .gang(4)
                .topology("topology.kubernetes.io/rack")
                .disruption_mode("all")
                .resource_claim("tpu", template="tpu")
            )
        )
        .api_version("scheduling.k8s.io/v1alpha3")
        .obj()
    )
    cpg = (
        make_composite_pod_group("w-replica-0", "ns")
        .workload_ref("w", "replica")
        .gang(2)
        .disruption_mode("all")
        .obj()
    )
    pg = (
        make_pod_group("w-replica-0-0", "ns")
        .api_version("scheduling.k8s.io/v1alpha3")
        .workload_ref("w", "slice")
        .parent("w-replica-0")
        .gang(4)
        .priority_class("high")
        .priority(1000)
        .preemption_policy("Never")
        .obj()
    )
    for obj in (workload, cpg, pg):
        assert schema_errors(obj) is None, obj["kind"]
        assert sdk_errors(obj) == [], obj["kind"]
    assert list(workload["spec"]) == ["controllerRef", "compositePodGroupTemplates"]
    flat = make_workload("w").pod_group_template(make_pod_group_template("driver")).obj()
    assert [t["name"] for t in flat["spec"]["podGroupTemplates"]] == ["driver"]
    assert list(pg["spec"])[:3] == [
        "parentCompositePodGroupName",
        "workloadRef",
        "schedulingPolicy",
    ]


def test_the_sdk_validation_sees_bad_values() -> None:
    """Guard against a vacuous check: a gang of 0 is refused."""
    assert sdk_errors(make_pod_group("g").gang(0).obj()) != []


def test_a_claim_names_exactly_one_source() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        make_pod_group("g").resource_claim("c")
    with pytest.raises(ValueError, match="exactly one"):
        make_pod("p").pod_resource_claim("c", claim="a", template="b")


# ---- no shared state ----------------------------------------------------------------------


def test_obj_returns_a_fresh_deep_copy() -> None:
    builder = make_pod("p").label("a", "1")
    first = builder.obj()
    first["spec"]["containers"][0]["image"] = "changed"
    first["metadata"]["labels"]["a"] = "changed"
    assert builder.obj() == make_pod("p").label("a", "1").obj()
    builder.label("b", "2")
    assert "b" not in first["metadata"]["labels"]


def test_values_given_to_setters_are_copied() -> None:
    labels = {"a": "1"}
    taint: dict[str, Any] = {"key": "k", "effect": "NoSchedule"}
    node = make_node("n").labels(labels).taints(taint)
    labels["a"] = "2"
    taint["key"] = "changed"
    out = node.obj()
    assert out["metadata"]["labels"] == {"a": "1"}
    assert out["spec"]["taints"] == [{"key": "k", "effect": "NoSchedule"}]


def test_empty_mappings_leave_the_field_unset() -> None:
    pod = make_pod("p").labels({}).annotations({}).node_selectors({}).tolerations().obj()
    assert pod == make_pod("p").obj()


def test_nested_builders_are_snapshots() -> None:
    template = make_pod_template().request("cpu", "1")
    job = make_job("j").template(template)
    template.request("cpu", "2")
    assert job.obj()["spec"]["template"]["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "1"}
    }


def test_builders_do_not_share_defaults() -> None:
    a, b = make_job("a"), make_job("b")
    a.image("x").request("cpu", "1")
    assert b.obj()["spec"]["template"] == make_job("c").obj()["spec"]["template"]
    w1, w2 = make_workload("w1"), make_workload("w2")
    w1.pod_group_template(make_pod_group_template("x"))
    assert w2.obj()["spec"]["podGroupTemplates"][0]["name"] == "main"


def test_clone_forks_a_builder() -> None:
    base = make_pod("p").pod_group("g")
    fork = base.clone().name("q").request("cpu", "1")
    assert base.obj() == make_pod("p").pod_group("g").obj()
    assert fork.obj()["metadata"]["name"] == "q"
    assert fork.obj()["spec"]["schedulingGroup"] == {"podGroupName": "g"}


# ---- key order, field() --------------------------------------------------------------------


def test_key_order_does_not_depend_on_the_setter_order() -> None:
    one = (
        make_job("j", "ns")
        .annotation("a", "b")
        .gang()
        .request("cpu", "1")
        .completions(2)
        .parallelism(2)
        .obj()
    )
    two = (
        make_job("j", "ns")
        .parallelism(2)
        .completions(2)
        .request("cpu", "1")
        .gang()
        .annotation("a", "b")
        .obj()
    )
    assert json.dumps(one) == json.dumps(two)
    assert list(one) == ["apiVersion", "kind", "metadata", "spec"]
    assert list(one["spec"]) == ["parallelism", "completions", "template", "scheduling"]
    assert list(one["metadata"]) == ["name", "namespace", "annotations"]


def test_a_pod_template_has_the_same_fixed_order() -> None:
    one = make_pod_template().request("cpu", "1").annotation("a", "b").restart_policy("Never")
    two = make_pod_template().restart_policy("Never").annotation("a", "b").request("cpu", "1")
    assert json.dumps(one.obj()) == json.dumps(two.obj())
    assert list(one.obj()) == ["metadata", "spec"]
    assert list(one.obj()["spec"]) == ["restartPolicy", "containers"]


def test_field_sets_any_path_after_the_known_keys() -> None:
    job = make_job("j").field("spec.backoffLimit", 0).parallelism(1).obj()
    assert job["spec"]["backoffLimit"] == 0
    assert list(job["spec"]) == ["parallelism", "template", "backoffLimit"]
    pod = make_pod("p").field("spec.hostNetwork", True).field("status", {"phase": "Running"})
    assert pod.obj()["status"] == {"phase": "Running"}
    assert pod.obj()["spec"]["hostNetwork"] is True


def test_scheduling_blocks() -> None:
    assert make_scheduling().obj() == {}
    entry = make_scheduling().targets("a", "b").job(make_scheduling().gang()).obj()
    assert entry == {"targetReplicatedJobs": ["a", "b"], "job": {"schedulingPolicy": {"gang": {}}}}
    js = make_jobset("js").scheduling().obj()
    assert js["spec"] == {"scheduling": {}}
    assert make_jobset("js").startup_policy_order("InOrder").obj()["spec"] == {
        "startupPolicy": {"startupPolicyOrder": "InOrder"}
    }


# ---- the public surface --------------------------------------------------------------------


def test_every_public_name_is_documented_and_exported() -> None:
    assert set(builders.__all__) <= set(workloadbuilder.testing.__all__)
    undocumented = []
    for name in builders.__all__:
        obj = getattr(builders, name)
        if not inspect.isclass(obj) and not inspect.isfunction(obj):
            continue
        if not inspect.getdoc(obj):
            undocumented.append(name)
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if not attr.startswith("_") and callable(member) and not inspect.getdoc(member):
                    undocumented.append(f"{name}.{attr}")
    assert undocumented == []


def test_harness_names_still_resolve() -> None:
    missing = [
        n for n in workloadbuilder.testing.__all__ if not hasattr(workloadbuilder.testing, n)
    ]
    assert missing == []
    with pytest.raises(AttributeError, match="NoSuchThing"):
        _ = workloadbuilder.testing.NoSuchThing


@pytest.mark.parametrize("module", ["workloadbuilder.testing.builders", "workloadbuilder.testing"])
def test_builders_import_cheaply(module: str) -> None:
    heavy = ["cryptography", "aiohttp", "kubernetes_asyncio", "numpy", "matplotlib", "yaml"]
    code = (
        f"import sys, {module}; from {module} import make_job; make_job('a').obj(); "
        f"print(*[m in sys.modules for m in {heavy!r}])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False"] * len(heavy)
