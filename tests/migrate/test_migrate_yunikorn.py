"""Apache YuniKorn task groups -> v1.37 objects."""

from __future__ import annotations

import json

import pytest
from _objects import by_kind, job, outcomes, pod, template

from workloadbuilder.migrate import MigrationError, migrate

GROUPS = "yunikorn.apache.org/task-groups"
NAME = "yunikorn.apache.org/task-group-name"
POLICY = "yunikorn.apache.org/schedulingPolicyParameters"
TG = f"metadata.annotations[{GROUPS}]"
POLICY_PATH = f"metadata.annotations[{POLICY}]"


def _driver(
    groups: list[dict[str, object]], policy: str | None = None, **extra: str
) -> dict[str, object]:
    notes = {NAME: "driver", GROUPS: json.dumps(groups), **extra}
    if policy is not None:
        notes[POLICY] = policy
    return pod(
        "driver",
        labels={"applicationId": "app"},
        annotations=notes,
        spec={"schedulerName": "yunikorn"},
    )


def _executors(task: str = "exec") -> dict[str, object]:
    return job("ex", template(labels={"applicationId": "app"}, annotations={NAME: task}), 2)


TWO = [
    {"name": "driver", "minMember": 1, "minResource": {"cpu": "1"}},
    {"name": "exec", "minMember": 2, "nodeSelector": {"pool": "x"}},
]


def test_task_groups_become_a_composite_pod_group_hard_style_is_mapped() -> None:
    result = migrate(
        [_driver(TWO, "placeholderTimeoutInSeconds=30 gangSchedulingStyle=Hard"), _executors()]
    )
    (cpg,) = by_kind(result.objects, "CompositePodGroup")
    assert cpg["metadata"]["name"] == "app"
    assert cpg["spec"]["schedulingPolicy"] == {"gang": {"minGroupCount": 2}}
    pgs = {
        p["metadata"]["name"]: p["spec"]["schedulingPolicy"]
        for p in by_kind(result.objects, "PodGroup")
    }
    assert pgs == {"app-driver": {"gang": {"minCount": 1}}, "app-exec": {"gang": {"minCount": 2}}}
    (drv,) = by_kind(result.objects, "Pod")
    assert drv["spec"]["schedulingGroup"] == {"podGroupName": "app-driver"}
    assert GROUPS not in drv["metadata"].get("annotations", {})
    (ex,) = by_kind(result.objects, "Job")
    assert ex["spec"]["template"]["spec"]["schedulingGroup"] == {"podGroupName": "app-exec"}
    report = outcomes(result.report)
    assert report[f"{POLICY_PATH} gangSchedulingStyle"] == "mapped"
    assert report[f"{POLICY_PATH} placeholderTimeoutInSeconds"] == "not-expressible"
    assert report[f"{TG}[0].minResource"] == "not-expressible"
    assert report[f"{TG}[1].nodeSelector"] == "approximated"
    assert result.lossy


def test_soft_style_and_its_default_are_approximated() -> None:
    for policy in (None, "gangSchedulingStyle=Soft"):
        result = migrate([_driver(TWO, policy), _executors()])
        assert outcomes(result.report)[f"{POLICY_PATH} gangSchedulingStyle"] == "approximated"


def test_one_task_group_is_a_flat_gang() -> None:
    groups = [{"name": "driver", "minMember": 1}]
    result = migrate([_driver(groups, "gangSchedulingStyle=Hard")])
    assert by_kind(result.objects, "CompositePodGroup") == []
    (pg,) = by_kind(result.objects, "PodGroup")
    assert pg["metadata"]["name"] == "app" and pg["spec"]["schedulingPolicy"] == {
        "gang": {"minCount": 1}
    }


def test_a_task_group_name_that_is_not_declared_is_half_linked() -> None:
    with pytest.raises(MigrationError, match="half-linked"):
        migrate([_driver(TWO), _executors("nope")])


def test_an_application_without_declared_task_groups_is_half_linked() -> None:
    with pytest.raises(MigrationError, match=r"declares yunikorn\.apache\.org/task-groups"):
        migrate([_executors()])


def test_a_task_group_pod_without_an_application_id_is_half_linked() -> None:
    lone = pod("p", annotations={NAME: "driver"})
    with pytest.raises(MigrationError, match="without an application id"):
        migrate([lone])


def test_pods_declaring_different_task_groups_conflict() -> None:
    other = _driver([{"name": "driver", "minMember": 3}])
    other["metadata"]["name"] = "driver-2"
    with pytest.raises(MigrationError, match="conflicting quorums"):
        migrate([_driver(TWO), other])


def test_bad_task_groups_json_names_the_field() -> None:
    bad = pod("p", labels={"applicationId": "a"}, annotations={NAME: "x", GROUPS: "[{"})
    with pytest.raises(MigrationError, match="not valid JSON") as e:
        migrate([bad])
    assert e.value.path == TG
