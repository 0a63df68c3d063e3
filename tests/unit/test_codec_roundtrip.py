"""dict -> model -> dict is lossless for valid objects (hypothesis)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import composite_pod_groups, nearly_valid_objects, pod_groups, workloads

from workloadbuilder.api import (
    JobSchedulingConfiguration,
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
