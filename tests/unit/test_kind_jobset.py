"""JobSet adapter: modes, minCount defaults, naming, validation, exclusive topology."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workloadbuilder.api import PodGroup, Workload
from workloadbuilder.errors import BuildError, ValidationError
from workloadbuilder.kinds.jobset import (
    EXCLUSIVE_TOPOLOGY_ANNOTATION,
    GROUP_TEMPLATE_NAME_ANNOTATION,
    jobset_child_jobs,
    jobset_workload_name,
    plan_jobset,
)

RACK = "topology.kubernetes.io/rack"


def rjob(name: str, replicas: int = 1, parallelism: int | None = 1, **extra: Any) -> dict[str, Any]:
    job_spec: dict[str, Any] = {"template": {"spec": {"containers": [{"name": "c"}]}}}
    if parallelism is not None:
        job_spec["parallelism"] = parallelism
    return {"name": name, "replicas": replicas, "template": {"spec": job_spec}, **extra}


def jobset(
    scheduling: dict[str, Any] | None,
    rjobs: list[dict[str, Any]],
    *,
    name: str = "js",
    namespace: str | None = "ns",
    uid: str | None = None,
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    if uid:
        meta["uid"] = uid
    if annotations:
        meta["annotations"] = annotations
    body: dict[str, Any] = {"replicatedJobs": rjobs, **spec}
    if scheduling is not None:
        body["scheduling"] = scheduling
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": meta,
        "spec": body,
    }


def sha10(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:10]


def templates(wl: Workload) -> dict[str, Any]:
    return {t.name: t for t in wl.spec.pod_group_templates}


def min_count(pg: PodGroup) -> int | None:
    gang = pg.spec.scheduling_policy.gang
    return gang.min_count if gang is not None else None


def errors_of(exc: pytest.ExceptionInfo[ValidationError]) -> dict[str, str]:
    return {e.path: str(e) for e in exc.value.errors}


# --------------------------------------------------------------------------- top-level mode


def test_top_level_gang_is_one_pod_group_for_the_whole_jobset() -> None:
    plan = plan_jobset(jobset({}, [rjob("a", 1, 2), rjob("b", 3, 4)]))
    # KEP-969 naming: <jobset>-<sha1(JobSet/<ns>/<name>)[:10]>; the template and PodGroup reuse it
    expected = f"js-{sha10('JobSet/ns/js')}"
    assert plan.workload.metadata.name == expected
    assert plan.workload.metadata.namespace == "ns"
    assert list(templates(plan.workload)) == [expected]
    assert [pg.metadata.name for pg in plan.pod_groups] == [expected]
    assert min_count(plan.pod_groups[0]) == 1 * 2 + 3 * 4
    assert plan.pod_groups[0].spec.workload_ref is not None
    assert plan.pod_groups[0].spec.workload_ref.template_name == expected
    assert plan.composite_pod_groups == ()


def test_top_level_explicit_min_count_is_kept() -> None:
    plan = plan_jobset(jobset({"schedulingPolicy": {"gang": {"minCount": 5}}}, [rjob("a", 2, 4)]))
    assert min_count(plan.pod_groups[0]) == 5


def test_top_level_min_count_above_pod_count_is_rejected() -> None:
    with pytest.raises(ValidationError) as exc:
        plan_jobset(jobset({"schedulingPolicy": {"gang": {"minCount": 9}}}, [rjob("a", 2, 4)]))
    assert "spec.scheduling.schedulingPolicy.gang.minCount" in errors_of(exc)


def test_parallelism_and_replicas_default_to_one() -> None:
    plan = plan_jobset(jobset({}, [{"name": "a", "template": {"spec": {}}}, rjob("b", 2, None)]))
    assert min_count(plan.pod_groups[0]) == 1 + 2


def test_top_level_priority_class_comes_from_the_pod_templates() -> None:
    rj = rjob("a", 1, 2)
    rj["template"]["spec"]["template"]["spec"]["priorityClassName"] = "high"
    plan = plan_jobset(jobset({}, [rj]))
    assert plan.pod_groups[0].spec.priority_class_name == "high"
    other = copy.deepcopy(rj)
    other["name"] = "b"
    other["template"]["spec"]["template"]["spec"]["priorityClassName"] = "low"
    with pytest.raises(ValidationError) as exc:
        plan_jobset(jobset({}, [rj, other]))
    assert "spec.replicatedJobs[1].template.spec.template.spec.priorityClassName" in errors_of(exc)


def test_top_level_blocks_are_copied() -> None:
    plan = plan_jobset(
        jobset(
            {
                "schedulingPolicy": {"gang": {}},
                "schedulingConstraints": {"topology": [{"key": RACK}]},
                "disruptionMode": {"all": {}},
            },
            [rjob("a", 2, 2)],
        )
    )
    pg = plan.pod_groups[0]
    assert pg.spec.scheduling_constraints is not None
    assert [t.key for t in pg.spec.scheduling_constraints.topology] == [RACK]
    assert pg.spec.disruption_mode is not None and pg.spec.disruption_mode.all is not None


# --------------------------------------------------------------------------- per-RJ modes


def test_basic_top_level_policy_gives_one_basic_pod_group_per_replicated_job() -> None:
    plan = plan_jobset(jobset({"schedulingPolicy": {"basic": {}}}, [rjob("a"), rjob("b", 2)]))
    a = f"a-{sha10('ReplicatedJob/ns/js/a')}"
    b = f"b-{sha10('ReplicatedJob/ns/js/b')}"
    assert list(templates(plan.workload)) == [a, b]
    assert [pg.metadata.name for pg in plan.pod_groups] == [f"js-{a}", f"js-{b}"]
    assert all(pg.spec.scheduling_policy.basic is not None for pg in plan.pod_groups)


@pytest.mark.parametrize(
    "startup",
    [
        {"startupPolicy": {"startupPolicyOrder": "InOrder"}},
        {},  # dependsOn below
    ],
)
def test_sequenced_startup_forces_one_gang_per_replicated_job(startup: dict[str, Any]) -> None:
    b_extra = {} if startup else {"dependsOn": [{"name": "a", "status": "Ready"}]}
    doc = jobset(
        {"schedulingPolicy": {"gang": {}}},
        [rjob("a", 1, 2), rjob("b", 3, 4, **b_extra)],
        **startup,
    )
    plan = plan_jobset(doc)
    assert len(plan.pod_groups) == 2
    assert [min_count(pg) for pg in plan.pod_groups] == [2, 12]
    assert [pg.metadata.name for pg in plan.pod_groups] == [
        f"js-a-{sha10('ReplicatedJob/ns/js/a')}",
        f"js-b-{sha10('ReplicatedJob/ns/js/b')}",
    ]


def test_sequenced_startup_refuses_an_explicit_top_level_min_count() -> None:
    doc = jobset(
        {"schedulingPolicy": {"gang": {"minCount": 2}}},
        [rjob("a", 1, 2), rjob("b", 1, 2, dependsOn=[{"name": "a", "status": "Ready"}])],
    )
    with pytest.raises(ValidationError) as exc:
        plan_jobset(doc)
    assert "spec.scheduling.schedulingPolicy.gang.minCount" in errors_of(exc)


def test_any_order_startup_keeps_the_single_group() -> None:
    doc = jobset({}, [rjob("a"), rjob("b")], startupPolicy={"startupPolicyOrder": "AnyOrder"})
    assert len(plan_jobset(doc).pod_groups) == 1


def test_replicated_jobs_entries_share_one_pod_group_per_entry() -> None:
    doc = jobset(
        {
            "replicatedJobs": [
                {"targetReplicatedJobs": ["ps", "worker"], "schedulingPolicy": {"gang": {}}},
                {"targetReplicatedJobs": ["eval"], "schedulingPolicy": {"basic": {}}},
            ]
        },
        [rjob("ps", 1, 1), rjob("worker", 2, 3), rjob("eval", 1, 1)],
    )
    plan = plan_jobset(doc)
    group = f"ps-worker-{sha10('ReplicatedJobGroup/ns/js/ps-worker')}"
    single = f"eval-{sha10('ReplicatedJobGroup/ns/js/eval')}"
    assert list(templates(plan.workload)) == [group, single]
    pgs = {pg.metadata.name: pg for pg in plan.pod_groups}
    assert min_count(pgs[f"js-{group}"]) == 1 + 2 * 3
    assert pgs[f"js-{single}"].spec.scheduling_policy.basic is not None
    jobs = {j.name: j for j in jobset_child_jobs(doc)}
    assert set(jobs) == {"js-ps-0", "js-worker-0", "js-worker-1", "js-eval-0"}
    assert jobs["js-worker-1"].template_name == group
    assert jobs["js-worker-1"].annotations == {GROUP_TEMPLATE_NAME_ANNOTATION: group}
    assert jobs["js-eval-0"].pod_group_name == f"js-{single}"


def test_replicated_jobs_entry_claims_and_explicit_min_count() -> None:
    claim = {"name": "imex", "resourceClaimTemplateName": "imex-tpl"}
    doc = jobset(
        {
            "replicatedJobs": [
                {
                    "targetReplicatedJobs": ["w"],
                    "schedulingPolicy": {"gang": {"minCount": 3}},
                    "resourceClaims": [claim],
                }
            ]
        },
        [rjob("w", 2, 2)],
    )
    pg = plan_jobset(doc).pod_groups[0]
    assert min_count(pg) == 3
    assert [(c.name, c.resource_claim_template_name) for c in pg.spec.resource_claims] == [
        ("imex", "imex-tpl")
    ]


def test_per_job_mode_gives_one_gang_per_child_job() -> None:
    doc = jobset(
        {
            "replicatedJobs": [
                {"targetReplicatedJobs": ["driver"]},
                {"targetReplicatedJobs": ["slice"], "job": {"schedulingPolicy": {"gang": {}}}},
            ]
        },
        [rjob("driver", 1, 1), rjob("slice", 3, 4)],
    )
    plan = plan_jobset(doc)
    per_job = [f"slice-{i}-{sha10(f'Job/ns/js/slice/{i}')}" for i in range(3)]
    names = list(templates(plan.workload))
    assert names[1:] == per_job
    pgs = {pg.metadata.name: pg for pg in plan.pod_groups}
    assert all(min_count(pgs[f"js-{t}"]) == 4 for t in per_job)
    jobs = {j.name: j for j in jobset_child_jobs(doc)}
    assert jobs["js-slice-2"].pod_group_name == f"js-{per_job[2]}"
    assert plan.pod_group_names["js-slice-1"] == f"js-{per_job[1]}"


def test_per_job_min_count_cannot_exceed_parallelism() -> None:
    doc = jobset(
        {
            "replicatedJobs": [
                {
                    "targetReplicatedJobs": ["s"],
                    "job": {"schedulingPolicy": {"gang": {"minCount": 5}}},
                }
            ]
        },
        [rjob("s", 2, 4)],
    )
    with pytest.raises(ValidationError) as exc:
        plan_jobset(doc)
    assert "spec.scheduling.replicatedJobs[0].job.schedulingPolicy.gang.minCount" in errors_of(exc)


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("scheduling", "rjobs", "path"),
    [
        (
            {"schedulingPolicy": {"gang": {}}, "replicatedJobs": [{"targetReplicatedJobs": ["a"]}]},
            [rjob("a")],
            "spec.scheduling",
        ),
        (
            {"replicatedJobs": [{"targetReplicatedJobs": ["a"]}]},
            [rjob("a"), rjob("b")],
            "spec.replicatedJobs[1].name",
        ),
        (
            {"replicatedJobs": [{"targetReplicatedJobs": ["a", "nope"]}]},
            [rjob("a")],
            "spec.scheduling.replicatedJobs[0].targetReplicatedJobs[1]",
        ),
        (
            {
                "replicatedJobs": [
                    {"targetReplicatedJobs": ["a"]},
                    {"targetReplicatedJobs": ["a"]},
                ]
            },
            [rjob("a")],
            "spec.scheduling.replicatedJobs[1].targetReplicatedJobs[0]",
        ),
        (
            {"replicatedJobs": [{"targetReplicatedJobs": ["a", "b"], "job": {}}]},
            [rjob("a"), rjob("b")],
            "spec.scheduling.replicatedJobs[0].targetReplicatedJobs",
        ),
        (
            {
                "replicatedJobs": [
                    {
                        "targetReplicatedJobs": ["a"],
                        "schedulingPolicy": {"gang": {}},
                        "job": {},
                    }
                ]
            },
            [rjob("a")],
            "spec.scheduling.replicatedJobs[0].job",
        ),
        (
            {
                "replicatedJobs": [
                    {"targetReplicatedJobs": ["a"], "schedulingPolicy": {"gang": {"minCount": 3}}}
                ]
            },
            [rjob("a", 1, 2)],
            "spec.scheduling.replicatedJobs[0].schedulingPolicy.gang.minCount",
        ),
        (
            {"schedulingPolicy": {"gang": {}, "basic": {}}},
            [rjob("a")],
            "spec.scheduling.schedulingPolicy",
        ),
        (
            {"schedulingConstraints": {"topology": [{"key": "Not A Key"}]}},
            [rjob("a")],
            "spec.scheduling.schedulingConstraints.topology[0].key",
        ),
        ({"schedulingPolicy": {"gang": {"minCount": "x"}}}, [rjob("a")], None),
    ],
)
def test_invalid_configurations_name_the_field(
    scheduling: dict[str, Any], rjobs: list[dict[str, Any]], path: str | None
) -> None:
    with pytest.raises(ValidationError) as exc:
        plan_jobset(jobset(scheduling, rjobs))
    paths = errors_of(exc)
    if path is not None:
        assert path in paths, paths
    else:
        assert any(p.startswith("spec.scheduling.schedulingPolicy.gang.minCount") for p in paths)


def test_shared_pod_group_needs_one_priority_class() -> None:
    a, b = rjob("a"), rjob("b")
    b["template"]["spec"]["template"]["spec"]["priorityClassName"] = "other"
    doc = jobset({"replicatedJobs": [{"targetReplicatedJobs": ["a", "b"]}]}, [a, b])
    with pytest.raises(ValidationError) as exc:
        plan_jobset(doc)
    assert "spec.scheduling.replicatedJobs[0].targetReplicatedJobs[1]" in errors_of(exc)


def test_pod_templates_must_not_set_scheduling_group_or_job_scheduling() -> None:
    a = rjob("a")
    a["template"]["spec"]["template"]["spec"]["schedulingGroup"] = {"podGroupName": "x"}
    a["template"]["spec"]["scheduling"] = {"schedulingPolicy": {"gang": {}}}
    with pytest.raises(ValidationError) as exc:
        plan_jobset(jobset({}, [a]))
    paths = errors_of(exc)
    assert "spec.replicatedJobs[0].template.spec.template.spec.schedulingGroup" in paths
    assert "spec.replicatedJobs[0].template.spec.scheduling" in paths


def test_more_than_eight_templates_is_rejected() -> None:
    rjobs = [rjob(f"r{i}") for i in range(9)]
    with pytest.raises(ValidationError) as exc:
        plan_jobset(jobset({"schedulingPolicy": {"basic": {}}}, rjobs))
    assert "Too many" in str(exc.value)


def test_no_scheduling_builds_nothing() -> None:
    with pytest.raises(BuildError, match=r"no spec\.scheduling"):
        plan_jobset(jobset(None, [rjob("a")]))


def test_no_replicated_jobs_is_rejected() -> None:
    with pytest.raises(ValidationError) as exc:
        plan_jobset(jobset({}, []))
    assert "spec.replicatedJobs" in errors_of(exc)


def test_wrong_json_types_are_field_errors() -> None:
    doc = jobset({}, [rjob("a")])
    doc["spec"]["replicatedJobs"][0]["replicas"] = "two"
    with pytest.raises(ValidationError) as exc:
        plan_jobset(doc)
    assert "spec.replicatedJobs[0].replicas" in errors_of(exc)
    with pytest.raises(ValidationError):
        plan_jobset({"metadata": {}, "spec": {}})


# --------------------------------------------------------------------------- exclusive topology


def test_jobset_exclusive_topology_becomes_the_topology_constraint() -> None:
    doc = jobset({}, [rjob("a", 2, 2)], annotations={EXCLUSIVE_TOPOLOGY_ANNOTATION: RACK})
    pg = plan_jobset(doc).pod_groups[0]
    assert pg.spec.scheduling_constraints is not None
    assert [t.key for t in pg.spec.scheduling_constraints.topology] == [RACK]


def test_replicated_job_exclusive_topology_applies_to_its_groups_only() -> None:
    a = rjob("a", 2, 2)
    a["template"]["metadata"] = {"annotations": {EXCLUSIVE_TOPOLOGY_ANNOTATION: RACK}}
    doc = jobset({"schedulingPolicy": {"basic": {}}}, [a, rjob("b")])
    pa, pb = plan_jobset(doc).pod_groups
    assert pa.spec.scheduling_constraints is not None
    assert [t.key for t in pa.spec.scheduling_constraints.topology] == [RACK]
    assert pb.spec.scheduling_constraints is None


def test_exclusive_topology_conflicting_with_explicit_constraints_is_rejected() -> None:
    doc = jobset(
        {"schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/zone"}]}},
        [rjob("a")],
        annotations={EXCLUSIVE_TOPOLOGY_ANNOTATION: RACK},
    )
    with pytest.raises(ValidationError) as exc:
        plan_jobset(doc)
    assert "spec.scheduling.schedulingConstraints.topology" in errors_of(exc)
    same = jobset(
        {"schedulingConstraints": {"topology": [{"key": RACK}]}},
        [rjob("a")],
        annotations={EXCLUSIVE_TOPOLOGY_ANNOTATION: RACK},
    )
    assert plan_jobset(same).pod_groups[0].spec.scheduling_constraints is not None


# --------------------------------------------------------------------------- identity, pods


def test_owner_references_need_a_uid() -> None:
    owned = plan_jobset(jobset({}, [rjob("a")], uid="u-1"))
    for obj in owned.objects():
        (ref,) = obj.metadata.owner_references
        assert (ref.kind, ref.name, ref.uid, ref.controller, ref.block_owner_deletion) == (
            "JobSet",
            "js",
            "u-1",
            True,
            True,
        )
        assert ref.api_version == "jobset.x-k8s.io/v1alpha2"
    unowned = plan_jobset(jobset({}, [rjob("a")]))
    assert unowned.workload.metadata.owner_references == ()
    assert all(pg.metadata.owner_references == () for pg in unowned.pod_groups)
    cref = unowned.workload.spec.controller_ref
    assert cref is not None
    assert (cref.api_group, cref.kind, cref.name) == ("jobset.x-k8s.io", "JobSet", "js")


def test_namespace_defaults_to_default() -> None:
    plan = plan_jobset(jobset({}, [rjob("a")], namespace=None))
    assert plan.workload.metadata.namespace == "default"
    assert plan.workload.metadata.name == f"js-{sha10('JobSet/default/js')}"
    assert jobset_workload_name(jobset({}, [rjob("a")], namespace=None)) == (
        plan.workload.metadata.name
    )


def test_long_names_are_truncated_to_dns_labels() -> None:
    long = "j" * 60
    doc = jobset({"schedulingPolicy": {"basic": {}}}, [rjob("r" * 60)], name=long)
    plan = plan_jobset(doc)
    assert len(plan.workload.metadata.name or "") <= 63
    for t in plan.workload.spec.pod_group_templates:
        assert len(t.name) <= 63
    for pg in plan.pod_groups:
        name = pg.metadata.name or ""
        template = pg.spec.workload_ref.template_name if pg.spec.workload_ref else ""
        expected = f"{long[:52]}-{hashlib.sha1(f'{long}/{template}'.encode()).hexdigest()[:10]}"
        assert name == expected


def test_pod_group_for_uses_the_job_name_or_jobset_labels() -> None:
    doc = jobset({"schedulingPolicy": {"basic": {}}}, [rjob("a", 2), rjob("b")])
    plan = plan_jobset(doc)
    pg_a = f"js-a-{sha10('ReplicatedJob/ns/js/a')}"
    pod = {"metadata": {"namespace": "ns", "labels": {"batch.kubernetes.io/job-name": "js-a-1"}}}
    assert plan.pod_group_for(pod) == pg_a
    by_labels = {
        "metadata": {
            "namespace": "ns",
            "labels": {
                "jobset.sigs.k8s.io/jobset-name": "js",
                "jobset.sigs.k8s.io/replicatedjob-name": "b",
                "jobset.sigs.k8s.io/job-index": "0",
            },
        }
    }
    assert plan.pod_group_for(by_labels) == f"js-b-{sha10('ReplicatedJob/ns/js/b')}"
    assert plan.pod_group_for({"metadata": {"namespace": "ns", "labels": {}}}) is None
    other_ns = {
        "metadata": {"namespace": "x", "labels": {"batch.kubernetes.io/job-name": "js-a-1"}}
    }
    assert plan.pod_group_for(other_ns) is None


def test_min_count_patches_follow_the_plan() -> None:
    plan = plan_jobset(jobset({}, [rjob("a", 2, 3)]))
    (pg,) = plan.pod_groups
    assert plan.pod_group_patches[pg.metadata.name or ""] == {
        "spec": {"schedulingPolicy": {"gang": {"minCount": 6}}}
    }
    assert plan.min_count_patch is not None


# --------------------------------------------------------------------------- properties

_label = st.from_regex(r"[a-z]([a-z0-9-]{0,40}[a-z0-9])?", fullmatch=True)


@st.composite
def jobsets(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(_label, min_size=1, max_size=4, unique=True))
    rjobs = [rjob(n, draw(st.integers(1, 3)), draw(st.integers(1, 4))) for n in names]
    mode = draw(st.sampled_from(["top", "basic", "entries", "per-job", "depends"]))
    scheduling: dict[str, Any] = {}
    if mode == "basic":
        scheduling = {"schedulingPolicy": {"basic": {}}}
    elif mode == "entries":
        scheduling = {"replicatedJobs": [{"targetReplicatedJobs": names}]}
    elif mode == "per-job":
        scheduling = {
            "replicatedJobs": [
                {"targetReplicatedJobs": [n], "job": {"schedulingPolicy": {"gang": {}}}}
                for n in names
            ]
        }
    elif mode == "depends" and len(rjobs) > 1:
        rjobs[1]["dependsOn"] = [{"name": names[0], "status": "Ready"}]
    return jobset(scheduling, rjobs, name=draw(_label), namespace=draw(_label))


@settings(max_examples=40, deadline=None)
@given(jobsets())
def test_any_jobset_plans_valid_objects_or_says_why(doc: dict[str, Any]) -> None:
    from workloadbuilder.validation import validate_object

    try:
        plan = plan_jobset(doc)
    except ValidationError as e:
        assert e.errors and all(err.path for err in e.errors)
        return
    pod_groups = {pg.metadata.name for pg in plan.pod_groups}
    templates_ = {t.name for t in plan.workload.spec.pod_group_templates}
    assert len(pod_groups) == len(plan.pod_groups) == len(templates_)
    for obj in plan.objects():
        assert validate_object(obj) == []
        assert len(obj.metadata.name or "") <= 63
    # every child Job maps to a planned PodGroup, and gang minCounts cover exactly the pods
    total = sum(
        rj["replicas"] * rj["template"]["spec"]["parallelism"]
        for rj in doc["spec"]["replicatedJobs"]
    )
    jobs = jobset_child_jobs(doc)
    assert len(jobs) == sum(rj["replicas"] for rj in doc["spec"]["replicatedJobs"])
    assert {j.pod_group_name for j in jobs} == pod_groups
    assert {j.template_name for j in jobs} == templates_
    gangs = [min_count(pg) for pg in plan.pod_groups]
    if all(g is not None for g in gangs):
        assert sum(g for g in gangs if g is not None) == total
