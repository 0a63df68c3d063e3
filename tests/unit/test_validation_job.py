"""``Job.spec.scheduling`` validation (batch/v1, kube-apiserver v1.37.2)."""

from __future__ import annotations

import copy
from typing import Any

from workloadbuilder.validation import FeatureGates, validate_job_scheduling


def job(scheduling: dict[str, Any] | None, parallelism: int | None = 4) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if scheduling is not None:
        spec["scheduling"] = scheduling
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": spec}


def errs(new: dict[str, Any], old: dict[str, Any] | None = None, **kw: Any) -> list[str]:
    return [str(e) for e in validate_job_scheduling(new, old, **kw)]


def gang(min_count: int | None = None) -> dict[str, Any]:
    return {"schedulingPolicy": {"gang": {} if min_count is None else {"minCount": min_count}}}


def test_no_scheduling_is_valid() -> None:
    assert errs(job(None)) == []


def test_min_count_at_most_parallelism() -> None:
    assert errs(job(gang(4))) == []
    assert errs(job(gang())) == []  # defaults to parallelism
    assert errs(job(gang(5))) == [
        "spec.scheduling.schedulingPolicy.gang.minCount: Invalid value: 5: must not be greater "
        "than "
        "parallelism (4)"
    ]
    # parallelism defaults to 1
    assert errs(job(gang(2), parallelism=None)) == [
        "spec.scheduling.schedulingPolicy.gang.minCount: Invalid value: 2: must not be greater "
        "than "
        "parallelism (1)"
    ]


def test_min_count_minimum() -> None:
    assert errs(job(gang(0))) == [
        "spec.scheduling.schedulingPolicy.gang.minCount: Invalid value: 0: must be greater than "
        "or equal to 1"
    ]


def test_policy_union() -> None:
    assert errs(job({"schedulingPolicy": {"basic": {}}})) == []
    assert errs(job({"schedulingPolicy": {}})) == [
        'spec.scheduling.schedulingPolicy: Invalid value: "": must specify one of: `basic`, `gang`'
    ]
    assert errs(job({"schedulingPolicy": {"basic": {}, "gang": {}}})) == [
        'spec.scheduling.schedulingPolicy: Invalid value: "{basic, gang}": must specify exactly '
        "one "
        "of: `basic`, `gang`"
    ]


def test_all_disruption_requires_gang() -> None:
    assert errs(job({**gang(2), "disruptionMode": {"all": {}}})) == []
    expected = (
        'spec.scheduling.disruptionMode: Invalid value: "": the disruptionMode `all` is not '
        "supported with the Basic scheduling policy"
    )
    assert errs(job({"disruptionMode": {"all": {}}})) == [expected]  # policy defaults to basic
    assert errs(job({"schedulingPolicy": {"basic": {}}, "disruptionMode": {"all": {}}})) == [
        expected
    ]


def test_building_block_rules() -> None:
    assert errs(job({"schedulingConstraints": {"topology": [{"key": "a"}, {"key": "b"}]}})) == [
        "spec.scheduling.schedulingConstraints.topology: Too many: 2: must have at most 1 item"
    ]
    claims = [{"name": f"c{i}", "resourceClaimName": "r"} for i in range(5)]
    assert errs(job({"resourceClaims": claims})) == [
        "spec.scheduling.resourceClaims: Too many: 5: must have at most 4 items"
    ]
    assert errs(job({"resourceClaims": [{"name": "c"}]})) == [
        'spec.scheduling.resourceClaims[0]: Invalid value: "": must specify one of: '
        "`resourceClaimName`, `resourceClaimTemplateName`"
    ]
    assert errs(job({"disruptionMode": {}})) == [
        'spec.scheduling.disruptionMode: Invalid value: "": must specify one of: `single`, `all`'
    ]


def test_only_min_count_is_mutable() -> None:
    old = job(gang(2))
    assert errs(job(gang(3)), old) == []
    assert errs(job({**gang(2), "disruptionMode": {"single": {}}}), old) == [
        "spec.scheduling.disruptionMode: Invalid value: null: field is immutable"
    ]
    assert errs(
        job({**gang(2), "schedulingConstraints": {"topology": [{"key": "rack"}]}}), old
    ) == ["spec.scheduling.schedulingConstraints: Invalid value: null: field is immutable"]


def test_basic_gang_switch_rejected() -> None:
    old = job(gang(2))
    assert errs(job({"schedulingPolicy": {"basic": {}}}), old) == [
        "spec.scheduling.schedulingPolicy: Invalid value: null: the basic/gang policy variant is "
        "immutable after creation; only schedulingPolicy.gang.minCount may be updated"
    ]


def test_scheduling_cannot_be_added_or_removed() -> None:
    assert errs(job(gang(2)), job(None)) == [
        "spec.scheduling: Invalid value: null: field cannot be set once created"
    ]
    assert errs(job(None), job(gang(2))) == [
        "spec.scheduling: Invalid value: null: field cannot be cleared once set"
    ]
    assert errs(
        job({"disruptionMode": {"single": {}}}), job({**gang(2), "disruptionMode": {"single": {}}})
    ) == ["spec.scheduling.schedulingPolicy: Invalid value: null: field cannot be cleared once set"]


def test_gate_off_drops_or_forbids() -> None:
    off = FeatureGates(workload_with_job=False)
    assert errs(job(gang(99)), gates=off) == []  # dropped before validation
    old = job(gang(2))
    assert errs(copy.deepcopy(old), old, gates=off) == []
    assert errs(job(gang(3)), old, gates=off) == ["spec.scheduling: Forbidden"]


def test_wrong_shape_is_reported() -> None:
    assert errs(job({"schedulingPolicy": {"gang": {"minCount": "x"}}})) == [
        "spec.scheduling.schedulingPolicy.gang.minCount: Invalid value: expected an integer, got "
        "'x'"
    ]
