"""Generic adapter (custom operators): GenericSpec parsing, flat pod sets, hierarchies."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from fixtures.manifests import EXAMPLES_DIR

from workloadbuilder.api import (
    OwnerReference,
    TopologyConstraint,
    WorkloadCompositePodGroupGangSchedulingPolicy,
    WorkloadCompositePodGroupSchedulingPolicy,
    WorkloadPodGroupBasicSchedulingPolicy,
    WorkloadPodGroupSchedulingConstraints,
    WorkloadPodGroupSchedulingPolicy,
)
from workloadbuilder.errors import BuildError, ValidationError
from workloadbuilder.kinds.generic import (
    GENERIC_API_VERSION,
    POD_SET_ANNOTATION,
    WORKLOAD_ANNOTATION,
    GenericGroup,
    GenericGroupScheduling,
    GenericPodSet,
    GenericPodSetScheduling,
    GenericSpec,
    plan_generic,
    plan_generic_dict,
)

RACK = "topology.kubernetes.io/rack"
ZONE = "topology.kubernetes.io/zone"


def doc(spec: dict[str, Any], name: str = "op") -> dict[str, Any]:
    return {
        "apiVersion": GENERIC_API_VERSION,
        "kind": "GenericWorkload",
        "metadata": {"name": name, "namespace": "team"},
        "spec": spec,
    }


def paths(exc: pytest.ExceptionInfo[ValidationError]) -> set[str]:
    return {e.path for e in exc.value.errors}


def test_flat_pod_sets_default_to_gang_of_count() -> None:
    plan = plan_generic_dict(
        doc({"podSets": [{"name": "a", "count": 3}, {"name": "b", "count": 2, "replicas": 2}]})
    )
    assert plan.workload.metadata.name == "op"
    assert plan.workload.metadata.namespace == "team"
    tpls = {t.name: t for t in plan.workload.spec.pod_group_templates}
    assert tpls["a"].scheduling_policy.gang is not None
    assert tpls["a"].scheduling_policy.gang.min_count == 3
    assert [pg.metadata.name for pg in plan.pod_groups] == ["op-a-0", "op-b-0", "op-b-1"]
    assert plan.pod_group_names == {"a-0": "op-a-0", "b-0": "op-b-0", "b-1": "op-b-1"}
    assert all(pg.spec.parent_composite_pod_group_name is None for pg in plan.pod_groups)
    assert plan.workload.spec.controller_ref is None
    assert all(o.metadata.owner_references == () for o in plan.objects())


def test_python_spec_with_blocks_owner_and_priority() -> None:
    owner = OwnerReference(api_version="example.com/v1", kind="Trainer", name="t", uid="u-1")
    spec = GenericSpec(
        name="t",
        namespace="ml",
        owner=owner,
        priority_class_name="high",
        pod_sets=(
            GenericPodSet(
                name="driver",
                scheduling=GenericPodSetScheduling(
                    scheduling_policy=WorkloadPodGroupSchedulingPolicy(
                        basic=WorkloadPodGroupBasicSchedulingPolicy()
                    )
                ),
            ),
            GenericPodSet(
                name="workers",
                count=8,
                scheduling=GenericPodSetScheduling(
                    scheduling_constraints=WorkloadPodGroupSchedulingConstraints(
                        topology=(TopologyConstraint(key=RACK),)
                    )
                ),
            ),
        ),
    )
    plan = plan_generic(spec)
    driver, workers = plan.pod_groups
    assert driver.spec.scheduling_policy.basic is not None
    assert workers.spec.scheduling_policy.gang is not None
    assert workers.spec.scheduling_policy.gang.min_count == 8
    assert workers.spec.scheduling_constraints is not None
    assert {pg.spec.priority_class_name for pg in plan.pod_groups} == {"high"}
    for obj in plan.objects():
        (ref,) = obj.metadata.owner_references
        assert (ref.kind, ref.name, ref.uid, ref.controller) == ("Trainer", "t", "u-1", True)
    cref = plan.workload.spec.controller_ref
    assert cref is not None and (cref.api_group, cref.kind, cref.name) == (
        "example.com",
        "Trainer",
        "t",
    )


def test_hierarchy_builds_composite_groups_root_first() -> None:
    spec = GenericSpec(
        name="h",
        groups=(
            GenericGroup(
                name="top",
                scheduling=GenericGroupScheduling(
                    scheduling_policy=WorkloadCompositePodGroupSchedulingPolicy(
                        gang=WorkloadCompositePodGroupGangSchedulingPolicy()
                    )
                ),
                groups=(
                    GenericGroup(
                        name="rack",
                        replicas=2,
                        pod_sets=(GenericPodSet(name="pods", count=4, replicas=3),),
                    ),
                ),
            ),
        ),
    )
    plan = plan_generic(spec)
    (top,) = plan.workload.spec.composite_pod_group_templates
    assert top.scheduling_policy.gang is not None
    assert top.scheduling_policy.gang.min_group_count == 2  # two "rack" instances
    (rack,) = top.composite_pod_group_templates
    assert rack.scheduling_policy.gang is not None
    assert rack.scheduling_policy.gang.min_group_count == 3  # three "pods" PodGroups each
    cpgs = [
        (c.metadata.name, c.spec.parent_composite_pod_group_name) for c in plan.composite_pod_groups
    ]
    assert cpgs == [
        ("h-top-0", None),
        ("h-top-0-rack-0", "h-top-0"),
        ("h-top-0-rack-1", "h-top-0"),
    ]
    assert len(plan.pod_groups) == 6
    pg = plan.pod_groups[4]
    assert pg.metadata.name == "h-top-0-rack-1-pods-1"
    assert pg.spec.parent_composite_pod_group_name == "h-top-0-rack-1"
    assert pg.spec.workload_ref is not None and pg.spec.workload_ref.template_name == "pods"
    assert plan.pod_group_names["top-0/rack-1/pods-1"] == "h-top-0-rack-1-pods-1"
    pod = {"metadata": {"annotations": {POD_SET_ANNOTATION: "top-0/rack-1/pods-1"}}}
    assert plan.pod_group_for(pod) == "h-top-0-rack-1-pods-1"
    assert plan.pod_group_for({"metadata": {}}) is None


def test_example_file_parses_and_builds() -> None:
    (manifest,) = yaml.safe_load_all((EXAMPLES_DIR / "custom-operator.yaml").read_text())
    spec = GenericSpec.from_dict(manifest)
    assert [g.name for g in spec.groups] == ["job"]
    plan = plan_generic(spec)
    kinds = [o.kind for o in plan.objects()]
    assert kinds[0] == "Workload"
    assert kinds.count("CompositePodGroup") == 2
    assert kinds.count("PodGroup") == 3


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({}, "spec"),
        (
            {"podSets": [{"name": "a"}], "groups": [{"name": "g", "podSets": [{"name": "b"}]}]},
            "spec",
        ),
        ({"podSets": [{"name": "a", "count": 0}]}, "spec.podSets[0].count"),
        ({"podSets": [{"name": "a", "replicas": -1}]}, "spec.podSets[0].replicas"),
        (
            {
                "podSets": [
                    {
                        "name": "a",
                        "count": 2,
                        "scheduling": {"schedulingPolicy": {"gang": {"minCount": 3}}},
                    }
                ]
            },
            "spec.podSets[0].scheduling.schedulingPolicy.gang.minCount",
        ),
        ({"groups": [{"name": "g"}]}, "spec.groups[0]"),
        ({"podSets": [{"name": "a", "colour": "red"}]}, "spec.podSets[0].colour"),
        ({"podSets": [{"name": "a", "count": "3"}]}, "spec.podSets[0].count"),
        ({"podSets": [{"count": 3}]}, "spec.podSets[0].name"),
        (
            {
                "podSets": [
                    {
                        "name": "a",
                        "scheduling": {
                            "schedulingConstraints": {"topology": [{"key": "bad key!"}]}
                        },
                    }
                ]
            },
            "spec.podSets[0].scheduling.schedulingConstraints.topology[0].key",
        ),
        (
            {
                "podSets": [
                    {
                        "name": "a",
                        "scheduling": {
                            "schedulingPolicy": {"basic": {}},
                            "disruptionMode": {"all": {}},
                        },
                    }
                ]
            },
            "spec.podSets[0].scheduling.disruptionMode",
        ),
        ({"podSets": [{"name": "Bad_Name"}]}, "spec.podSets[0].name"),
        ({"podSets": [{"name": "a"}, {"name": "a"}]}, "spec.podSets[1].name"),
    ],
)
def test_invalid_specs_name_the_field(spec: dict[str, Any], path: str) -> None:
    with pytest.raises(ValidationError) as exc:
        plan_generic_dict(doc(spec))
    assert path in paths(exc), paths(exc)


def test_wrong_kind_is_refused() -> None:
    bad = doc({"podSets": [{"name": "a"}]}) | {"kind": "Other"}
    with pytest.raises(BuildError):
        plan_generic_dict(bad)
    with pytest.raises(ValidationError):
        GenericSpec.from_dict({"metadata": {}})


def test_names_longer_than_a_subdomain_are_rejected() -> None:
    spec = GenericSpec(
        name="x" * 200,
        groups=(GenericGroup(name="g" * 60, pod_sets=(GenericPodSet(name="p" * 60),)),),
    )
    with pytest.raises(ValidationError, match="at most 253"):
        plan_generic(spec)


def test_unknown_fields_inside_building_blocks_are_errors() -> None:
    bad = doc(
        {
            "podSets": [{"name": "a", "scheduling": {"schedulingPolicy": {"gang": {"minCnt": 2}}}}],
            "owner": {"apiVersion": "v1", "kind": "X", "name": "x", "uid": "u", "extra": 1},
        }
    )
    with pytest.raises(ValidationError) as exc:
        plan_generic_dict(bad)
    assert paths(exc) == {
        "spec.podSets[0].scheduling.schedulingPolicy.gang.minCnt",
        "spec.owner.extra",
    }


def test_pod_workload_annotation_must_match_when_present() -> None:
    plan = plan_generic_dict(doc({"podSets": [{"name": "a"}]}))
    mine = {"metadata": {"annotations": {POD_SET_ANNOTATION: "a-0", WORKLOAD_ANNOTATION: "op"}}}
    other = {"metadata": {"annotations": {POD_SET_ANNOTATION: "a-0", WORKLOAD_ANNOTATION: "x"}}}
    assert plan.pod_group_for(mine) == "op-a-0"
    assert plan.pod_group_for(other) is None


def test_planned_objects_are_checked_against_api_validation() -> None:
    deepest = GenericGroup(name="g4", pod_sets=(GenericPodSet(name="p"),))
    for i in (3, 2, 1, 0):
        deepest = GenericGroup(name=f"g{i}", groups=(deepest,))
    with pytest.raises(ValidationError, match="maximum template hierarchy depth is 4"):
        plan_generic(GenericSpec(name="deep", groups=(deepest,)))
