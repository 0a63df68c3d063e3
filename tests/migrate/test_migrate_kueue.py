"""Kueue plain-pod groups -> v1.37 objects."""

from __future__ import annotations

import pytest
from _objects import by_kind, outcomes, pod

from workloadbuilder.migrate import MigrationError, migrate

NAME = "kueue.x-k8s.io/pod-group-name"
COUNT = "kueue.x-k8s.io/pod-group-total-count"
QUEUE = "kueue.x-k8s.io/queue-name"


def _member(i: int, count: str = "3", queue: bool = True, **notes: str) -> dict[str, object]:
    labels = {NAME: "grp", **({QUEUE: "q"} if queue else {})}
    return pod(f"p{i}", labels=labels, annotations={COUNT: count, **notes})


def test_total_count_becomes_the_gang_and_kueue_keeps_admitting_the_group() -> None:
    result = migrate([_member(i) for i in range(3)])
    (pg,) = by_kind(result.objects, "PodGroup")
    assert pg["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    pods = by_kind(result.objects, "Pod")
    assert all(p["spec"]["schedulingGroup"] == {"podGroupName": "grp"} for p in pods)
    # with a queue, Kueue still admits the group: its labels stay
    assert pods[0]["metadata"]["labels"] == {NAME: "grp", QUEUE: "q"}
    report = outcomes(result.report)
    assert report[f"metadata.annotations[{COUNT}]"] == "mapped"
    assert report[f"metadata.labels[{QUEUE}]"] == "mapped"
    assert not result.lossy


def test_without_a_queue_the_kueue_marks_go() -> None:
    result = migrate([_member(i, queue=False) for i in range(2)])
    pods = by_kind(result.objects, "Pod")
    assert all("labels" not in p["metadata"] and "annotations" not in p["metadata"] for p in pods)


def test_required_topology_is_mapped_preferred_is_not_expressible() -> None:
    req = migrate([_member(0, "1", **{"kueue.x-k8s.io/podset-required-topology": "rack"})])
    assert by_kind(req.objects, "PodGroup")[0]["spec"]["schedulingConstraints"] == {
        "topology": [{"key": "rack"}]
    }
    pref = migrate([_member(0, "1", **{"kueue.x-k8s.io/podset-preferred-topology": "rack"})])
    assert (
        outcomes(pref.report)["metadata.annotations[kueue.x-k8s.io/podset-preferred-topology]"]
        == "not-expressible"
    )


def test_different_total_counts_are_conflicting_quorums() -> None:
    with pytest.raises(MigrationError, match="conflicting quorums") as e:
        migrate([_member(0, "3"), _member(1, "4")], origins=["a document 1", "a document 2"])
    assert e.value.origin == "a document 2"
    assert e.value.path == f"metadata.annotations[{COUNT}]"


def test_a_member_without_the_total_count_is_half_linked() -> None:
    lone = pod("p", labels={NAME: "grp"})
    with pytest.raises(MigrationError, match="half-linked"):
        migrate([lone])


def test_a_total_count_that_is_not_a_number_is_refused() -> None:
    with pytest.raises(MigrationError, match="not an integer"):
        migrate([_member(0, "three")])
