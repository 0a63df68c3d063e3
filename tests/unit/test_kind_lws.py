"""LeaderWorkerSet adapter: one gang per replica, LeaderReady, exclusive topology, subgroups."""

from __future__ import annotations

from typing import Any

import pytest

from workloadbuilder.api import PodGroup
from workloadbuilder.errors import BuildError, ValidationError
from workloadbuilder.kinds.lws import (
    EXCLUSIVE_TOPOLOGY_ANNOTATION,
    GROUP_INDEX_LABEL,
    NAME_LABEL,
    REPLICA_TEMPLATE,
    REVISION_LABEL,
    SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    SUBGROUP_INDEX_LABEL,
    lws_pod_group_name,
    plan_lws,
)

RACK = "topology.kubernetes.io/rack"
ZONE = "topology.kubernetes.io/zone"


def lws(
    scheduling: dict[str, Any] | None,
    *,
    size: int | None = 4,
    replicas: int | None = 2,
    annotations: dict[str, str] | None = None,
    uid: str | None = None,
    startup: str | None = None,
    leader: dict[str, Any] | None = None,
    worker_spec: dict[str, Any] | None = None,
    subgroup: dict[str, Any] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web", "namespace": "ns"}
    if annotations:
        meta["annotations"] = annotations
    if uid:
        meta["uid"] = uid
    lwt: dict[str, Any] = {"workerTemplate": {"spec": worker_spec or {"containers": []}}}
    if size is not None:
        lwt["size"] = size
    if leader is not None:
        lwt["leaderTemplate"] = {"spec": leader}
    if subgroup is not None:
        lwt["subGroupPolicy"] = subgroup
    spec: dict[str, Any] = {"leaderWorkerTemplate": lwt}
    if replicas is not None:
        spec["replicas"] = replicas
    if scheduling is not None:
        spec["scheduling"] = scheduling
    if startup:
        spec["startupPolicy"] = startup
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": meta,
        "spec": spec,
    }


def min_count(pg: PodGroup) -> int | None:
    gang = pg.spec.scheduling_policy.gang
    return gang.min_count if gang is not None else None


def paths(exc: pytest.ExceptionInfo[ValidationError]) -> set[str]:
    return {e.path for e in exc.value.errors}


def test_default_is_one_gang_of_size_per_replica() -> None:
    plan = plan_lws(lws({}))
    assert plan.workload.metadata.name == "web"
    (tpl,) = plan.workload.spec.pod_group_templates
    assert tpl.name == REPLICA_TEMPLATE
    assert tpl.scheduling_policy.gang is not None and tpl.scheduling_policy.gang.min_count == 4
    assert [pg.metadata.name for pg in plan.pod_groups] == ["web-0", "web-1"]
    assert [min_count(pg) for pg in plan.pod_groups] == [4, 4]
    assert plan.pod_groups[1].metadata.labels == {NAME_LABEL: "web", GROUP_INDEX_LABEL: "1"}
    assert plan.pod_groups[0].spec.workload_ref is not None
    assert plan.pod_groups[0].spec.workload_ref.workload_name == "web"
    assert plan.pod_group_names == {"0": "web-0", "1": "web-1"}


def test_gang_with_empty_block_and_explicit_equal_min_count() -> None:
    plan = plan_lws(lws({"schedulingPolicy": {"gang": {"minCount": 4}}}, replicas=1))
    assert [min_count(pg) for pg in plan.pod_groups] == [4]
    defaulted = plan_lws(lws({"schedulingPolicy": {}}, size=None, replicas=None))
    assert [min_count(pg) for pg in defaulted.pod_groups] == [1]


def test_revision_is_part_of_the_pod_group_name() -> None:
    plan = plan_lws(lws({}), revision="dd6699c7c")
    assert [pg.metadata.name for pg in plan.pod_groups] == ["web-0-dd6699c7c", "web-1-dd6699c7c"]
    assert plan.pod_groups[0].metadata.labels[REVISION_LABEL] == "dd6699c7c"
    assert lws_pod_group_name("web", 3, "abc") == "web-3-abc"
    assert lws_pod_group_name("web", 3) == "web-3"


def test_basic_policy_blocks_and_claims_are_copied() -> None:
    claim = {"name": "nic", "resourceClaimName": "nic-1"}
    doc = lws(
        {
            "schedulingPolicy": {"basic": {}},
            "disruptionMode": {"single": {}},
            "resourceClaims": [claim],
        },
        worker_spec={"containers": [], "resourceClaims": [claim]},
    )
    pg = plan_lws(doc).pod_groups[0]
    assert pg.spec.scheduling_policy.basic is not None
    assert pg.spec.disruption_mode is not None and pg.spec.disruption_mode.single is not None
    assert [c.resource_claim_name for c in pg.spec.resource_claims] == ["nic-1"]


def test_min_count_must_equal_size() -> None:
    with pytest.raises(ValidationError) as exc:
        plan_lws(lws({"schedulingPolicy": {"gang": {"minCount": 3}}}))
    assert "spec.scheduling.schedulingPolicy.gang.minCount" in paths(exc)


def test_gang_with_leader_ready_is_rejected() -> None:
    with pytest.raises(ValidationError) as exc:
        plan_lws(lws({}, startup="LeaderReady"))
    assert "spec.scheduling.schedulingPolicy.gang" in paths(exc)
    assert "LeaderReady" in str(exc.value)
    basic = plan_lws(lws({"schedulingPolicy": {"basic": {}}}, startup="LeaderReady"))
    assert len(basic.pod_groups) == 2


def test_priority_class_is_shared_by_leader_and_workers() -> None:
    ok = plan_lws(
        lws(
            {},
            leader={"priorityClassName": "high"},
            worker_spec={"containers": [], "priorityClassName": "high"},
        )
    )
    assert ok.pod_groups[0].spec.priority_class_name == "high"
    with pytest.raises(ValidationError) as exc:
        plan_lws(lws({}, leader={"priorityClassName": "high"}))
    assert "spec.scheduling" in paths(exc)


def test_pod_templates_must_not_set_scheduling_group() -> None:
    with pytest.raises(ValidationError, match="schedulingGroup"):
        plan_lws(lws({}, worker_spec={"schedulingGroup": {"podGroupName": "x"}}))


def test_shared_claims_need_matching_pod_claims_in_both_templates() -> None:
    claim = {"name": "nic", "resourceClaimName": "nic-1"}
    with pytest.raises(ValidationError) as exc:
        plan_lws(
            lws(
                {"resourceClaims": [claim]},
                leader={"containers": []},
                worker_spec={"containers": [], "resourceClaims": [claim]},
            )
        )
    assert "spec.scheduling.resourceClaims[0]" in paths(exc)
    assert "leaderTemplate" in str(exc.value)


def test_exclusive_topology_becomes_the_replica_topology_constraint() -> None:
    plan = plan_lws(lws({}, annotations={EXCLUSIVE_TOPOLOGY_ANNOTATION: RACK}))
    for pg in plan.pod_groups:
        assert pg.spec.scheduling_constraints is not None
        assert [t.key for t in pg.spec.scheduling_constraints.topology] == [RACK]
    with pytest.raises(ValidationError) as exc:
        plan_lws(
            lws(
                {"schedulingConstraints": {"topology": [{"key": ZONE}]}},
                annotations={EXCLUSIVE_TOPOLOGY_ANNOTATION: RACK},
            )
        )
    assert "spec.scheduling.schedulingConstraints.topology" in paths(exc)


def test_owner_references_and_controller_ref() -> None:
    plan = plan_lws(lws({}, uid="u-9"))
    for obj in plan.objects():
        (ref,) = obj.metadata.owner_references
        assert (ref.api_version, ref.kind, ref.name, ref.uid, ref.controller) == (
            "leaderworkerset.x-k8s.io/v1",
            "LeaderWorkerSet",
            "web",
            "u-9",
            True,
        )
    unowned = plan_lws(lws({}))
    assert unowned.workload.metadata.owner_references == ()
    assert unowned.workload.spec.controller_ref is not None


def test_pod_group_for_reads_the_group_index_label() -> None:
    plan = plan_lws(lws({}))
    pod = {"metadata": {"namespace": "ns", "labels": {GROUP_INDEX_LABEL: "1"}}}
    assert plan.pod_group_for(pod) == "web-1"
    assert plan.pod_group_for({"metadata": {"namespace": "ns", "labels": {}}}) is None
    named = {"metadata": {"labels": {NAME_LABEL: "web", GROUP_INDEX_LABEL: "0"}}}
    assert plan.pod_group_for(named) == "web-0"
    other_lws = {"metadata": {"labels": {NAME_LABEL: "api", GROUP_INDEX_LABEL: "0"}}}
    assert plan.pod_group_for(other_lws) is None


def test_no_scheduling_or_delegated_builds_nothing() -> None:
    with pytest.raises(BuildError, match=r"no spec\.scheduling"):
        plan_lws(lws(None))
    delegated = lws({}, annotations={"scheduling.k8s.io/group-template-name": "t"})
    with pytest.raises(BuildError, match="delegates"):
        plan_lws(delegated)


def test_wrong_types_are_field_errors() -> None:
    with pytest.raises(ValidationError) as exc:
        plan_lws(lws({}, size=None) | {"spec": {"scheduling": {}, "replicas": "2"}})
    assert "spec.replicas" in paths(exc)
    with pytest.raises(ValidationError) as exc:
        plan_lws(lws({"schedulingPolicy": {"gang": {"minCount": True}}}))
    assert any(p.startswith("spec.scheduling.schedulingPolicy") for p in paths(exc))


# --------------------------------------------------------------------------- subgroups


def test_subgroup_topology_builds_a_composite_group_per_replica() -> None:
    # size 5, subGroupSize 2, LeaderWorker: (5-1) % 2 == 0, so the leader is an extra pod of
    # subgroup 0 (3 pods) and subgroup 1 has 2 workers.
    doc = lws(
        {"disruptionMode": {"all": {}}},
        size=5,
        annotations={
            EXCLUSIVE_TOPOLOGY_ANNOTATION: ZONE,
            SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION: RACK,
        },
        subgroup={"subGroupSize": 2},
    )
    plan = plan_lws(doc, revision="r1")
    (root,) = plan.workload.spec.composite_pod_group_templates
    assert root.name == REPLICA_TEMPLATE
    assert root.scheduling_policy.gang is not None
    assert root.scheduling_policy.gang.min_group_count == 2
    assert root.scheduling_constraints is not None
    assert [t.key for t in root.scheduling_constraints.topology] == [ZONE]
    leaves = {t.name: t for t in root.pod_group_templates}
    assert set(leaves) == {"subgroup-0", "subgroup"}
    assert leaves["subgroup-0"].scheduling_policy.gang is not None
    assert leaves["subgroup-0"].scheduling_policy.gang.min_count == 3
    assert leaves["subgroup"].scheduling_policy.gang is not None
    assert leaves["subgroup"].scheduling_policy.gang.min_count == 2
    sc = leaves["subgroup"].scheduling_constraints
    assert sc is not None and [t.key for t in sc.topology] == [RACK]

    assert [c.metadata.name for c in plan.composite_pod_groups] == ["web-0-r1", "web-1-r1"]
    names = [pg.metadata.name for pg in plan.pod_groups]
    assert names == ["web-0-r1-0", "web-0-r1-1", "web-1-r1-0", "web-1-r1-1"]
    parents = [pg.spec.parent_composite_pod_group_name for pg in plan.pod_groups]
    assert parents == ["web-0-r1", "web-0-r1", "web-1-r1", "web-1-r1"]
    assert plan.pod_groups[1].metadata.labels[SUBGROUP_INDEX_LABEL] == "1"
    worker = {"metadata": {"labels": {GROUP_INDEX_LABEL: "1", SUBGROUP_INDEX_LABEL: "1"}}}
    assert plan.pod_group_for(worker) == "web-1-r1-1"
    leader = {"metadata": {"labels": {GROUP_INDEX_LABEL: "0"}}}
    assert plan.pod_group_for(leader) == "web-0-r1-0"


def test_subgroups_divisible_size_use_one_template() -> None:
    # size 4, subGroupSize 2: (4-1) % 2 != 0, so two subgroups of 2 (leader in subgroup 0).
    doc = lws(
        {},
        size=4,
        replicas=1,
        annotations={SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION: RACK},
        subgroup={"subGroupSize": 2},
    )
    plan = plan_lws(doc)
    (root,) = plan.workload.spec.composite_pod_group_templates
    assert [t.name for t in root.pod_group_templates] == ["subgroup"]
    assert root.scheduling_constraints is None
    assert [min_count(pg) for pg in plan.pod_groups] == [2, 2]


def test_leader_excluded_subgroups_give_the_leader_its_own_group() -> None:
    doc = lws(
        {},
        size=5,
        replicas=1,
        annotations={SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION: RACK},
        subgroup={"subGroupSize": 2, "subGroupPolicyType": "LeaderExcluded"},
    )
    plan = plan_lws(doc)
    (root,) = plan.workload.spec.composite_pod_group_templates
    assert root.scheduling_policy.gang is not None
    assert root.scheduling_policy.gang.min_group_count == 3
    assert [pg.metadata.name for pg in plan.pod_groups] == ["web-0-0", "web-0-1", "web-0-leader"]
    assert [min_count(pg) for pg in plan.pod_groups] == [2, 2, 1]
    leader = {"metadata": {"labels": {GROUP_INDEX_LABEL: "0"}}}
    assert plan.pod_group_for(leader) == "web-0-leader"


def test_basic_subgroups_stay_basic() -> None:
    doc = lws(
        {"schedulingPolicy": {"basic": {}}},
        size=4,
        replicas=1,
        annotations={SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION: RACK},
        subgroup={"subGroupSize": 2},
    )
    plan = plan_lws(doc)
    assert plan.composite_pod_groups[0].spec.scheduling_policy.basic is not None
    assert all(pg.spec.scheduling_policy.basic is not None for pg in plan.pod_groups)


@pytest.mark.parametrize(
    ("subgroup", "size", "path"),
    [
        (None, 4, f"metadata.annotations[{SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION}]"),
        ({"subGroupSize": 3}, 8, "spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize"),
        ({"subGroupSize": 5}, 4, "spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize"),
        (
            {"subGroupSize": 2, "subGroupPolicyType": "LeaderExcluded"},
            4,
            "spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize",
        ),
    ],
)
def test_invalid_subgroup_policies(subgroup: dict[str, Any] | None, size: int, path: str) -> None:
    doc = lws(
        {},
        size=size,
        annotations={SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION: RACK},
        subgroup=subgroup,
    )
    with pytest.raises(ValidationError) as exc:
        plan_lws(doc)
    assert path in paths(exc)


def test_basic_subgroups_refuse_all_disruption() -> None:
    doc = lws(
        {"schedulingPolicy": {"basic": {}}, "disruptionMode": {"all": {}}},
        size=4,
        annotations={SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION: RACK},
        subgroup={"subGroupSize": 2},
    )
    with pytest.raises(ValidationError) as exc:
        plan_lws(doc)
    assert "spec.scheduling.disruptionMode" in paths(exc)
