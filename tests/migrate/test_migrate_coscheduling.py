"""scheduler-plugins coscheduling PodGroups -> v1.37 objects."""

from __future__ import annotations

import pytest
from _objects import by_kind, cosched_pg, deployment, outcomes, pod, template

from workloadbuilder.migrate import MigrationError, migrate

LABEL = "scheduling.x-k8s.io/pod-group"


def test_min_member_is_mapped_timeout_and_min_resources_are_not_expressible() -> None:
    pg = cosched_pg("web", minMember=3, scheduleTimeoutSeconds=10, minResources={"cpu": "1"})
    tmpl = template(
        labels={"app": "web", LABEL: "web"}, spec={"schedulerName": "scheduler-plugins-scheduler"}
    )
    result = migrate([pg, deployment("web", tmpl, 3)])
    (out_pg,) = by_kind(result.objects, "PodGroup")
    assert out_pg["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    (wl,) = by_kind(result.objects, "Workload")
    assert wl["spec"]["controllerRef"] == {"apiGroup": "apps", "kind": "Deployment", "name": "web"}
    (dep,) = by_kind(result.objects, "Deployment")
    pod_tmpl = dep["spec"]["template"]
    assert pod_tmpl["metadata"]["labels"] == {"app": "web"}  # the selector's label stays
    assert pod_tmpl["spec"]["schedulingGroup"] == {"podGroupName": "web"}
    assert "schedulerName" not in pod_tmpl["spec"]
    report = outcomes(result.report)
    assert report["spec.minMember"] == "mapped"
    assert report["spec.scheduleTimeoutSeconds"] == "not-expressible"
    assert report["spec.minResources"] == "not-expressible"
    assert report["spec.template.metadata.labels[scheduling.x-k8s.io/pod-group]"] == "mapped"


def test_a_scheduler_name_that_is_not_an_old_gang_scheduler_is_kept_or_replaced() -> None:
    pg = cosched_pg("g", minMember=1)
    members = [pod("p", labels={LABEL: "g"}, spec={"schedulerName": "my-scheduler"})]
    kept = migrate([pg, *members])
    assert by_kind(kept.objects, "Pod")[0]["spec"]["schedulerName"] == "my-scheduler"
    replaced = migrate([pg, *members], scheduler_name="wb-scheduler")
    assert by_kind(replaced.objects, "Pod")[0]["spec"]["schedulerName"] == "wb-scheduler"
    assert outcomes(replaced.report)["spec.schedulerName"] == "mapped"


def test_a_pod_group_with_an_owner_keeps_it() -> None:
    pg = cosched_pg("g", minMember=1)
    pg["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "example.com/v1",
            "kind": "Trainer",
            "name": "t",
            "uid": "u-1",
            "controller": True,
        }
    ]
    result = migrate([pg, pod("p", labels={LABEL: "g"})])
    (wl,) = by_kind(result.objects, "Workload")
    assert wl["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert wl["spec"]["controllerRef"] == {
        "apiGroup": "example.com",
        "kind": "Trainer",
        "name": "t",
    }


def test_a_pod_in_a_coscheduling_and_a_volcano_group_is_refused() -> None:
    both = pod("p", labels={LABEL: "g"}, annotations={"scheduling.k8s.io/group-name": "g"})
    with pytest.raises(MigrationError, match="a pod in two groups") as e:
        migrate(
            [cosched_pg("g", minMember=1), both], origins=["x.yaml document 1", "x.yaml document 2"]
        )
    assert e.value.origin == "x.yaml document 2"


def test_a_pod_that_already_joins_a_v1_37_pod_group_and_an_old_one_is_refused() -> None:
    joined = pod("p", labels={LABEL: "g"}, spec={"schedulingGroup": {"podGroupName": "other"}})
    with pytest.raises(MigrationError, match="a pod in two groups") as e:
        migrate([cosched_pg("g", minMember=1), joined])
    assert e.value.path == "spec.schedulingGroup.podGroupName"


def test_an_unknown_coscheduling_version_is_refused() -> None:
    pg = cosched_pg("g", minMember=1)
    pg["apiVersion"] = "scheduling.x-k8s.io/v1beta1"
    with pytest.raises(MigrationError, match="unknown apiVersion"):
        migrate([pg])


def test_from_another_source_refuses_coscheduling_objects() -> None:
    with pytest.raises(MigrationError, match="--from volcano"):
        migrate([cosched_pg("g", minMember=1)], source="volcano")
    with pytest.raises(MigrationError, match="--from kueue"):
        migrate([pod("p", labels={LABEL: "g"})], source="kueue")


def test_a_negative_min_member_is_refused_with_its_path() -> None:
    with pytest.raises(MigrationError, match="must be between") as e:
        migrate([cosched_pg("g", minMember=-1)])
    assert e.value.path == "spec.minMember"
