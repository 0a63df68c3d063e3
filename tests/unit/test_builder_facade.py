"""simple_workload / PodSet: the few-lines facade for custom operators."""

from __future__ import annotations

import importlib

import pytest

from workloadbuilder.api import OwnerReference, PodGroupResourceClaim, object_to_dict, to_dict
from workloadbuilder.builder import PodSet, controller_ref, simple_workload
from workloadbuilder.errors import BuildError, ValidationError
from workloadbuilder.naming import pod_group_name

TRAINER = {
    "apiVersion": "example.com/v1",
    "kind": "Trainer",
    "metadata": {"name": "t1", "namespace": "ml", "uid": "u-1"},
}


def test_controller_ref_from_a_document_and_from_a_reference() -> None:
    ref = controller_ref(TRAINER)
    assert ref == OwnerReference(
        api_version="example.com/v1",
        kind="Trainer",
        name="t1",
        uid="u-1",
        controller=True,
        block_owner_deletion=True,
    )
    plain = OwnerReference(api_version="v1", kind="ConfigMap", name="c", uid="x")
    assert controller_ref(plain).controller is True
    with pytest.raises(BuildError):
        controller_ref({"kind": "Trainer"})


def test_two_pod_sets() -> None:
    result = simple_workload(
        name="trainer",
        namespace="ml",
        owner=TRAINER,
        pod_sets=[
            PodSet(name="workers", replicas=8, topology_key="topology.kubernetes.io/rack"),
            PodSet(name="driver", replicas=1, gang=False),
        ],
        priority_class_name="high",
    )
    wl = result.workload
    assert wl.metadata.name == "trainer"
    assert [t.name for t in wl.spec.pod_group_templates] == ["workers", "driver"]
    assert to_dict(wl.spec.pod_group_templates[0]) == {
        "name": "workers",
        "schedulingPolicy": {"gang": {"minCount": 8}},
        "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/rack"}]},
        "priorityClassName": "high",
    }
    assert result.pod_group_names == {
        "workers": pod_group_name("trainer", "workers"),
        "driver": pod_group_name("trainer", "driver"),
    }
    driver = result.pod_group("driver")
    assert driver.spec.scheduling_policy.basic is not None
    assert driver.metadata.owner_references == (controller_ref(TRAINER),)
    assert result.objects()[0] is wl
    assert len(result.objects()) == 3


def test_single_pod_set_with_explicit_min_count_and_workload_defaults() -> None:
    claim = PodGroupResourceClaim(name="imex", resource_claim_template_name="imex-tpl")
    result = simple_workload(
        name="w",
        namespace="ns",
        owner=TRAINER,
        pod_sets=[PodSet(name="all", replicas=6, min_count=4, resource_claims=[claim])],
        disruption_mode="all",
        topology_key="zone",
    )
    (pg,) = result.pod_groups
    assert to_dict(pg.spec) == {
        "schedulingPolicy": {"gang": {"minCount": 4}},
        "workloadRef": {"workloadName": "w", "templateName": "all"},
        "schedulingConstraints": {"topology": [{"key": "zone"}]},
        "resourceClaims": [{"name": "imex", "resourceClaimTemplateName": "imex-tpl"}],
        "disruptionMode": {"all": {}},
    }


def test_zero_replicas_gang_defaults_min_count_to_one() -> None:
    result = simple_workload(
        name="w", namespace="ns", owner=TRAINER, pod_sets=[PodSet(name="p", replicas=0)]
    )
    gang = result.pod_groups[0].spec.scheduling_policy.gang
    assert gang is not None
    assert gang.min_count == 1


def test_invalid_input_is_reported_with_paths() -> None:
    with pytest.raises(ValidationError) as info:
        simple_workload(
            name="w",
            namespace="ns",
            owner=TRAINER,
            pod_sets=[
                PodSet(name="Bad_Name", replicas=2),
                PodSet(name="ok", replicas=2, min_count=3),
                PodSet(name="ok", replicas=-1, gang=False, disruption_mode="all"),
            ],
        )
    paths = [(e.path, e.type) for e in info.value.errors]
    assert paths == [
        ("podSets[0].name", "Invalid value"),
        ("podSets[1].schedulingPolicy.gang.minCount", "Invalid value"),
        ("podSets[2].name", "Duplicate value"),
        ("podSets[2].replicas", "Invalid value"),
        ("podSets[2].disruptionMode", "Invalid value"),
    ]
    assert "must not be greater than replicas (2)" in str(info.value)
    with pytest.raises(ValidationError):
        simple_workload(name="w", namespace="ns", owner=TRAINER, pod_sets=[])


def test_facade_output_matches_the_v137_schema() -> None:
    kv = importlib.import_module("kubernetes_validate")
    result = simple_workload(
        name="trainer",
        namespace="ml",
        owner=TRAINER,
        pod_sets=[PodSet(name="workers", replicas=4), PodSet(name="ps", replicas=2, gang=False)],
        priority_class_name="high",
        topology_key="zone",
    )
    for obj in result.objects():
        kv.validate(object_to_dict(obj), "1.37.0", strict=True)


def test_facade_output_passes_sdk_validation() -> None:
    validation = importlib.import_module("workloadbuilder.validation")
    result = simple_workload(
        name="trainer",
        namespace="ml",
        owner=TRAINER,
        pod_sets=[PodSet(name="workers", replicas=4), PodSet(name="ps", replicas=2, gang=False)],
        priority_class_name="high",
        disruption_mode="single",
    )
    for obj in result.objects():
        assert validation.validate_object(obj) == []


def test_facade_returns_a_plan_like_every_adapter() -> None:
    from workloadbuilder.builder import POD_SET_ANNOTATION, WORKLOAD_ANNOTATION
    from workloadbuilder.kinds import Plan

    plan = simple_workload(
        name="trainer",
        namespace="ml",
        owner=TRAINER,
        pod_sets=[PodSet(name="workers", replicas=4), PodSet(name="ps", replicas=2, gang=False)],
    )
    assert isinstance(plan, Plan) and plan.owns_workload
    workers = plan.pod_group_names["workers"]
    pod = {"metadata": {"namespace": "ml", "annotations": {POD_SET_ANNOTATION: "workers"}}}
    assert plan.pod_group_for(pod) == workers
    other_ns = {"metadata": {"namespace": "x", "annotations": {POD_SET_ANNOTATION: "workers"}}}
    assert plan.pod_group_for(other_ns) is None
    elsewhere = {
        "metadata": {
            "namespace": "ml",
            "annotations": {POD_SET_ANNOTATION: "workers", WORKLOAD_ANNOTATION: "other"},
        }
    }
    assert plan.pod_group_for(elsewhere) is None
    linked = {
        "metadata": {"namespace": "ml"},
        "spec": {"schedulingGroup": {"podGroupName": workers}},
    }
    assert plan.pod_group_for(linked) == workers
    assert [(p.kind, p.name) for p in plan.patches()] == [
        ("Workload", "trainer"),
        ("PodGroup", workers),
    ]
    assert plan.pod_group_patches[workers] == {
        "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}}
    }
    with pytest.raises(KeyError):
        plan.pod_group("nope")
