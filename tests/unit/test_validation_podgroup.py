"""PodGroup and CompositePodGroup create validation (kube-apiserver v1.37.2 wording)."""

from __future__ import annotations

from typing import Any

import pytest

from workloadbuilder.api import CompositePodGroup, PodGroup, Workload, from_dict, object_from_dict
from workloadbuilder.validation import (
    validate_composite_pod_group,
    validate_object,
    validate_pod_group,
)


def pod_group(spec: dict[str, Any] | None = None, **meta: Any) -> PodGroup:
    metadata = {"name": "pg", "namespace": "default", **meta}
    return from_dict(
        {
            "metadata": {k: v for k, v in metadata.items() if v is not None},
            "spec": spec or {"schedulingPolicy": {"basic": {}}},
        },
        PodGroup,
    )


def cpg(spec: dict[str, Any] | None = None, **meta: Any) -> CompositePodGroup:
    base = {
        "workloadRef": {"workloadName": "w", "templateName": "t"},
        "schedulingPolicy": {"gang": {"minGroupCount": 2}},
    }
    metadata = {"name": "cpg", "namespace": "default", **meta}
    return from_dict(
        {
            "metadata": {k: v for k, v in metadata.items() if v is not None},
            "spec": {**base, **(spec or {})},
        },
        CompositePodGroup,
    )


def pg_errors(spec: dict[str, Any], **meta: Any) -> list[str]:
    return [str(e) for e in validate_pod_group(pod_group(spec, **meta))]


def cpg_errors(spec: dict[str, Any], **meta: Any) -> list[str]:
    return [str(e) for e in validate_composite_pod_group(cpg(spec, **meta))]


GANG = {"gang": {"minCount": 3}}


def test_valid_pod_group() -> None:
    assert validate_pod_group(pod_group()) == []
    full = {
        "schedulingPolicy": GANG,
        "workloadRef": {"workloadName": "w.x", "templateName": "t"},
        "parentCompositePodGroupName": "parent",
        "schedulingConstraints": {"topology": [{"key": "kubernetes.io/hostname"}]},
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}],
        "disruptionMode": {"all": {}},
        "priorityClassName": "high",
        "priority": 10,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    assert pg_errors(full) == []


def test_pod_group_name_and_namespace() -> None:
    assert pg_errors({"schedulingPolicy": GANG}, name="a.b") == []
    errs = validate_pod_group(pod_group(name="Bad"))
    assert [(e.path, e.type) for e in errs] == [("metadata.name", "Invalid value")]
    assert pg_errors({"schedulingPolicy": GANG}, namespace=None) == [
        "metadata.namespace: Required value"
    ]


def test_parent_requires_workload_ref() -> None:
    spec = {"schedulingPolicy": GANG, "parentCompositePodGroupName": "parent"}
    assert pg_errors(spec) == [
        "spec.workloadRef: Required value: must be set when parentCompositePodGroupName is set"
    ]
    spec["workloadRef"] = {"workloadName": "w", "templateName": "t"}
    assert pg_errors(spec) == []


def test_pod_group_parent_name_format() -> None:
    spec = {
        "schedulingPolicy": GANG,
        "parentCompositePodGroupName": "Bad_Parent",
        "workloadRef": {"workloadName": "w", "templateName": "t"},
    }
    errs = validate_pod_group(pod_group(spec))
    assert [(e.path, e.type) for e in errs] == [
        ("spec.parentCompositePodGroupName", "Invalid value")
    ]


def test_workload_reference() -> None:
    spec = {"schedulingPolicy": GANG, "workloadRef": {"workloadName": "", "templateName": "a.b"}}
    assert pg_errors(spec) == [
        "spec.workloadRef.workloadName: Required value",
        'spec.workloadRef.templateName: Invalid value: "a.b": must not contain dots',
    ]


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        (
            "schedulingPolicy",
            {},
            'spec.schedulingPolicy: Invalid value: "": must specify one of: `basic`, `gang`',
        ),
        (
            "schedulingPolicy",
            {"gang": {"minCount": 0}},
            "spec.schedulingPolicy.gang.minCount: Required value",
        ),
        (
            "disruptionMode",
            {},
            'spec.disruptionMode: Invalid value: "": must specify one of: `single`, `all`',
        ),
        (
            "schedulingConstraints",
            {"topology": [{"key": "a"}, {"key": "b"}]},
            "spec.schedulingConstraints.topology: Too many: 2: must have at most 1 item",
        ),
        (
            "resourceClaims",
            [{"name": f"c{i}", "resourceClaimName": "x"} for i in range(5)],
            "spec.resourceClaims: Too many: 5: must have at most 4 items",
        ),
        (
            "priority",
            2_000_000_000,
            "spec.priority: Invalid value: 2000000000: must be less than or equal to 1000000000",
        ),
        (
            "preemptionPolicy",
            "Sometimes",
            'spec.preemptionPolicy: Unsupported value: "Sometimes": supported values: "Never", '
            '"PreemptLowerPriority"',
        ),
    ],
)
def test_pod_group_spec_rules(field: str, value: Any, expected: str) -> None:
    assert pg_errors(
        {"schedulingPolicy": GANG, field: value} if field != "schedulingPolicy" else {field: value}
    ) == [expected]


def test_pod_group_disruption_mode_defaults_to_single() -> None:
    # the server defaults spec.disruptionMode before the +required check runs
    assert validate_pod_group(pod_group({"schedulingPolicy": GANG})) == []


def test_valid_composite_pod_group() -> None:
    assert validate_composite_pod_group(cpg()) == []
    full = {
        "parentCompositePodGroupName": "root",
        "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/zone"}]},
        "disruptionMode": {"all": {}},
        "priorityClassName": "p",
        "priority": 1,
        "preemptionPolicy": "Never",
    }
    assert cpg_errors(full) == []


def test_composite_pod_group_rules() -> None:
    assert cpg_errors({"schedulingPolicy": {"gang": {"minGroupCount": -1}}}) == [
        "spec.schedulingPolicy.gang.minGroupCount: Invalid value: -1: must be greater than or "
        "equal to 1"
    ]
    assert cpg_errors({"schedulingPolicy": {"basic": {}, "gang": {"minGroupCount": 1}}}) == [
        'spec.schedulingPolicy: Invalid value: "{basic, gang}": must specify exactly one of: '
        "`basic`, `gang`"
    ]
    assert cpg_errors({"workloadRef": {"workloadName": "w", "templateName": ""}}) == [
        "spec.workloadRef.templateName: Required value"
    ]
    assert cpg_errors({"schedulingConstraints": {"topology": [{"key": "a b"}]}})[0].startswith(
        'spec.schedulingConstraints.topology[0].key: Invalid value: "a b": name part must consist'
    )
    assert cpg_errors({"disruptionMode": {"single": {}, "all": {}}}) == [
        'spec.disruptionMode: Invalid value: "{single, all}": must specify exactly one of: '
        "`single`, `all`"
    ]
    errs = validate_composite_pod_group(cpg({"parentCompositePodGroupName": "Bad"}))
    assert [(e.path, e.type) for e in errs] == [
        ("spec.parentCompositePodGroupName", "Invalid value")
    ]
    errs = validate_composite_pod_group(cpg(name="Bad"))
    assert [(e.path, e.type) for e in errs] == [("metadata.name", "Invalid value")]


def test_validate_object_dispatches() -> None:
    doc = {
        "apiVersion": "scheduling.k8s.io/v1alpha3",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {"podGroupTemplates": [{"name": "a", "schedulingPolicy": {"basic": {}}}]},
    }
    w = object_from_dict(doc)
    assert isinstance(w, Workload)
    assert validate_object(w) == []
    assert validate_object(pod_group()) == []
    assert validate_object(cpg()) == []
    with pytest.raises(TypeError):
        validate_object(pod_group(), cpg())
