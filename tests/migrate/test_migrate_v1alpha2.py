"""Kubernetes 1.36 scheduling.k8s.io/v1alpha2 -> v1beta1."""

from __future__ import annotations

from typing import Any

import pytest
from _objects import by_kind, outcomes, pod

from workloadbuilder.migrate import MigrationError, migrate

V1A2 = "scheduling.k8s.io/v1alpha2"


def _workload(**template: Any) -> dict[str, Any]:
    tmpl = {"name": "t", "schedulingPolicy": {"gang": {"minCount": 2}}, **template}
    return {
        "apiVersion": V1A2,
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns", "uid": "x", "resourceVersion": "9"},
        "spec": {
            "controllerRef": {"kind": "Trainer", "name": "t", "apiGroup": "ex.com"},
            "podGroupTemplates": [tmpl],
        },
    }


def _pod_group(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": V1A2,
        "kind": "PodGroup",
        "metadata": {"name": "w-t", "namespace": "ns"},
        "spec": {
            "podGroupTemplateRef": {"workload": {"workloadName": "w", "podGroupTemplateName": "t"}},
            "schedulingPolicy": {"gang": {"minCount": 2}},
            **spec,
        },
        "status": {"conditions": [{"type": "PodGroupScheduled", "status": "True"}]},
    }


def test_workload_and_pod_group_are_converted_field_by_field() -> None:
    member = pod("p", spec={"schedulingGroup": {"podGroupName": "w-t"}})
    result = migrate(
        [_workload(disruptionMode="PodGroup"), _pod_group(disruptionMode="Pod"), member]
    )
    (wl,) = by_kind(result.objects, "Workload")
    assert wl["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert wl["metadata"] == {"name": "w", "namespace": "ns"}  # server fields gone
    assert wl["spec"]["controllerRef"] == {"apiGroup": "ex.com", "kind": "Trainer", "name": "t"}
    assert wl["spec"]["podGroupTemplates"][0]["disruptionMode"] == {"all": {}}
    (pg,) = by_kind(result.objects, "PodGroup")
    assert pg["spec"]["workloadRef"] == {"workloadName": "w", "templateName": "t"}
    assert pg["spec"]["disruptionMode"] == {"single": {}}
    assert "status" not in pg and "podGroupTemplateRef" not in pg["spec"]
    assert by_kind(result.objects, "Pod") == [member]  # already joins with schedulingGroup
    report = outcomes(result.report)
    assert report["spec.podGroupTemplateRef"] == "mapped"
    assert report["status"] == "approximated"
    assert not result.lossy
    assert [o["kind"] for o in result.objects] == ["Workload", "PodGroup", "Pod"]


def test_a_priority_next_to_its_class_is_left_to_admission() -> None:
    result = migrate([_pod_group(priorityClassName="high", priority=1000)])
    (pg,) = by_kind(result.objects, "PodGroup")
    assert pg["spec"]["priorityClassName"] == "high" and "priority" not in pg["spec"]
    assert outcomes(result.report)["spec.priority"] == "approximated"


def test_an_unknown_disruption_mode_or_field_is_refused_with_its_path() -> None:
    with pytest.raises(MigrationError, match="Unsupported value") as e:
        migrate([_workload(disruptionMode="Everything")])
    assert e.value.path == "spec.podGroupTemplates[0].disruptionMode"
    with pytest.raises(MigrationError, match="not a v1alpha2 field") as e:
        migrate([_pod_group(surprise=True)])
    assert e.value.path == "spec.surprise"


def test_what_v1beta1_refuses_is_refused_with_the_servers_message() -> None:
    with pytest.raises(MigrationError, match="minCount"):
        migrate([_pod_group(schedulingPolicy={"gang": {"minCount": 0}})])


def test_v1alpha1_and_unknown_versions_are_refused() -> None:
    for version in ("scheduling.k8s.io/v1alpha1", "scheduling.k8s.io/v2"):
        old = _workload()
        old["apiVersion"] = version
        with pytest.raises(MigrationError, match="unknown apiVersion") as e:
            migrate([old], origins=["old.yaml document 1"])
        assert str(e.value).startswith("old.yaml document 1: apiVersion: unknown apiVersion")


def test_current_objects_pass_through() -> None:
    current = _pod_group()
    current["apiVersion"] = "scheduling.k8s.io/v1beta1"
    result = migrate([current])
    assert result.objects == (current,) and result.report == ()
