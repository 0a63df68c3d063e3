"""Feature-gate behaviour: fields of disabled gates are dropped (or forbidden when in use)."""

from __future__ import annotations

from typing import Any

import attrs

from workloadbuilder.api import CompositePodGroup, PodGroup, Workload, from_dict
from workloadbuilder.validation import (
    FeatureGates,
    apply_defaults,
    drop_disabled_fields,
    is_served,
    validate_composite_pod_group,
    validate_pod_group,
    validate_workload,
)

META = {"name": "x", "namespace": "default", "uid": "u", "resourceVersion": "1"}
OFF = FeatureGates(
    topology_aware_workload_scheduling=False,
    composite_pod_group=False,
    pod_group_preemption_policy=False,
    dra_workload_resource_claims=False,
    workload_with_job=False,
)


def template(**extra: Any) -> dict[str, Any]:
    return {"name": "a", "schedulingPolicy": {"basic": {}}, **extra}


GATED_TEMPLATE = template(
    schedulingConstraints={"topology": [{"key": "rack"}]},
    resourceClaims=[{"name": "c", "resourceClaimName": "r"}],
    preemptionPolicy="Never",
)


def workload(spec: dict[str, Any]) -> Workload:
    return from_dict({"metadata": META, "spec": spec}, Workload)


def test_gated_template_fields_are_dropped_when_off() -> None:
    w = workload({"podGroupTemplates": [GATED_TEMPLATE]})
    stored = drop_disabled_fields(w, gates=OFF)
    assert isinstance(stored, Workload)
    t = stored.spec.pod_group_templates[0]
    assert (t.scheduling_constraints, t.resource_claims, t.preemption_policy) == (None, (), None)
    assert validate_workload(w, gates=OFF) == []
    # with the gates on nothing is dropped
    assert drop_disabled_fields(w) == w


def test_gated_fields_kept_when_the_old_object_uses_them() -> None:
    old = workload({"podGroupTemplates": [GATED_TEMPLATE]})
    assert drop_disabled_fields(old, old, gates=OFF) == old
    assert validate_workload(old, old, gates=OFF) == []
    changed = workload(
        {
            "podGroupTemplates": [
                {**GATED_TEMPLATE, "schedulingConstraints": {"topology": [{"key": "zone"}]}}
            ]
        }
    )
    assert [str(e) for e in validate_workload(changed, old, gates=OFF)] == [
        "spec.podGroupTemplates[0].schedulingConstraints: Forbidden",
        "spec.podGroupTemplates[0].schedulingConstraints: Invalid value: null: field is immutable",
    ]


def test_composite_templates_dropped_without_the_gate() -> None:
    spec = {
        "compositePodGroupTemplates": [
            {"name": "c", "schedulingPolicy": {"basic": {}}, "podGroupTemplates": [template()]}
        ]
    }
    w = workload(spec)
    assert validate_workload(w) == []
    assert [str(e) for e in validate_workload(w, gates=OFF)] == [
        'spec: Invalid value: "": must specify one of: `podGroupTemplates`, '
        "`compositePodGroupTemplates`"
    ]


def test_pod_group_gated_fields() -> None:
    spec = {
        "schedulingPolicy": {"basic": {}},
        "workloadRef": {"workloadName": "w", "templateName": "t"},
        "parentCompositePodGroupName": "p",
        "schedulingConstraints": {"topology": [{"key": "rack"}]},
        "resourceClaims": [{"name": "c", "resourceClaimName": "r"}],
        "preemptionPolicy": "Never",
    }
    pg = from_dict({"metadata": META, "spec": spec}, PodGroup)
    stored = drop_disabled_fields(pg, gates=OFF)
    assert isinstance(stored, PodGroup)
    s = stored.spec
    assert (
        s.parent_composite_pod_group_name,
        s.scheduling_constraints,
        s.resource_claims,
        s.preemption_policy,
    ) == (
        None,
        None,
        (),
        None,
    )
    assert validate_pod_group(pg, gates=OFF) == []
    # the PodGroup's parent-without-workloadRef rule only applies when the field survives
    orphan = attrs.evolve(pg, spec=attrs.evolve(pg.spec, workload_ref=None))
    assert validate_pod_group(orphan, gates=OFF) == []
    assert len(validate_pod_group(orphan)) == 1


def test_defaults() -> None:
    pg = from_dict({"metadata": META, "spec": {"schedulingPolicy": {"basic": {}}}}, PodGroup)
    on = apply_defaults(pg)
    assert isinstance(on, PodGroup)
    assert on.spec.disruption_mode is not None and on.spec.disruption_mode.single is not None
    assert on.spec.preemption_policy == "PreemptLowerPriority"
    off = apply_defaults(pg, gates=OFF)
    assert isinstance(off, PodGroup)
    assert off.spec.preemption_policy is None


def test_composite_pod_group_preemption_policy_gate() -> None:
    cpg = from_dict(
        {
            "metadata": META,
            "spec": {
                "workloadRef": {"workloadName": "w", "templateName": "t"},
                "schedulingPolicy": {"basic": {}},
                "preemptionPolicy": "Never",
            },
        },
        CompositePodGroup,
    )
    stored = drop_disabled_fields(cpg, gates=OFF)
    assert isinstance(stored, CompositePodGroup)
    assert stored.spec.preemption_policy is None
    assert validate_composite_pod_group(cpg, gates=OFF) == []
    changed = attrs.evolve(
        cpg, spec=attrs.evolve(cpg.spec, preemption_policy="PreemptLowerPriority")
    )
    assert [str(e) for e in validate_composite_pod_group(changed, cpg, gates=OFF)] == [
        "spec.preemptionPolicy: Forbidden",
        "spec.preemptionPolicy: Invalid value: null: field is immutable",
    ]


def test_is_served() -> None:
    assert is_served("Workload", FeatureGates())
    assert not is_served("PodGroup", FeatureGates(generic_workload=False))
    assert not is_served("CompositePodGroup", OFF)
    assert is_served("Job", OFF)
