"""dict -> model -> dict is lossless for valid objects (hypothesis)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import composite_pod_groups, nearly_valid_objects, pod_groups, workloads

from workloadbuilder.api import (
    CodecError,
    GangSchedulingPolicy,
    JobSchedulingConfiguration,
    PodGroupTemplate,
    from_dict,
    object_from_dict,
    object_to_dict,
    to_dict,
)

objects = st.one_of(workloads(), pod_groups(with_priority=True), composite_pod_groups())


@settings(max_examples=150, deadline=None)
@given(objects)
def test_object_dict_roundtrip(obj: Any) -> None:
    doc = object_to_dict(obj)
    parsed = object_from_dict(doc)
    assert parsed == obj
    assert object_to_dict(parsed) == doc


@settings(max_examples=100, deadline=None)
@given(nearly_valid_objects())
def test_nearly_valid_objects_roundtrip(obj: Any) -> None:
    doc = object_to_dict(obj)
    assert object_to_dict(object_from_dict(doc)) == doc


@settings(max_examples=100, deadline=None)
@given(workloads(), st.sampled_from(("v1beta1", "v1alpha3")))
def test_workload_version_relabel_roundtrip(w: Any, version: str) -> None:
    doc = object_to_dict(w, api_version=version)
    assert doc["apiVersion"] == f"scheduling.k8s.io/{version}"
    assert object_to_dict(object_from_dict(doc), api_version=version) == doc


json_scalars = st.one_of(st.booleans(), st.integers(-5, 5), st.text(max_size=5), st.none())


@settings(max_examples=100, deadline=None)
@given(
    workloads(),
    st.dictionaries(st.sampled_from(("x-extra", "futureField")), json_scalars, min_size=1),
)
def test_unknown_fields_survive(w: Any, extra: dict[str, Any]) -> None:
    doc = object_to_dict(w)
    doc["spec"] = {**doc["spec"], **extra}
    doc["spec"][
        "podGroupTemplates" if "podGroupTemplates" in doc["spec"] else "compositePodGroupTemplates"
    ][0].update(extra)
    assert object_to_dict(object_from_dict(doc)) == doc


@given(
    st.fixed_dictionaries(
        {},
        optional={
            "schedulingPolicy": st.sampled_from(
                ({"basic": {}}, {"gang": {}}, {"gang": {"minCount": 3}})
            ),
            "disruptionMode": st.sampled_from(({"single": {}}, {"all": {}})),
            "schedulingConstraints": st.just({"topology": [{"key": "rack"}]}),
            "resourceClaims": st.just([{"name": "c", "resourceClaimTemplateName": "t"}]),
        },
    )
)
@settings(max_examples=50, deadline=None)
def test_job_scheduling_block_roundtrip(block: dict[str, Any]) -> None:
    assert to_dict(from_dict(block, JobSchedulingConfiguration)) == block


def test_output_follows_the_upstream_field_order() -> None:
    """Keys come out in the Go struct order of k8s.io/api, not the attrs declaration order."""
    ref = {"workloadName": "w", "templateName": "t"}
    gang = {"gang": {"minCount": 2}}
    workload = object_from_dict(
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "Workload",
            "metadata": {"name": "w"},
            "spec": {
                "controllerRef": {"name": "j", "kind": "Job", "apiGroup": "batch"},
                "podGroupTemplates": [{"name": "t", "schedulingPolicy": gang}],
            },
        }
    )
    assert list(object_to_dict(workload)["spec"]["controllerRef"]) == ["apiGroup", "kind", "name"]
    pod_group = object_from_dict(
        {
            "apiVersion": "scheduling.k8s.io/v1alpha3",
            "kind": "PodGroup",
            "spec": {
                "priority": 1,
                "schedulingPolicy": gang,
                "workloadRef": ref,
                "parentCompositePodGroupName": "p",
            },
        }
    )
    assert list(object_to_dict(pod_group)) == ["apiVersion", "kind", "metadata", "spec"]
    assert list(object_to_dict(pod_group)["spec"]) == [
        "parentCompositePodGroupName",
        "workloadRef",
        "schedulingPolicy",
        "priority",
    ]
    composite = object_from_dict(
        {
            "apiVersion": "scheduling.k8s.io/v1alpha3",
            "kind": "CompositePodGroup",
            "spec": {
                "schedulingPolicy": {"basic": {}},
                "workloadRef": ref,
                "parentCompositePodGroupName": "p",
            },
        }
    )
    assert list(object_to_dict(composite)["spec"]) == [
        "parentCompositePodGroupName",
        "workloadRef",
        "schedulingPolicy",
    ]


def test_unknown_fields_come_last_and_never_shadow_known_ones() -> None:
    doc = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "Workload",
        "zz": 1,
        "metadata": {"managedFields": [{"manager": "m"}], "name": "w"},
        "spec": {"podGroupTemplates": [{"name": "t", "schedulingPolicy": {"basic": {}}}]},
    }
    out = object_to_dict(object_from_dict(doc))
    assert list(out) == ["apiVersion", "kind", "metadata", "spec", "zz"]
    assert list(out["metadata"]) == ["name", "managedFields"]


def test_int32_fields_reject_numbers_the_server_cannot_decode() -> None:
    """minCount / minGroupCount / priority are Go int32: larger numbers are decode errors."""
    assert from_dict({"minCount": 2**31 - 1}, GangSchedulingPolicy).min_count == 2**31 - 1
    with pytest.raises(CodecError) as e:
        from_dict({"minCount": 2**31}, GangSchedulingPolicy)
    assert str(e.value) == "minCount: expected a 32-bit integer, got 2147483648"
    template = {"name": "t", "schedulingPolicy": {"basic": {}}, "priority": -(2**31) - 1}
    with pytest.raises(CodecError, match=r"^priority: expected a 32-bit integer"):
        from_dict(template, PodGroupTemplate)
    block = {"schedulingPolicy": {"gang": {"minCount": 10**20}}}
    with pytest.raises(CodecError, match=r"^schedulingPolicy\.gang\.minCount: expected a 32-bit"):
        from_dict(block, JobSchedulingConfiguration)
