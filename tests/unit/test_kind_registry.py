"""The Integration protocol and registry: built-ins, custom kinds, capabilities, errors."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from typing import Any

import pytest

import workloadbuilder.kinds as kinds
from workloadbuilder.builder import POD_SET_ANNOTATION, PodSet, simple_workload
from workloadbuilder.cli._build import build_objects
from workloadbuilder.errors import BuildError, ValidationError
from workloadbuilder.kinds import (
    GENERIC_GVK,
    JOB_GVK,
    JOBSET_GVK,
    LWS_GVK,
    ChildWorkloads,
    DelegatedGroups,
    DuplicateIntegrationError,
    ElasticResize,
    GroupVersionKind,
    Integration,
    IntegrationRegistry,
    JobIntegration,
    JobSetIntegration,
    NotManagedError,
    Plan,
    Suspendable,
    UnknownKindError,
    builtin_integrations,
    capabilities,
    default_registry,
    plan_for,
    register,
)
from workloadbuilder.kinds.job import GROUP_TEMPLATE_NAME_ANNOTATION, job_pod_metadata
from workloadbuilder.kinds.lws import lws_pods, plan_lws

# --- a custom integration, as an operator author writes it (the "30-line example") -----------

TRAINER_GVK = GroupVersionKind(group="example.com", versions=("v1",), kind="Trainer")


class TrainerIntegration:
    """``example.com/v1`` Trainer: ``spec.workers`` pods in one rack, plus one driver."""

    gvk = TRAINER_GVK

    def plan(self, obj: Mapping[str, Any], /, **options: Any) -> Plan:
        if options:
            raise TypeError(f"unexpected options {sorted(options)}")
        meta = obj["metadata"]
        return simple_workload(
            name=meta["name"],
            namespace=meta.get("namespace", "default"),
            owner=obj,
            pod_sets=[
                PodSet(name="driver", replicas=1, gang=False),
                PodSet(
                    name="workers",
                    replicas=int(obj["spec"]["workers"]),
                    topology_key="topology.kubernetes.io/rack",
                ),
            ],
        )


def trainer(workers: int = 4) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Trainer",
        "metadata": {"name": "llm", "namespace": "ml", "uid": "t-uid"},
        "spec": {"workers": workers},
    }


# --- fixtures ---------------------------------------------------------------------------------


def job(**meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ml", "uid": "j-uid", **meta},
        "spec": {
            "parallelism": 3,
            "scheduling": {"schedulingPolicy": {"gang": {}}},
            "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
        },
    }


def jobset(scheduling: dict[str, Any] | None = None, uid: str | None = "js-uid") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "replicatedJobs": [
            {
                "name": "workers",
                "replicas": 2,
                "template": {
                    "metadata": {"labels": {"team": "a"}},
                    "spec": {
                        "parallelism": 2,
                        "template": {
                            "metadata": {"labels": {"app": "w"}},
                            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                        },
                    },
                },
            }
        ]
    }
    if scheduling is not None:
        spec["scheduling"] = scheduling
    meta: dict[str, Any] = {"name": "js", "namespace": "ml"}
    if uid:
        meta["uid"] = uid
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": meta,
        "spec": spec,
    }


def lws(**lwt: Any) -> dict[str, Any]:
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "l", "namespace": "ml"},
        "spec": {
            "replicas": 2,
            "scheduling": {},
            "leaderWorkerTemplate": {
                "size": 3,
                "workerTemplate": {
                    "metadata": {"labels": {"role": "w"}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                },
                **lwt,
            },
        },
    }


# --- the registry -----------------------------------------------------------------------------


def test_default_registry_holds_the_builtins() -> None:
    reg = default_registry()
    assert {str(i.gvk) for i in reg} >= {
        "batch/v1 Job",
        "jobset.x-k8s.io/v1alpha2 JobSet",
        "leaderworkerset.x-k8s.io/v1 LeaderWorkerSet",
        "workloadbuilder.io/v1alpha1 GenericWorkload",
    }
    for gvk in (JOB_GVK, JOBSET_GVK, LWS_GVK, GENERIC_GVK):
        assert gvk in reg
        assert reg.lookup(gvk).gvk == gvk
        assert reg.get(gvk.group, gvk.kind) is reg.lookup(gvk)
        assert isinstance(reg.lookup(gvk), Integration)
    assert isinstance(reg.for_object(job()), JobIntegration)
    assert isinstance(reg.for_object(jobset()), JobSetIntegration)
    assert reg.kinds() >= {"Job", "JobSet", "LeaderWorkerSet", "GenericWorkload"}


def test_lookup_ignores_the_version_but_not_the_group() -> None:
    reg = IntegrationRegistry(builtin_integrations())
    assert reg.for_object({**jobset(), "apiVersion": "jobset.x-k8s.io/v1"}).gvk == JOBSET_GVK
    with pytest.raises(UnknownKindError) as info:
        reg.for_object({**jobset(), "apiVersion": "apps/v1"})
    assert str(info.value) == "JobSet must have apiVersion jobset.x-k8s.io/..., not 'apps/v1'"
    assert isinstance(info.value, BuildError)


def test_unknown_kinds_are_clear_errors() -> None:
    reg = IntegrationRegistry(builtin_integrations())
    with pytest.raises(UnknownKindError) as info:
        reg.for_object({"apiVersion": "apps/v1", "kind": "Deployment"})
    assert str(info.value).startswith("unsupported kind apps/v1/Deployment: expected one of ")
    assert "batch/v1 Job" in str(info.value) and "jobset.x-k8s.io/v1alpha2 JobSet" in str(
        info.value
    )
    with pytest.raises(UnknownKindError, match="object has no kind"):
        reg.for_object({"apiVersion": "v1"})
    with pytest.raises(UnknownKindError, match="no integration for Trainer in group"):
        reg.get("example.com", "Trainer")
    with pytest.raises(UnknownKindError, match=r"expected one of \(none registered\)"):
        IntegrationRegistry().for_object(job())


def test_duplicate_gvks_are_refused() -> None:
    reg = IntegrationRegistry(builtin_integrations())
    with pytest.raises(DuplicateIntegrationError, match="Job in group 'batch'"):
        reg.register(JobIntegration())
    other = GroupVersionKind(group="example.com", versions=("v1",), kind="Job")

    class OtherJob(TrainerIntegration):
        gvk = other

    reg.register(OtherJob())  # the same kind in another group is a different GVK
    assert reg.for_object({"apiVersion": "example.com/v1", "kind": "Job"}).gvk == other
    assert reg.for_object(job()).gvk == JOB_GVK
    with pytest.raises(UnknownKindError, match=r"Job must have apiVersion batch/\.\.\. or "):
        reg.for_object({"apiVersion": "other.io/v1", "kind": "Job"})


def test_only_integrations_can_be_registered() -> None:
    with pytest.raises(TypeError, match="is not an Integration"):
        IntegrationRegistry().register(object())  # type: ignore[arg-type]


def test_gvk() -> None:
    assert JOB_GVK.api_version == "batch/v1"
    assert GroupVersionKind(group="", versions=("v1",), kind="Pod").api_version == "v1"
    assert GroupVersionKind(group="x.io", versions="v2", kind="K").versions == ("v2",)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one version"):
        GroupVersionKind(group="x.io", versions=(), kind="K")


# --- a custom kind ----------------------------------------------------------------------------


def test_a_custom_integration_plans_through_a_registry() -> None:
    reg = IntegrationRegistry(builtin_integrations())
    reg.register(TrainerIntegration())
    plan = reg.plan(trainer(workers=8))
    assert [o.kind for o in plan.objects()] == ["Workload", "PodGroup", "PodGroup"]
    gang = plan.pod_group("workers").spec.scheduling_policy.gang
    assert gang is not None and gang.min_count == 8
    pod = {"metadata": {"namespace": "ml", "annotations": {POD_SET_ANNOTATION: "workers"}}}
    assert plan.pod_group_for(pod) == plan.pod_group_names["workers"]
    assert capabilities(reg.for_object(trainer())) == frozenset()
    out = build_objects(trainer(), registry=reg)
    assert [o["kind"] for o in out] == ["Workload", "PodGroup", "PodGroup"]
    assert out[0]["metadata"]["ownerReferences"][0]["kind"] == "Trainer"
    with pytest.raises(UnknownKindError):
        build_objects(trainer())  # not in the default registry


def test_register_adds_to_the_default_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kinds, "_DEFAULT", IntegrationRegistry(builtin_integrations()))
    integration = TrainerIntegration()
    assert register(integration) is integration
    assert default_registry().lookup(TRAINER_GVK) is integration
    assert plan_for(trainer()).workload.metadata.name == "llm"
    with pytest.raises(TypeError, match="unexpected options"):
        plan_for(trainer(), revision="r")
    with pytest.raises(DuplicateIntegrationError):
        register(TrainerIntegration())


# --- capabilities -----------------------------------------------------------------------------


def test_capabilities_of_the_builtins() -> None:
    reg = default_registry()
    assert capabilities(reg.lookup(JOB_GVK)) == {"delegated-groups", "elastic-resize", "suspend"}
    assert capabilities(reg.lookup(JOBSET_GVK)) == {"child-workloads", "suspend"}
    assert capabilities(reg.lookup(LWS_GVK)) == frozenset()
    assert capabilities(reg.lookup(GENERIC_GVK)) == frozenset()
    assert isinstance(reg.lookup(JOB_GVK), DelegatedGroups)
    assert not isinstance(reg.lookup(JOB_GVK), ChildWorkloads)
    assert isinstance(reg.lookup(JOBSET_GVK), ChildWorkloads)


def test_job_delegated_groups() -> None:
    integration = default_registry().lookup(JOB_GVK)
    assert isinstance(integration, DelegatedGroups)
    parent = simple_workload(
        name="js-wl",
        namespace="ml",
        owner={
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": "js", "uid": "js-uid"},
        },
        pod_sets=[PodSet(name="workers", replicas=4)],
    ).workload
    child = job(
        annotations={GROUP_TEMPLATE_NAME_ANNOTATION: "workers"},
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
    child["spec"].pop("scheduling")
    assert integration.delegated_template(job()) is None
    assert integration.delegated_template(child) == "workers"
    assert integration.find_parent_workload(child, [parent]) is parent
    plan = integration.plan_delegated(child, parent)
    assert not plan.owns_workload
    assert [o.kind for o in plan.objects()] == ["PodGroup"]
    assert plan.pod_groups[0].spec.workload_ref is not None
    assert plan.pod_groups[0].spec.workload_ref.template_name == "workers"


def test_job_elastic_resize_and_suspend() -> None:
    integration = default_registry().lookup(JOB_GVK)
    assert isinstance(integration, ElasticResize) and isinstance(integration, Suspendable)
    grown = job()
    grown["spec"]["parallelism"] = 5
    patches = integration.resize_patches(grown)
    assert [p.kind for p in patches] == ["Workload", "PodGroup"]
    assert patches[1].body == {"spec": {"schedulingPolicy": {"gang": {"minCount": 5}}}}
    assert patches == integration.plan(grown).patches()
    assert not integration.is_suspended(job())
    suspended = job()
    suspended["spec"]["suspend"] = True
    assert integration.is_suspended(suspended)
    assert integration.suspend_patch(suspended, False) == {"spec": {"suspend": False}}


def test_jobset_child_workloads() -> None:
    integration = default_registry().lookup(JOBSET_GVK)
    assert isinstance(integration, ChildWorkloads)
    doc = jobset({"schedulingPolicy": {"gang": {}}})
    plan = integration.plan(doc)
    children = integration.child_workloads(doc)
    assert [c["metadata"]["name"] for c in children] == ["js-workers-0", "js-workers-1"]
    first = children[0]
    assert first["apiVersion"] == "batch/v1" and first["kind"] == "Job"
    assert first["metadata"]["namespace"] == "ml"
    assert first["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "name": "js",
            "uid": "js-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    labels = first["metadata"]["labels"]
    assert labels["team"] == "a"
    assert labels["jobset.sigs.k8s.io/jobset-name"] == "js"
    assert labels["jobset.sigs.k8s.io/replicatedjob-name"] == "workers"
    assert labels["jobset.sigs.k8s.io/replicatedjob-replicas"] == "2"
    assert children[1]["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"] == "1"
    assert children[1]["metadata"]["labels"]["jobset.sigs.k8s.io/job-global-index"] == "1"
    template = first["spec"]["template"]
    jobset_labels = {k: v for k, v in labels.items() if k.startswith("jobset.sigs.k8s.io/")}
    assert len(jobset_labels) == 6
    assert template["metadata"]["labels"] == {"app": "w", **jobset_labels}
    group = template["spec"]["schedulingGroup"]["podGroupName"]
    assert group == plan.pod_group_names["js-workers-0"]
    assert first["metadata"]["annotations"][GROUP_TEMPLATE_NAME_ANNOTATION]
    # the child Job is not managed by the Job controller: its pods already name their group
    with pytest.raises(NotManagedError):
        default_registry().plan(first)
    # the input is left alone
    assert (
        "schedulingGroup"
        not in doc["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    )


def test_jobset_without_scheduling_has_plain_children_and_no_plan() -> None:
    integration = default_registry().lookup(JOBSET_GVK)
    assert isinstance(integration, ChildWorkloads)
    doc = jobset(uid=None)
    with pytest.raises(NotManagedError, match=r"no spec\.scheduling"):
        integration.plan(doc)
    (first, _) = integration.child_workloads(doc)
    assert "annotations" not in first["metadata"]
    assert "ownerReferences" not in first["metadata"]
    assert "schedulingGroup" not in first["spec"]["template"]["spec"]
    with pytest.raises(ValidationError, match=r"spec.replicatedJobs\[0\].name"):
        integration.child_workloads({**doc, "spec": {"replicatedJobs": [{}]}})


def test_lws_pods_map_to_their_pod_groups() -> None:
    doc = lws()
    pods = lws_pods(doc)
    assert [p["metadata"]["name"] for p in pods] == [
        "l-0",
        "l-0-1",
        "l-0-2",
        "l-1",
        "l-1-1",
        "l-1-2",
    ]
    worker = pods[1]["metadata"]
    assert worker["labels"]["role"] == "w"
    assert worker["labels"]["leaderworkerset.sigs.k8s.io/worker-index"] == "1"
    assert worker["annotations"] == {
        "leaderworkerset.sigs.k8s.io/size": "3",
        "leaderworkerset.sigs.k8s.io/leader-name": "l-0",
    }
    plan = plan_lws(doc)
    assert [plan.pod_group_for(p) for p in pods] == ["l-0"] * 3 + ["l-1"] * 3
    sub = lws(size=5, subGroupPolicy={"subGroupSize": 2})
    sub["metadata"]["annotations"] = {
        "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology": "rack"
    }
    sub_pods = lws_pods(sub)
    assert [
        p["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/subgroup-index"] for p in sub_pods
    ][:5] == ["0", "0", "0", "1", "1"]
    sub_plan = plan_lws(sub)
    assert [sub_plan.pod_group_for(p) for p in sub_pods[:5]] == ["l-0-0"] * 3 + ["l-0-1"] * 2


def test_job_pod_metadata_is_what_the_job_plan_reads() -> None:
    labels, annotations = job_pod_metadata("j", "j-uid", completion_index=2)
    assert labels["batch.kubernetes.io/job-name"] == "j"
    assert labels["batch.kubernetes.io/controller-uid"] == "j-uid"
    assert annotations == {"batch.kubernetes.io/job-completion-index": "2"}
    assert job_pod_metadata("j")[0] == {"batch.kubernetes.io/job-name": "j", "job-name": "j"}
    plan = plan_for(job())
    pod = {"metadata": {"namespace": "ml", "labels": labels}}
    assert plan.pod_group_for(pod) == plan.pod_group_names["j"]


# --- laziness ---------------------------------------------------------------------------------


def test_adapter_modules_load_on_first_use() -> None:
    code = (
        "import sys\n"
        "from workloadbuilder.kinds import default_registry\n"
        "reg = default_registry()\n"
        "doc = {'apiVersion': 'jobset.x-k8s.io/v1alpha2', 'kind': 'JobSet'}\n"
        "integration = reg.for_object(doc)\n"
        "mods = ('jobset', 'lws', 'generic')\n"
        "print(*[f'workloadbuilder.kinds.{m}' in sys.modules for m in mods])\n"
        "try:\n"
        "    integration.plan(doc)\n"
        "except Exception:\n"
        "    pass\n"
        "print(*[f'workloadbuilder.kinds.{m}' in sys.modules for m in mods])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["False False False", "True False False"]
