"""The Job adapter: what kube-controller-manager v1.37.2 creates for a Job (KEP-5547)."""

from __future__ import annotations

import copy
import importlib
from typing import Any

import attrs
import pytest

from workloadbuilder.api import object_to_dict, to_dict
from workloadbuilder.builder import PodSet, simple_workload
from workloadbuilder.errors import BuildError, ValidationError
from workloadbuilder.kinds import NotManagedError, Plan, plan_for
from workloadbuilder.kinds.job import (
    GROUP_TEMPLATE_NAME_ANNOTATION,
    find_parent_workload,
    job_controller_ref,
    job_is_new,
    job_workload_item,
    link_job_pod,
    management_mode,
    plan_job,
)
from workloadbuilder.naming import pod_group_name
from workloadbuilder.validation import validate_workload

UID = "3f0a1c2e-1111-4a2b-9c3d-0123456789ab"
# Names the v1.37.2 controller computes for Job "trainer" with UID (see test_naming.py).
WL = "trainer-c8f889c78"
PG = "trainer-c8f889c78-trainer-pgt-0-64cc7bc995"
JOB_REF = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "name": "trainer",
    "uid": UID,
    "controller": True,
    "blockOwnerDeletion": True,
}


def make_job(
    *,
    scheduling: dict[str, Any] | None = None,
    parallelism: int | None = 4,
    uid: str | None = UID,
    priority_class: str | None = "high",
    **meta: Any,
) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if priority_class:
        pod_spec["priorityClassName"] = priority_class
    spec: dict[str, Any] = {"template": {"spec": pod_spec}}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if scheduling is not None:
        spec["scheduling"] = scheduling
    metadata: dict[str, Any] = {"name": "trainer", "namespace": "ml", **meta}
    if uid:
        metadata["uid"] = uid
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec}


def test_job_without_scheduling_gets_basic_workload_and_pod_group() -> None:
    plan = plan_job(make_job())
    assert to_dict(plan.workload) == {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": WL, "namespace": "ml", "ownerReferences": [JOB_REF]},
        "spec": {
            "controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "trainer"},
            "podGroupTemplates": [
                {
                    "name": "trainer-pgt-0",
                    "schedulingPolicy": {"basic": {}},
                    "priorityClassName": "high",
                }
            ],
        },
    }
    (pg,) = plan.pod_groups
    assert to_dict(pg) == {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": PG,
            "namespace": "ml",
            "ownerReferences": [
                JOB_REF,
                {
                    "apiVersion": "scheduling.k8s.io/v1beta1",
                    "kind": "Workload",
                    "name": WL,
                    "uid": "",
                },
            ],
        },
        "spec": {
            "schedulingPolicy": {"basic": {}},
            "workloadRef": {"workloadName": WL, "templateName": "trainer-pgt-0"},
            "priorityClassName": "high",
        },
    }
    assert plan.pod_group_names == {"trainer": PG}
    assert plan.owns_workload
    assert plan.min_count_patch is None
    assert plan.pod_group_patches == {}
    assert plan.patches() == []
    assert plan.objects() == [plan.workload, pg]


@pytest.mark.parametrize(("parallelism", "expected"), [(4, 4), (None, 1), (0, 1), (1, 1)])
def test_gang_min_count_defaults_to_parallelism_clamped(
    parallelism: int | None, expected: int
) -> None:
    plan = plan_job(
        make_job(scheduling={"schedulingPolicy": {"gang": {}}}, parallelism=parallelism)
    )
    (tmpl,) = plan.workload.spec.pod_group_templates
    assert tmpl.scheduling_policy.gang is not None
    assert tmpl.scheduling_policy.gang.min_count == expected
    gang = plan.pod_groups[0].spec.scheduling_policy.gang
    assert gang is not None
    assert gang.min_count == expected


def test_explicit_min_count_and_patches() -> None:
    plan = plan_job(make_job(scheduling={"schedulingPolicy": {"gang": {"minCount": 3}}}))
    assert plan.min_count_patch == {
        "spec": {
            "podGroupTemplates": [
                {
                    "name": "trainer-pgt-0",
                    "schedulingPolicy": {"gang": {"minCount": 3}},
                    "priorityClassName": "high",
                }
            ]
        }
    }
    assert plan.pod_group_patches == {PG: {"spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}}}
    assert [(p.kind, p.namespace, p.name) for p in plan.patches()] == [
        ("Workload", "ml", WL),
        ("PodGroup", "ml", PG),
    ]


def test_elastic_scale_changes_only_min_count() -> None:
    before = plan_job(make_job(scheduling={"schedulingPolicy": {"gang": {}}}, parallelism=4))
    after = plan_job(make_job(scheduling={"schedulingPolicy": {"gang": {}}}, parallelism=6))
    assert before.workload.metadata == after.workload.metadata
    assert before.pod_groups[0].metadata == after.pod_groups[0].metadata
    assert after.pod_group_patches == {
        PG: {"spec": {"schedulingPolicy": {"gang": {"minCount": 6}}}}
    }


def test_min_count_greater_than_parallelism_is_rejected() -> None:
    job = make_job(scheduling={"schedulingPolicy": {"gang": {"minCount": 5}}}, parallelism=3)
    with pytest.raises(ValidationError) as info:
        plan_job(job)
    assert [str(e) for e in info.value.errors] == [
        "spec.scheduling.schedulingPolicy.gang.minCount: Invalid value: 5: must not be greater "
        "than parallelism (3)"
    ]
    # validate=False plans it anyway (the API server would have rejected the Job)
    assert plan_job(job, validate=False).pod_groups


def test_all_disruption_with_basic_policy_is_rejected() -> None:
    job = make_job(scheduling={"schedulingPolicy": {"basic": {}}, "disruptionMode": {"all": {}}})
    with pytest.raises(ValidationError, match=r"spec\.scheduling\.disruptionMode"):
        plan_job(job)


def test_scheduling_blocks_flow_into_the_pod_group() -> None:
    job = make_job(
        scheduling={
            "schedulingPolicy": {"gang": {"minCount": 2}},
            "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/rack"}]},
            "disruptionMode": {"all": {}},
            "resourceClaims": [{"name": "imex", "resourceClaimTemplateName": "imex-tpl"}],
        },
        priority_class=None,
    )
    spec = to_dict(plan_job(job).pod_groups[0].spec)
    assert spec == {
        "schedulingPolicy": {"gang": {"minCount": 2}},
        "workloadRef": {"workloadName": WL, "templateName": "trainer-pgt-0"},
        "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/rack"}]},
        "resourceClaims": [{"name": "imex", "resourceClaimTemplateName": "imex-tpl"}],
        "disruptionMode": {"all": {}},
    }


def test_malformed_scheduling_is_a_validation_error() -> None:
    with pytest.raises(ValidationError) as info:
        plan_job(make_job(scheduling={"schedulingPolicy": {"gang": {"minCount": "x"}}}))
    assert info.value.errors[0].path == "spec.scheduling.schedulingPolicy.gang.minCount"
    with pytest.raises(ValidationError, match=r"metadata\.name"):
        plan_job({"apiVersion": "batch/v1", "kind": "Job", "metadata": {}})


def test_job_without_uid_is_named_from_namespace_and_name() -> None:
    plan = plan_job(make_job(uid=None, namespace="default"))
    assert plan.workload.metadata.name == "trainer-5bbcffb886"
    assert plan.pod_groups[0].metadata.name == pod_group_name("trainer-5bbcffb886", "trainer-pgt-0")
    assert plan.workload.metadata.owner_references[0].uid == ""


def test_not_managed_modes() -> None:
    byo = make_job()
    byo["spec"]["template"]["spec"]["schedulingGroup"] = {"podGroupName": "mine"}
    assert management_mode(byo) == "none"
    with pytest.raises(NotManagedError, match="bring-your-own"):
        plan_job(byo)
    cron = make_job(
        ownerReferences=[
            {
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "name": "c",
                "uid": "1",
                "controller": True,
            }
        ]
    )
    assert management_mode(cron) == "none"
    with pytest.raises(NotManagedError, match="controller owner"):
        plan_job(cron)
    # a non-controller owner does not make the Job a child
    loose = make_job(ownerReferences=[{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "2"}])
    assert management_mode(loose) == "both"


def _jobset_parent() -> Any:
    return simple_workload(
        name="js-wl",
        namespace="ml",
        owner={
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": "js", "uid": "js-uid"},
        },
        pod_sets=[PodSet(name="leader", replicas=1), PodSet(name="workers", replicas=8)],
    ).workload


def _child_job(template: str) -> dict[str, Any]:
    return make_job(
        annotations={GROUP_TEMPLATE_NAME_ANNOTATION: template},
        ownerReferences=[
            {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "name": "js",
                "uid": "js-uid",
                "controller": True,
            }
        ],
    )


def test_delegated_job_plans_only_a_pod_group() -> None:
    parent = _jobset_parent()
    job = _child_job("workers")
    assert management_mode(job) == "pod-group-only"
    assert find_parent_workload(job, [parent]) is parent
    with pytest.raises(BuildError, match="parent_workload"):
        plan_job(job)
    plan = plan_job(job, parent_workload=parent)
    assert not plan.owns_workload
    assert plan.workload is parent
    (pg,) = plan.pod_groups
    assert pg.metadata.name == pod_group_name("js-wl", "workers")
    assert [to_dict(r) for r in pg.metadata.owner_references] == [JOB_REF]
    assert pg.spec.workload_ref is not None
    assert pg.spec.workload_ref.template_name == "workers"
    assert plan.objects() == [pg]
    assert plan.min_count_patch is None
    # the delegated PodGroup follows the parent's template minCount
    assert plan.pod_group_patches == {
        pg.metadata.name: {"spec": {"schedulingPolicy": {"gang": {"minCount": 8}}}}
    }
    assert [p.kind for p in plan.patches()] == ["PodGroup"]
    with pytest.raises(BuildError, match='"nope" not found'):
        plan_job(_child_job("nope"), parent_workload=parent)
    # an empty annotation selects the parent's first template
    first = plan_job(_child_job(""), parent_workload=parent)
    assert first.pod_groups[0].spec.workload_ref is not None
    assert first.pod_groups[0].spec.workload_ref.template_name == "leader"


def test_find_parent_workload_matches_group_kind_and_name() -> None:
    parent = _jobset_parent()
    other = copy.deepcopy(_child_job("workers"))
    other["metadata"]["ownerReferences"][0]["name"] = "another"
    assert find_parent_workload(other, [parent]) is None
    assert find_parent_workload(make_job(), [parent]) is None


def _pod(**meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "ml", **meta}}


def test_pod_group_for() -> None:
    plan = plan_job(make_job())
    owned = _pod(ownerReferences=[{**JOB_REF, "uid": UID}])
    assert plan.pod_group_for(owned) == PG
    other_job = _pod(ownerReferences=[{**JOB_REF, "uid": "someone-else"}])
    assert plan.pod_group_for(other_job) is None
    labelled = _pod(labels={"batch.kubernetes.io/controller-uid": UID})
    assert plan.pod_group_for(labelled) == PG
    by_name = _pod(labels={"batch.kubernetes.io/job-name": "trainer"})
    assert plan.pod_group_for(by_name) == PG
    elsewhere = _pod(labels={"batch.kubernetes.io/job-name": "trainer"}, namespace="other")
    assert plan.pod_group_for(elsewhere) is None
    linked = {**_pod(), "spec": {"schedulingGroup": {"podGroupName": PG}}}
    assert plan.pod_group_for(linked) == PG
    linked_elsewhere = {**owned, "spec": {"schedulingGroup": {"podGroupName": "byo"}}}
    assert plan.pod_group_for(linked_elsewhere) is None
    assert plan.pod_group_for(_pod()) is None


def test_with_workload_uid_fills_the_pod_group_owner_reference() -> None:
    plan = plan_job(make_job()).with_workload_uid("wl-uid")
    assert plan.workload.metadata.uid == "wl-uid"
    refs = plan.pod_groups[0].metadata.owner_references
    assert [(r.kind, r.uid) for r in refs] == [("Job", UID), ("Workload", "wl-uid")]
    assert refs[1].controller is None
    assert refs[1].block_owner_deletion is None


def test_helpers() -> None:
    assert job_controller_ref(make_job()).block_owner_deletion is True
    item = job_workload_item(make_job(scheduling={"schedulingPolicy": {"gang": {}}}))
    assert item.name == "trainer-pgt-0"
    assert item.path == "spec.scheduling"
    assert item.input.policy_path == "schedulingPolicy"
    assert job_is_new(make_job())
    assert not job_is_new(make_job(), has_pods=True)
    started = make_job()
    started["status"] = {"startTime": "2026-01-01T00:00:00Z"}
    assert not job_is_new(started)
    suspended = make_job()
    suspended["status"] = {"conditions": [{"type": "Suspended", "status": "True"}]}
    assert not job_is_new(suspended)


def test_plan_for_dispatches_on_kind() -> None:
    plan = plan_for(make_job())
    assert isinstance(plan, Plan)
    assert plan.workload.metadata.name == WL
    with pytest.raises(BuildError, match="unsupported kind"):
        plan_for({"apiVersion": "apps/v1", "kind": "Deployment"})
    with pytest.raises(BuildError, match="apiVersion"):
        plan_for({**make_job(), "apiVersion": "example.com/v1"})


def test_plan_objects_match_the_v137_schema() -> None:
    kv = importlib.import_module("kubernetes_validate")
    plan = plan_job(
        make_job(scheduling={"schedulingPolicy": {"gang": {}}, "disruptionMode": {"all": {}}})
    ).with_workload_uid("wl-uid")
    for obj in plan.objects():
        kv.validate(object_to_dict(obj), "1.37.0", strict=True)


@pytest.mark.parametrize(
    ("doc", "module", "func"),
    [
        (
            {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet"},
            "workloadbuilder.kinds.jobset",
            "plan_jobset",
        ),
        (
            {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet"},
            "workloadbuilder.kinds.lws",
            "plan_lws",
        ),
        (
            {"apiVersion": "workloadbuilder.io/v1alpha1", "kind": "GenericWorkload"},
            "workloadbuilder.kinds.generic",
            "plan_generic_dict",
        ),
    ],
)
def test_plan_for_routes_to_the_other_adapters(
    doc: dict[str, Any], module: str, func: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    mod = importlib.import_module(module)
    sentinel = plan_job(make_job())
    calls: list[Any] = []

    def fake(d: Any, **kwargs: Any) -> Plan:
        calls.append((d, kwargs))
        return sentinel

    monkeypatch.setattr(mod, func, fake)
    assert plan_for(doc, revision="r") is sentinel
    assert calls == [(doc, {"revision": "r"})]


def test_link_job_pod_like_the_job_controller() -> None:
    pod = _pod(ownerReferences=[JOB_REF])
    pod["spec"] = {"containers": [{"name": "c", "image": "busybox"}]}
    linked = link_job_pod(pod, PG)
    assert linked["spec"]["schedulingGroup"] == {"podGroupName": PG}
    # the real v1.37.2 job controller adds no ownerReference to the PodGroup
    assert linked["metadata"]["ownerReferences"] == [JOB_REF]
    assert "schedulingGroup" not in pod["spec"]  # the input is not modified
    assert link_job_pod(linked, PG) == linked  # idempotent
    assert plan_job(make_job()).pod_group_for(linked) == PG


def test_plan_objects_pass_sdk_validation() -> None:
    validation = importlib.import_module("workloadbuilder.validation")
    plan = plan_job(
        make_job(
            scheduling={
                "schedulingPolicy": {"gang": {}},
                "schedulingConstraints": {"topology": [{"key": "zone"}]},
            }
        )
    ).with_workload_uid("wl-uid")
    for obj in plan.objects():
        assert validation.validate_object(obj) == []


@pytest.mark.parametrize("length", [57, 58])
def test_job_name_too_long_for_the_template_label_is_refused_like_the_api_server(
    length: int,
) -> None:
    """``<job>-pgt-0`` must be a DNS label: the error is the Workload validation's own."""
    name = "j" * length
    job = make_job(name=name)
    if length == 57:
        assert plan_job(job).workload.spec.pod_group_templates[0].name == f"{name}-pgt-0"
        return
    with pytest.raises(ValidationError) as e:
        plan_job(job)
    # What kube-apiserver says about the Workload the controller would try to create.
    wl = plan_job(make_job(name="j")).workload
    bad = attrs.evolve(
        wl,
        spec=attrs.evolve(
            wl.spec,
            pod_group_templates=(
                attrs.evolve(wl.spec.pod_group_templates[0], name=f"{name}-pgt-0"),
            ),
        ),
    )
    assert [str(x) for x in e.value.errors] == [str(x) for x in validate_workload(bad)]
    assert str(e.value.errors[0]).startswith(
        f'spec.podGroupTemplates[0].name: Invalid value: "{name}'
    )
