"""Update (immutability) rules for Workload, PodGroup and CompositePodGroup."""

from __future__ import annotations

from typing import Any

import attrs

from workloadbuilder.api import (
    CompositePodGroup,
    GangSchedulingPolicy,
    PodGroup,
    PodGroupSchedulingPolicy,
    Workload,
    from_dict,
)
from workloadbuilder.validation import (
    validate_composite_pod_group,
    validate_pod_group,
    validate_workload,
)

META = {"name": "x", "namespace": "default", "uid": "u1", "resourceVersion": "7"}


def workload(spec: dict[str, Any], **meta: Any) -> Workload:
    return from_dict({"metadata": {**META, **meta}, "spec": spec}, Workload)


def pgt(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "schedulingPolicy": {"gang": {"minCount": 2}}, **extra}


def w_errors(new: Workload, old: Workload) -> list[str]:
    return [str(e) for e in validate_workload(new, old)]


def test_unchanged_workload_update_is_valid() -> None:
    w = workload({"podGroupTemplates": [pgt("a")]})
    assert validate_workload(w, w) == []


def test_workload_gang_min_count_is_mutable() -> None:
    old = workload({"podGroupTemplates": [pgt("a"), pgt("b")]})
    new = workload(
        {"podGroupTemplates": [pgt("a"), pgt("b", schedulingPolicy={"gang": {"minCount": 9}})]}
    )
    assert w_errors(new, old) == []
    zero = workload(
        {"podGroupTemplates": [pgt("a", schedulingPolicy={"gang": {"minCount": 0}}), pgt("b")]}
    )
    assert w_errors(zero, old) == [
        "spec.podGroupTemplates[0].schedulingPolicy.gang.minCount: Required value"
    ]


def test_workload_templates_cannot_be_added_or_removed() -> None:
    old = workload({"podGroupTemplates": [pgt("a"), pgt("b")]})
    added = workload({"podGroupTemplates": [pgt("a"), pgt("b"), pgt("c")]})
    assert w_errors(added, old) == ["spec.podGroupTemplates[2]: Forbidden: item may not be added"]
    removed = workload({"podGroupTemplates": [pgt("a")]})
    assert w_errors(removed, old) == ["spec.podGroupTemplates: Forbidden: item may not be removed"]
    renamed = workload({"podGroupTemplates": [pgt("a"), pgt("z")]})
    assert w_errors(renamed, old) == [
        "spec.podGroupTemplates[1]: Forbidden: item may not be added",
        "spec.podGroupTemplates: Forbidden: item may not be removed",
    ]


def test_workload_template_fields_are_immutable() -> None:
    old = workload({"podGroupTemplates": [pgt("a", priority=1)]})
    cases = {
        "priority": (
            pgt("a", priority=2),
            "spec.podGroupTemplates[0].priority: Invalid value: null: field is immutable",
        ),
        "disruption": (
            pgt("a", priority=1, disruptionMode={"all": {}}),
            "spec.podGroupTemplates[0].disruptionMode: Invalid value: null: field is immutable",
        ),
        "class": (
            pgt("a", priority=1, priorityClassName="hi"),
            "spec.podGroupTemplates[0].priorityClassName: Invalid value: null: field is immutable",
        ),
        "constraints": (
            pgt("a", priority=1, schedulingConstraints={"topology": [{"key": "rack"}]}),
            "spec.podGroupTemplates[0].schedulingConstraints: Invalid value: null: field is "
            "immutable",
        ),
        "claims": (
            pgt("a", priority=1, resourceClaims=[{"name": "c", "resourceClaimName": "r"}]),
            "spec.podGroupTemplates[0].resourceClaims: Invalid value: null: field is immutable",
        ),
        "preemption": (
            pgt("a", priority=1, preemptionPolicy="Never"),
            "spec.podGroupTemplates[0].preemptionPolicy: Invalid value: null: field is immutable",
        ),
    }
    for template, expected in cases.values():
        assert w_errors(workload({"podGroupTemplates": [template]}), old) == [expected]


def test_workload_policy_variant_cannot_switch() -> None:
    old = workload({"podGroupTemplates": [pgt("a")]})
    basic = workload({"podGroupTemplates": [pgt("a", schedulingPolicy={"basic": {}})]})
    assert w_errors(basic, old) == [
        "spec.podGroupTemplates[0].schedulingPolicy.basic: Invalid value: null: field is immutable",
        "spec.podGroupTemplates[0].schedulingPolicy.gang: Invalid value: null: field cannot be "
        "cleared once set",
    ]
    assert w_errors(old, basic) == [
        "spec.podGroupTemplates[0].schedulingPolicy.basic: Invalid value: null: field is immutable",
        "spec.podGroupTemplates[0].schedulingPolicy.gang: Invalid value: null: field cannot be "
        "set once created",
    ]


def test_workload_metadata_name_and_controller_ref_immutable() -> None:
    old = workload({"podGroupTemplates": [pgt("a")], "controllerRef": {"kind": "Job", "name": "j"}})
    renamed = attrs.evolve(old, metadata=attrs.evolve(old.metadata, name="y"))
    assert w_errors(renamed, old) == ['metadata.name: Invalid value: "y": field is immutable']
    other_uid = attrs.evolve(old, metadata=attrs.evolve(old.metadata, uid="u2"))
    assert w_errors(other_uid, old) == ['metadata.uid: Invalid value: "u2": field is immutable']
    # an unset uid is filled in from the stored object, as rest.BeforeUpdate does
    assert w_errors(attrs.evolve(old, metadata=attrs.evolve(old.metadata, uid=None)), old) == []
    ref = workload({"podGroupTemplates": [pgt("a")], "controllerRef": {"kind": "Job", "name": "k"}})
    assert w_errors(ref, old) == ["spec.controllerRef: Invalid value: null: field is immutable"]


def test_composite_templates_update() -> None:
    def tree(min_group_count: int, leaf_count: int, extra: bool = False) -> Workload:
        leaves = [pgt("a", schedulingPolicy={"gang": {"minCount": leaf_count}})]
        if extra:
            leaves.append(pgt("b"))
        return workload(
            {
                "compositePodGroupTemplates": [
                    {
                        "name": "c",
                        "schedulingPolicy": {"gang": {"minGroupCount": min_group_count}},
                        "podGroupTemplates": leaves,
                    }
                ]
            }
        )

    old = tree(1, 2)
    # minCount of nested leaves and minGroupCount of composite templates carry no immutability tag
    assert w_errors(tree(1, 5), old) == []
    assert w_errors(tree(2, 2), old) == []
    assert w_errors(tree(1, 2, extra=True), old) == [
        "spec.compositePodGroupTemplates[0].podGroupTemplates[1]: Forbidden: item may not be added"
    ]


def pod_group(spec: dict[str, Any], **meta: Any) -> PodGroup:
    return from_dict({"metadata": {**META, **meta}, "spec": spec}, PodGroup)


def test_pod_group_min_count_mutable_everything_else_immutable() -> None:
    old = pod_group(
        {
            "schedulingPolicy": {"gang": {"minCount": 4}},
            "workloadRef": {"workloadName": "w", "templateName": "t"},
        }
    )
    policy = PodGroupSchedulingPolicy(gang=GangSchedulingPolicy(min_count=8))
    grown = attrs.evolve(old, spec=attrs.evolve(old.spec, scheduling_policy=policy))
    assert validate_pod_group(grown, old) == []
    cases: dict[str, dict[str, Any]] = {
        "workloadRef": {"workloadRef": {"workloadName": "w2", "templateName": "t"}},
        "disruptionMode": {"disruptionMode": {"all": {}}},
        "priority": {"priority": 3},
        "priorityClassName": {"priorityClassName": "x"},
        "preemptionPolicy": {"preemptionPolicy": "Never"},
        "resourceClaims": {"resourceClaims": [{"name": "c", "resourceClaimName": "r"}]},
        "schedulingConstraints": {"schedulingConstraints": {"topology": [{"key": "rack"}]}},
        "parentCompositePodGroupName": {"parentCompositePodGroupName": "p"},
    }
    base: dict[str, Any] = {
        "schedulingPolicy": {"gang": {"minCount": 4}},
        "workloadRef": {"workloadName": "w", "templateName": "t"},
    }
    for field, change in cases.items():
        errs = [str(e) for e in validate_pod_group(pod_group({**base, **change}), old)]
        assert errs == [f"spec.{field}: Invalid value: null: field is immutable"], field


def test_pod_group_gang_cannot_be_unset() -> None:
    old = pod_group({"schedulingPolicy": {"gang": {"minCount": 4}}})
    new = pod_group({"schedulingPolicy": {"basic": {}}})
    assert [str(e) for e in validate_pod_group(new, old)] == [
        "spec.schedulingPolicy.basic: Invalid value: null: field is immutable",
        "spec.schedulingPolicy.gang: Invalid value: null: field cannot be cleared once set",
    ]


def test_pod_group_update_does_not_recheck_parent_dependency() -> None:
    # the hand-written workloadRef check runs on create only; the declarative one is alpha
    spec = {"schedulingPolicy": {"basic": {}}, "parentCompositePodGroupName": "p"}
    pg = pod_group(spec)
    assert validate_pod_group(pg, pg) == []


def test_composite_pod_group_policy_fully_immutable() -> None:
    def cpg(count: int) -> CompositePodGroup:
        return from_dict(
            {
                "metadata": META,
                "spec": {
                    "workloadRef": {"workloadName": "w", "templateName": "t"},
                    "schedulingPolicy": {"gang": {"minGroupCount": count}},
                },
            },
            CompositePodGroup,
        )

    assert validate_composite_pod_group(cpg(2), cpg(2)) == []
    assert [str(e) for e in validate_composite_pod_group(cpg(3), cpg(2))] == [
        "spec.schedulingPolicy: Invalid value: null: field is immutable"
    ]
