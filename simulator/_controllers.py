"""Minimal stand-ins for the Job, JobSet and LeaderWorkerSet controllers.

They use the SDK's kind adapters (``workloadbuilder.kinds``) to compute the Workload and
PodGroups of an object, and then create the pods directly, each with
``spec.schedulingGroup.podGroupName`` from ``plan.pod_group_for(pod)``:

* **Job**: ``min(parallelism, completions)`` pods at first; when ``completions`` is set, each
  pod that succeeds is replaced until ``completions`` pods have been created (pods never fail).
  Pods are named ``<job>-<n>``; Indexed Jobs get the completion index ``n``.
* **JobSet**: every child Job ``<jobset>-<replicatedJob>-<index>`` is played like a Job (the
  child Job objects themselves are not created; pods are owned by the JobSet).
* **LeaderWorkerSet**: ``replicas`` groups of ``size`` pods: the leader ``<lws>-<g>`` and the
  workers ``<lws>-<g>-<w>`` (no StatefulSets; pods are owned by the LeaderWorkerSet).
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from workloadbuilder.api import CompositePodGroup, PodGroup, Workload
from workloadbuilder.kinds import Plan

__all__ = ["JobRun", "Planned", "plan_object"]

PodGroupFor = Callable[[Mapping[str, Any]], "str | None"]


@attrs.frozen(kw_only=True)
class Planned:
    """What a controller creates for one object: the scheduling objects in creation order
    (Workload, CompositePodGroups root first, PodGroups), the job runs that make pods, and the
    pods that are created once and never replaced."""

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
    extra_labels: dict[str, str]
    group_for: PodGroupFor | None
    created: int = 0
    succeeded: int = 0

    def initial_pods(self) -> list[dict[str, Any]]:
        """The first ``min(parallelism, completions)`` pods."""
        n = (
            self.parallelism
            if self.completions is None
            else min(self.parallelism, self.completions)
        )
        return [self._next_pod() for _ in range(n)]

    def pod_succeeded(self) -> list[dict[str, Any]]:
        """Record a success; returns the replacement pod, if the Job needs one."""
        self.succeeded += 1
        if self.completions is not None and self.created < self.completions:
            return [self._next_pod()]
        return []

    def _next_pod(self) -> dict[str, Any]:
        index = self.created
        self.created += 1
        meta = self.template.get("metadata") or {}
        labels = dict(meta.get("labels") or {})
        annotations = dict(meta.get("annotations") or {})
        labels.update(self.extra_labels)
        uid = str(self.owner_ref.get("uid", ""))
        labels.update(
            {
                "batch.kubernetes.io/job-name": self.name,
                "job-name": self.name,
            }
        )
        if uid:
            labels["batch.kubernetes.io/controller-uid"] = uid
            labels["controller-uid"] = uid
        if self.indexed:
            labels["batch.kubernetes.io/job-completion-index"] = str(index)
            annotations["batch.kubernetes.io/job-completion-index"] = str(index)
        pod = _pod(
            f"{self.name}-{index}",
            self.namespace,
            labels,
            annotations,
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


def _plan_objects(plan: Plan) -> tuple[Workload | CompositePodGroup | PodGroup, ...]:
    return tuple(plan.objects())


def _job_run(
    namespace: str,
    name: str,
    spec: Mapping[str, Any],
    owner_ref: dict[str, Any],
    extra_labels: dict[str, str],
    group_for: PodGroupFor | None,
) -> JobRun:
    parallelism = spec.get("parallelism")
    completions = spec.get("completions")
    return JobRun(
        namespace=namespace,
        name=name,
        template=copy.deepcopy(dict(spec.get("template") or {})),
        parallelism=1 if parallelism is None else int(parallelism),
        completions=None if completions is None else int(completions),
        indexed=spec.get("completionMode") == "Indexed",
        owner_ref=owner_ref,
        extra_labels=extra_labels,
        group_for=group_for,
    )


def plan_object(obj: Mapping[str, Any]) -> Planned:
    """What the controller of ``obj`` (a stored Job, JobSet or LeaderWorkerSet, with its
    ``metadata.uid``) creates. Errors of the adapters (``ValidationError``, ``BuildError``)
    propagate."""
    kind = obj.get("kind")
    if kind == "Job":
        return _plan_job(obj)
    if kind == "JobSet":
        return _plan_jobset(obj)
    if kind == "LeaderWorkerSet":
        return _plan_lws(obj)
    raise ValueError(f"no controller for kind {kind!r}")


def _plan_job(job: Mapping[str, Any]) -> Planned:
    from workloadbuilder.kinds import NotManagedError, plan_job

    meta = job["metadata"]
    spec = job.get("spec") or {}
    try:
        plan: Plan | None = plan_job(job)
    except NotManagedError:  # bring-your-own PodGroup: the pods keep their schedulingGroup
        plan = None
    run = _job_run(
        meta["namespace"],
        meta["name"],
        spec,
        _owner_ref(job),
        {},
        plan.pod_group_for if plan is not None else None,
    )
    return Planned(objects=_plan_objects(plan) if plan is not None else (), runs=(run,))


def _plan_jobset(js: Mapping[str, Any]) -> Planned:
    from workloadbuilder.kinds.jobset import plan_jobset

    meta = js["metadata"]
    ns, name = meta["namespace"], meta["name"]
    spec = js.get("spec") or {}
    # Without spec.scheduling the JobSet controller creates no Workload or PodGroups.
    plan = plan_jobset(js) if spec.get("scheduling") is not None else None
    owner = _owner_ref(js)
    runs: list[JobRun] = []
    global_index = 0
    for rj in spec.get("replicatedJobs") or ():
        replicas = rj.get("replicas")
        replicas = 1 if replicas is None else int(replicas)
        for index in range(replicas):
            job_name = f"{name}-{rj['name']}-{index}"
            labels = {
                "jobset.sigs.k8s.io/jobset-name": name,
                "jobset.sigs.k8s.io/replicatedjob-name": str(rj["name"]),
                "jobset.sigs.k8s.io/replicatedjob-replicas": str(replicas),
                "jobset.sigs.k8s.io/job-index": str(index),
                "jobset.sigs.k8s.io/job-global-index": str(global_index),
                "jobset.sigs.k8s.io/job-key": hashlib.sha1(f"{ns}/{job_name}".encode()).hexdigest(),
            }
            global_index += 1
            job_spec = (rj.get("template") or {}).get("spec") or {}
            runs.append(
                _job_run(
                    ns,
                    job_name,
                    job_spec,
                    owner,
                    labels,
                    plan.pod_group_for if plan is not None else None,
                )
            )
    return Planned(objects=_plan_objects(plan) if plan is not None else (), runs=tuple(runs))


def _lws_subgroup(w: int, size: int, lwt: Mapping[str, Any]) -> str | None:
    """The ``subgroup-index`` label the LWS controller gives pod ``w`` (0 = leader)."""
    policy = lwt.get("subGroupPolicy") or {}
    sgs = policy.get("subGroupSize")
    if not isinstance(sgs, int) or sgs < 1:
        return None
    if policy.get("subGroupPolicyType") == "LeaderExcluded":
        return None if w == 0 else str((w - 1) // sgs)
    if (size - 1) % sgs == 0:  # the leader is an extra pod in subgroup 0
        return "0" if w == 0 else str((w - 1) // sgs)
    return str(w // sgs)


def _plan_lws(lws: Mapping[str, Any]) -> Planned:
    from workloadbuilder.kinds.lws import plan_lws

    meta = lws["metadata"]
    ns, name = meta["namespace"], meta["name"]
    spec = lws.get("spec") or {}
    plan = plan_lws(lws) if spec.get("scheduling") is not None else None
    lwt = spec.get("leaderWorkerTemplate") or {}
    size = int(lwt.get("size") or 1)
    replicas = spec.get("replicas")
    replicas = 1 if replicas is None else int(replicas)
    worker = lwt.get("workerTemplate") or {}
    leader = lwt.get("leaderTemplate") or worker
    owner = _owner_ref(lws)
    pods: list[dict[str, Any]] = []
    for g in range(replicas):
        group_key = hashlib.sha1(f"{ns}/{name}-{g}".encode()).hexdigest()
        for w in range(size):
            tmpl = leader if w == 0 else worker
            tmeta = tmpl.get("metadata") or {}
            labels = dict(tmeta.get("labels") or {})
            labels.update(
                {
                    "leaderworkerset.sigs.k8s.io/name": name,
                    "leaderworkerset.sigs.k8s.io/group-index": str(g),
                    "leaderworkerset.sigs.k8s.io/worker-index": str(w),
                    "leaderworkerset.sigs.k8s.io/group-key": group_key,
                }
            )
            sub = _lws_subgroup(w, size, lwt)
            if sub is not None:
                labels["leaderworkerset.sigs.k8s.io/subgroup-index"] = sub
            annotations = dict(tmeta.get("annotations") or {})
            annotations["leaderworkerset.sigs.k8s.io/size"] = str(size)
            if w > 0:
                annotations["leaderworkerset.sigs.k8s.io/leader-name"] = f"{name}-{g}"
            pod_name = f"{name}-{g}" if w == 0 else f"{name}-{g}-{w}"
            pod = _pod(pod_name, ns, labels, annotations, tmpl.get("spec") or {}, owner)
            pods.append(_with_group(pod, plan.pod_group_for if plan is not None else None))
    objects = _plan_objects(plan) if plan is not None else ()
    return Planned(objects=objects, pods=tuple(pods))
