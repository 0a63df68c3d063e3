"""The simulator's controllers: the reference integrations keep the scheduling objects, and
minimal stand-ins for what kube-controller-manager, the JobSet and the LeaderWorkerSet
controllers do with pods.

**Scheduling objects** (Workload, CompositePodGroups, PodGroups) are not made here: the engine
runs one :class:`workloadbuilder.runtime.Reconciler` per played kind with the integration of
:func:`played_integrations` (the SDK's native :class:`~workloadbuilder.kinds.JobIntegration`
for Jobs with ``spec.scheduling``, as kube-controller-manager's ``WorkloadWithJob`` does; the
``integrations`` package's JobSet and LeaderWorkerSet integrations). They create, resize and
clean up the objects exactly as in a cluster.

**Pods** are what the stand-ins below create (:func:`pod_controller`), each linked to its group
by the integration (``group_for`` is the Reconciler's ``pod_group_for``, i.e. the plan's
``pod_group_for``):

* **Job**: ``min(parallelism, completions)`` pods at first; when ``completions`` is set, each
  pod that succeeds is replaced until ``completions`` pods have been created (pods never fail).
  Pods are named ``<job>-<n>``; Indexed Jobs get the completion index ``n``.
* **Kinds with child workloads** (JobSet): every child Job the integration lists is played like
  a Job (the child Job objects themselves are not created; pods are owned by the parent and
  join the PodGroup their pod template names).
* **LeaderWorkerSet**: the pods of :func:`workloadbuilder.kinds.lws.lws_pods` (no
  StatefulSets; pods are owned by the LeaderWorkerSet). A preempted pod comes back alone or
  with its whole replica group, as ``spec.leaderWorkerTemplate.restartPolicy`` says
  (:func:`lws_restart`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from workloadbuilder.api import CompositePodGroup, PodGroup, Workload
from workloadbuilder.kinds import (
    JOB_GVK,
    JOBSET_GVK,
    LWS_GVK,
    ChildWorkloads,
    Integration,
    IntegrationRegistry,
    NotManagedError,
    Plan,
    UnknownKindError,
    default_registry,
)
from workloadbuilder.kinds.job import job_pod_metadata

__all__ = [
    "LWS_RESTART_POLICIES",
    "JobRun",
    "Planned",
    "controls",
    "lws_restart",
    "plan_object",
    "played_integrations",
    "pod_controller",
]

PodGroupFor = Callable[[Mapping[str, Any]], "str | None"]

_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"

#: The kinds (and versions) whose controllers the simulator plays.
_PLAYED = (JOB_GVK, JOBSET_GVK, LWS_GVK)


def controls(api_version: str, kind: str) -> bool:
    """True for the kinds whose pods the simulator creates (Job, JobSet, LeaderWorkerSet)."""
    return any(
        g.kind == kind and api_version in _api_versions(g.group, g.versions) for g in _PLAYED
    )


def _api_versions(group: str, versions: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f"{group}/{v}" if group else v for v in versions)


@attrs.frozen(kw_only=True)
class Planned:
    """What the controllers create for one object: the scheduling objects in creation order
    (Workload, CompositePodGroups root first, PodGroups; only :func:`plan_object` fills them,
    the simulator's Reconcilers create them), the job runs that make pods, and the pods that
    are created once and never replaced."""

    objects: tuple[Workload | CompositePodGroup | PodGroup, ...] = ()
    runs: tuple[JobRun, ...] = ()
    pods: tuple[dict[str, Any], ...] = ()


@attrs.define(kw_only=True)
class JobRun:
    """Plays one Job: makes its pods, and replacements while ``completions`` are not reached."""

    namespace: str
    name: str
    template: dict[str, Any]
    parallelism: int
    completions: int | None
    indexed: bool
    owner_ref: dict[str, Any]
    group_for: PodGroupFor | None
    created: int = 0
    succeeded: int = 0
    #: replacements of pods deleted before they succeeded (preempted): they do not count
    #: towards ``completions``
    replaced: int = 0

    def initial_pods(self) -> list[dict[str, Any]]:
        """The first ``min(parallelism, completions)`` pods."""
        n = (
            self.parallelism
            if self.completions is None
            else min(self.parallelism, self.completions)
        )
        return [self.next_pod() for _ in range(n)]

    def pod_succeeded(self) -> list[dict[str, Any]]:
        """Record a success; returns the replacement pod, if the Job needs one."""
        self.succeeded += 1
        if self.completions is not None and self.created - self.replaced < self.completions:
            return [self.next_pod()]
        return []

    def pod_deleted(self, pod: Mapping[str, Any]) -> dict[str, Any]:
        """The replacement the Job controller makes for a pod deleted before it succeeded
        (e.g. preempted): a new pod with the same completion index (Indexed Jobs) and the
        next name."""
        self.replaced += 1
        labels = (pod.get("metadata") or {}).get("labels") or {}
        index = labels.get(_COMPLETION_INDEX)
        return self.next_pod(int(index) if index is not None and self.indexed else None)

    def next_pod(self, completion_index: int | None = None) -> dict[str, Any]:
        """The Job's next pod (completion index = pods created so far, or
        ``completion_index`` for a replacement)."""
        index = self.created
        self.created += 1
        index_label = completion_index if completion_index is not None else index
        meta = self.template.get("metadata") or {}
        job_labels, job_annotations = job_pod_metadata(
            self.name,
            str(self.owner_ref.get("uid") or "") or None,
            completion_index=index_label if self.indexed else None,
        )
        pod = _pod(
            f"{self.name}-{index}",
            self.namespace,
            {**dict(meta.get("labels") or {}), **job_labels},
            {**dict(meta.get("annotations") or {}), **job_annotations},
            self.template.get("spec") or {},
            self.owner_ref,
        )
        return _with_group(pod, self.group_for)


def _pod(
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    spec: Mapping[str, Any],
    owner_ref: Mapping[str, Any],
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    if owner_ref.get("uid"):
        meta["ownerReferences"] = [dict(owner_ref)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": copy.deepcopy(dict(spec))}


def _with_group(pod: dict[str, Any], group_for: PodGroupFor | None) -> dict[str, Any]:
    spec = pod["spec"]
    if group_for is not None and not spec.get("schedulingGroup"):
        name = group_for(pod)
        if name:
            spec["schedulingGroup"] = {"podGroupName": name}
    return pod


def _owner_ref(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    return {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _plan(integration: Integration, obj: Mapping[str, Any]) -> Plan | None:
    """The integration's plan, or None when its controller manages no scheduling objects
    (bring-your-own PodGroup, or no ``spec.scheduling``): the pods then keep their own
    ``schedulingGroup``, if any."""
    try:
        return integration.plan(obj)
    except NotManagedError:
        return None


def _job_run(
    job: Mapping[str, Any], owner_ref: dict[str, Any], group_for: PodGroupFor | None
) -> JobRun:
    meta = job.get("metadata") or {}
    spec = job.get("spec") or {}
    parallelism = spec.get("parallelism")
    completions = spec.get("completions")
    return JobRun(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta["name"]),
        template=copy.deepcopy(dict(spec.get("template") or {})),
        parallelism=1 if parallelism is None else int(parallelism),
        completions=None if completions is None else int(completions),
        indexed=spec.get("completionMode") == "Indexed",
        owner_ref=owner_ref,
        group_for=group_for,
    )


#: ``spec.leaderWorkerTemplate.restartPolicy`` values of LeaderWorkerSet v1 (the CRD's enum);
#: unset means ``RecreateGroupOnPodRestart`` (the CRD default).
LWS_RESTART_POLICIES = ("RecreateGroupOnPodRestart", "RecreateGroupAfterStart", "None", "Default")


def lws_restart(lws: Mapping[str, Any], pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """How the LeaderWorkerSet controller replaces ``pod`` (one of ``lws``'s) when it is
    preempted: ``(policy, group index)`` when the whole replica group (leader and workers) is
    recreated -- ``RecreateGroupOnPodRestart`` (the default) always,
    ``RecreateGroupAfterStart`` only when no pod of the group is pending (the caller checks)
    -- or None when the pod alone is recreated (``None``, or the deprecated ``Default``), as
    its StatefulSet would. The real controller deletes the leader with foreground
    propagation, which takes the worker StatefulSet and its pods with it, and the leader
    StatefulSet recreates the group."""
    from workloadbuilder.kinds.lws import GROUP_INDEX_LABEL

    spec = lws.get("spec") or {}
    lwt = (spec.get("leaderWorkerTemplate") or {}) if isinstance(spec, Mapping) else {}
    policy = str(lwt.get("restartPolicy") or "RecreateGroupOnPodRestart")
    if policy not in ("RecreateGroupOnPodRestart", "RecreateGroupAfterStart"):
        return None
    labels = (pod.get("metadata") or {}).get("labels") or {}
    index = labels.get(GROUP_INDEX_LABEL)
    return (policy, str(index)) if index is not None else None


def played_integrations() -> dict[str, Integration]:
    """Kind -> the integration the simulator runs a Reconciler for: the SDK's native
    :class:`~workloadbuilder.kinds.JobIntegration` for ``batch/v1`` Jobs (they carry
    ``spec.scheduling``, so it produces what kube-controller-manager's ``WorkloadWithJob``
    controller would -- the adapter is parity-tested against it; ``integrations.job``'s opt-in
    integration leaves such Jobs to the native controller), and the JobSet and LeaderWorkerSet
    integrations of :mod:`integrations`."""
    from workloadbuilder.integrations import integration_for
    from workloadbuilder.kinds import JobIntegration

    return {
        JOB_GVK.kind: JobIntegration(),
        JOBSET_GVK.kind: integration_for("jobset"),
        LWS_GVK.kind: integration_for("lws"),
    }


def pod_controller(
    obj: Mapping[str, Any], integration: Integration, group_for: PodGroupFor | None
) -> Planned:
    """The pods the workload controller of ``obj`` (a stored Job, JobSet or LeaderWorkerSet,
    with its ``metadata.uid``) creates, linked to their PodGroup by ``group_for`` (the
    integration's ``pod_group_for``; None when the integration manages no groups for
    ``obj``: pods then keep their template's ``schedulingGroup``, if any)."""
    owner = _owner_ref(obj)
    if isinstance(integration, ChildWorkloads):
        # The children's pod templates already name their PodGroups (the parent planned them).
        runs = tuple(_job_run(child, owner, None) for child in integration.child_workloads(obj))
        return Planned(runs=runs)
    if integration.gvk == JOB_GVK:
        return Planned(runs=(_job_run(obj, owner, group_for),))
    if integration.gvk != LWS_GVK:
        raise ValueError(f"no controller for kind {obj.get('kind')!r}")
    from workloadbuilder.kinds.lws import lws_pods  # loaded on first use, like the adapter

    pods = []
    for pod in lws_pods(obj):
        if owner.get("uid"):
            pod["metadata"]["ownerReferences"] = [dict(owner)]
        pods.append(_with_group(pod, group_for))
    return Planned(pods=tuple(pods))


def plan_object(obj: Mapping[str, Any], registry: IntegrationRegistry | None = None) -> Planned:
    """What the controllers of ``obj`` would create, without a cluster: the integration's
    plan (the objects its Reconciler creates) and the pods of :func:`pod_controller`. The
    simulator itself runs the Reconcilers; this is for tests and tools. Errors of the adapters
    (``ValidationError``, ``BuildError``) propagate; a kind the simulator does not play is a
    ``ValueError``."""
    registry = registry if registry is not None else default_registry()
    kind = obj.get("kind")
    try:
        integration = registry.for_object(obj)
    except UnknownKindError:
        raise ValueError(f"no controller for kind {kind!r}") from None
    if integration.gvk not in _PLAYED:
        raise ValueError(f"no controller for kind {kind!r}")
    plan = _plan(integration, obj)
    objects = tuple(plan.objects()) if plan is not None else ()
    pods = pod_controller(obj, integration, plan.pod_group_for if plan is not None else None)
    return attrs.evolve(pods, objects=objects)
