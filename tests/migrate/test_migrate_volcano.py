"""Volcano PodGroups and their pods -> v1.37 objects: every mapped, approximated and
refused field."""

from __future__ import annotations

import pytest
from _objects import by_kind, job, outcomes, pod, template, volcano_pg

from workloadbuilder.migrate import MigrationError, migrate

GROUP = "scheduling.k8s.io/group-name"


def test_min_member_becomes_a_gang_and_the_pods_join_the_pod_group() -> None:
    pods = [
        pod(f"p{i}", annotations={GROUP: "g"}, spec={"schedulerName": "volcano"}) for i in range(3)
    ]
    result = migrate([volcano_pg("g", minMember=3), *pods])
    (wl,) = by_kind(result.objects, "Workload")
    (pg,) = by_kind(result.objects, "PodGroup")
    assert wl["apiVersion"] == pg["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert wl["spec"]["podGroupTemplates"][0]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    assert pg["metadata"] == {"name": "g", "namespace": "ns"}
    assert pg["spec"]["workloadRef"] == {"workloadName": "g", "templateName": "g"}
    assert pg["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    assert "controllerRef" not in wl["spec"]  # bare pods: no controller owns the group
    out_pods = by_kind(result.objects, "Pod")
    assert [p["spec"]["schedulingGroup"] for p in out_pods] == [{"podGroupName": "g"}] * 3
    assert all("annotations" not in p["metadata"] for p in out_pods)
    assert all("schedulerName" not in p["spec"] for p in out_pods)
    report = outcomes(result.report)
    assert report["spec.minMember"] == "mapped"
    assert report["metadata.annotations[scheduling.k8s.io/group-name]"] == "mapped"
    assert report["spec.schedulerName"] == "approximated"
    assert not result.lossy
    # creation order: Workload, PodGroup, then the pods
    assert [o["kind"] for o in result.objects] == ["Workload", "PodGroup", "Pod", "Pod", "Pod"]


def test_the_volcano_group_name_annotation_is_read_too() -> None:
    result = migrate(
        [
            volcano_pg("g", minMember=1),
            pod("p", annotations={"scheduling.volcano.sh/group-name": "g"}),
        ]
    )
    assert by_kind(result.objects, "Pod")[0]["spec"]["schedulingGroup"] == {"podGroupName": "g"}


def test_min_member_zero_is_basic() -> None:
    result = migrate([volcano_pg("g"), pod("p", annotations={GROUP: "g"})])
    (pg,) = by_kind(result.objects, "PodGroup")
    assert pg["spec"]["schedulingPolicy"] == {"basic": {}}


def test_min_task_member_becomes_a_composite_pod_group_over_one_pod_group_per_task() -> None:
    ps = job("ps", template(annotations={GROUP: "g", "volcano.sh/task-spec": "ps"}))
    workers = job("w", template(annotations={GROUP: "g", "volcano.sh/task-spec": "worker"}), 2)
    result = migrate(
        [volcano_pg("g", minMember=3, minTaskMember={"worker": 2, "ps": 1}), ps, workers]
    )
    (wl,) = by_kind(result.objects, "Workload")
    (root,) = wl["spec"]["compositePodGroupTemplates"]
    assert root["schedulingPolicy"] == {"gang": {"minGroupCount": 2}}
    assert [(t["name"], t["schedulingPolicy"]) for t in root["podGroupTemplates"]] == [
        ("ps", {"gang": {"minCount": 1}}),
        ("worker", {"gang": {"minCount": 2}}),
    ]
    (cpg,) = by_kind(result.objects, "CompositePodGroup")
    assert cpg["apiVersion"] == "scheduling.k8s.io/v1alpha3"
    assert cpg["spec"]["schedulingPolicy"] == {"gang": {"minGroupCount": 2}}
    pgs = {p["metadata"]["name"]: p["spec"] for p in by_kind(result.objects, "PodGroup")}
    assert set(pgs) == {"g-ps", "g-worker"}
    assert {s["parentCompositePodGroupName"] for s in pgs.values()} == {"g"}
    jobs = {j["metadata"]["name"]: j for j in by_kind(result.objects, "Job")}
    assert jobs["ps"]["spec"]["template"]["spec"]["schedulingGroup"] == {"podGroupName": "g-ps"}
    assert jobs["w"]["spec"]["template"]["spec"]["schedulingGroup"] == {"podGroupName": "g-worker"}
    assert "scheduling" not in jobs["w"]["spec"]  # two Jobs: explicit objects, not native
    report = outcomes(result.report)
    assert report["spec.minMember"] == "mapped"
    assert report["spec.minTaskMember[ps]"] == "mapped"


def test_min_member_above_the_task_minimums_is_not_expressible() -> None:
    pods = [pod("a", annotations={GROUP: "g", "volcano.sh/task-spec": "a"})]
    result = migrate([volcano_pg("g", minMember=5, minTaskMember={"a": 1}), *pods])
    assert outcomes(result.report)["spec.minMember"] == "not-expressible"
    assert result.lossy


def test_queue_and_min_resources_are_not_expressible_priority_is_mapped() -> None:
    pg = volcano_pg(
        "g", minMember=1, queue="q", priorityClassName="high", minResources={"cpu": "2"}
    )
    result = migrate([pg, pod("p", annotations={GROUP: "g"})])
    report = outcomes(result.report)
    assert report["spec.queue"] == "not-expressible"
    assert report["spec.minResources"] == "not-expressible"
    assert report["spec.priorityClassName"] == "mapped"
    (out_pg,) = by_kind(result.objects, "PodGroup")
    assert out_pg["spec"]["priorityClassName"] == "high"
    # the pods get the group's priority class: v1.37 refuses a group whose pods differ
    assert by_kind(result.objects, "Pod")[0]["spec"]["priorityClassName"] == "high"
    assert result.lossy


def test_network_topology_hard_maps_with_a_tier_label_soft_is_refused() -> None:
    hard = volcano_pg("g", minMember=1, networkTopology={"mode": "hard", "highestTierAllowed": 1})
    members = [pod("p", annotations={GROUP: "g"})]
    mapped = migrate([hard, *members], tier_labels={"1": "topology.kubernetes.io/rack"})
    (pg,) = by_kind(mapped.objects, "PodGroup")
    assert pg["spec"]["schedulingConstraints"] == {
        "topology": [{"key": "topology.kubernetes.io/rack"}]
    }
    assert outcomes(mapped.report)["spec.networkTopology.highestTierAllowed"] == "mapped"
    unmapped = migrate([hard, *members])
    assert outcomes(unmapped.report)["spec.networkTopology.highestTierAllowed"] == "not-expressible"
    assert "schedulingConstraints" not in by_kind(unmapped.objects, "PodGroup")[0]["spec"]
    soft = volcano_pg("g", minMember=1, networkTopology={"mode": "soft", "highestTierAllowed": 1})
    refused = migrate([soft, *members], tier_labels={"1": "rack"})
    assert outcomes(refused.report)["spec.networkTopology.mode"] == "not-expressible"


def test_an_unknown_spec_field_is_reported_never_dropped_silently() -> None:
    result = migrate([volcano_pg("g", minMember=1, subGroupPolicy=[{"name": "x"}])])
    assert outcomes(result.report)["spec.subGroupPolicy"] == "not-expressible"


def test_one_job_becomes_its_own_spec_scheduling_natively_or_explicit_objects() -> None:
    members = [
        volcano_pg("g", minMember=2),
        job("j", template(annotations={GROUP: "g"}), 2, uid="u1"),
    ]
    native = migrate(members)
    assert [o["kind"] for o in native.objects] == ["Job"]
    (j,) = native.objects
    assert j["spec"]["scheduling"] == {"schedulingPolicy": {"gang": {"minCount": 2}}}
    assert "metadata" not in j["spec"]["template"]
    explicit = migrate(members, job_mode="podgroup")
    (wl,) = by_kind(explicit.objects, "Workload")
    assert wl["metadata"]["ownerReferences"][0]["uid"] == "u1"
    assert wl["spec"]["controllerRef"] == {"apiGroup": "batch", "kind": "Job", "name": "j"}
    (pg,) = by_kind(explicit.objects, "PodGroup")
    assert pg["metadata"]["ownerReferences"][0]["kind"] == "Job"


def test_a_gang_larger_than_the_jobs_parallelism_is_a_conflicting_quorum() -> None:
    with pytest.raises(MigrationError, match="conflicting quorums") as e:
        migrate(
            [volcano_pg("g", minMember=5), job("j", template(annotations={GROUP: "g"}), 2)],
            origins=["f.yaml document 1", "f.yaml document 2"],
        )
    assert e.value.origin == "f.yaml document 1" and e.value.path == "spec.minMember"


def test_pods_of_a_group_that_is_not_in_the_input_are_half_linked() -> None:
    with pytest.raises(MigrationError, match="half-linked") as e:
        migrate([pod("p", annotations={GROUP: "missing"})], origins=["in.yaml document 1"])
    assert str(e.value).startswith(
        "in.yaml document 1: metadata.annotations[scheduling.k8s.io/group-name]: half-linked"
    )


def test_a_task_the_group_does_not_know_is_half_linked() -> None:
    pg = volcano_pg("g", minMember=1, minTaskMember={"a": 1})
    with pytest.raises(MigrationError, match="task 'b' is not one of"):
        migrate([pg, pod("p", annotations={GROUP: "g", "volcano.sh/task-spec": "b"})])
    with pytest.raises(MigrationError, match="names no task"):
        migrate([pg, pod("p", annotations={GROUP: "g"})])


def test_two_definitions_of_one_group_conflict() -> None:
    with pytest.raises(MigrationError, match="also defined in object 1"):
        migrate([volcano_pg("g", minMember=1), volcano_pg("g", minMember=2)])


def test_pods_with_another_priority_than_the_group_are_refused() -> None:
    pg = volcano_pg("g", minMember=1, priorityClassName="high")
    with pytest.raises(MigrationError, match="conflicting priorities"):
        migrate([pg, pod("p", annotations={GROUP: "g"}, spec={"priorityClassName": "low"})])


def test_an_unknown_volcano_version_is_refused_with_its_path() -> None:
    old = volcano_pg("g", minMember=1)
    old["apiVersion"] = "scheduling.volcano.sh/v1alpha1"
    with pytest.raises(MigrationError, match="unknown apiVersion") as e:
        migrate([old])
    assert e.value.path == "apiVersion"


def test_a_volcano_queue_is_reported_not_expressible_and_not_output() -> None:
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "q"},
        "spec": {"weight": 1},
    }
    result = migrate([queue])
    assert result.objects == () and result.lossy


def test_a_group_no_pod_joins_is_reported() -> None:
    result = migrate([volcano_pg("g", minMember=2)])
    assert [o["kind"] for o in result.objects] == ["Workload", "PodGroup"]
    assert outcomes(result.report)["metadata.name"] == "approximated"


def test_a_task_name_that_is_not_a_dns_label_is_renamed_and_reported() -> None:
    pg = volcano_pg("g", minMember=1, minTaskMember={"Worker_A": 1})
    result = migrate([pg, pod("p", annotations={GROUP: "g", "volcano.sh/task-spec": "Worker_A"})])
    (child,) = by_kind(result.objects, "PodGroup")
    assert child["metadata"]["name"] == "g-worker-a"
    assert outcomes(result.report)["spec.minTaskMember[Worker_A]"] == "approximated"


def test_leader_and_worker_templates_of_a_leader_worker_set_join_their_tasks() -> None:
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "lws", "namespace": "ns", "uid": "u-lws"},
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": 3,
                "leaderTemplate": template(
                    annotations={GROUP: "g", "volcano.sh/task-spec": "leader"}
                ),
                "workerTemplate": template(
                    annotations={GROUP: "g", "volcano.sh/task-spec": "worker"}
                ),
            },
        },
    }
    result = migrate([volcano_pg("g", minMember=3, minTaskMember={"leader": 1, "worker": 2}), lws])
    (out,) = by_kind(result.objects, "LeaderWorkerSet")
    lwt = out["spec"]["leaderWorkerTemplate"]
    assert lwt["leaderTemplate"]["spec"]["schedulingGroup"] == {"podGroupName": "g-leader"}
    assert lwt["workerTemplate"]["spec"]["schedulingGroup"] == {"podGroupName": "g-worker"}
    (wl,) = by_kind(result.objects, "Workload")
    assert wl["metadata"]["ownerReferences"][0]["uid"] == "u-lws"
    assert wl["spec"]["controllerRef"]["kind"] == "LeaderWorkerSet"


def test_a_task_without_a_minimum_is_a_basic_child_and_reported() -> None:
    pg = volcano_pg("g", minMember=1, minTaskMember={"a": 1, "b": 0})
    members = [
        pod("pa", annotations={GROUP: "g", "volcano.sh/task-spec": "a"}),
        pod("pb", annotations={GROUP: "g", "volcano.sh/task-spec": "b"}),
    ]
    result = migrate([pg, *members])
    pgs = {
        p["metadata"]["name"]: p["spec"]["schedulingPolicy"]
        for p in by_kind(result.objects, "PodGroup")
    }
    assert pgs == {"g-a": {"gang": {"minCount": 1}}, "g-b": {"basic": {}}}
    notes = [r for r in result.report if r.path == "spec.minTaskMember[b]"]
    assert [r.outcome for r in notes] == ["mapped", "approximated"]
