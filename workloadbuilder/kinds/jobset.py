"""JobSet adapter (``jobset.x-k8s.io/v1alpha2``, KEP-969 ``spec.scheduling``).

Mirrors the JobSet controller's Workload-Aware Scheduling integration (kubernetes-sigs/jobset
KEP-969 and its alpha implementation, ``pkg/controllers/{scheduling,workload_builder}.go``):

* **Top-level mode** — ``spec.scheduling`` without ``replicatedJobs`` and with a gang (or unset,
  which defaults to gang) policy, and no sequenced startup: one PodGroupTemplate for the whole
  JobSet, ``minCount = sum(parallelism * replicas)`` unless set explicitly.
* **Per-ReplicatedJob mode** — ``replicatedJobs`` entries, a basic top-level policy, or
  sequenced startup (``dependsOn`` on any ReplicatedJob or ``startupPolicyOrder: InOrder``,
  which would deadlock one JobSet-wide gang): one template per ``replicatedJobs`` entry (its
  targets share one PodGroup, ``minCount = sum(parallelism * replicas)`` of the targets) and one per
  untargeted ReplicatedJob. Under sequenced startup an explicit top-level ``minCount`` is refused.
* **Per-Job mode** (``replicatedJobs[].job``, "gang of gangs") — one template and PodGroup per
  child Job, ``minCount = parallelism``.

All templates go into one Workload ``<jobset>-<sha1(JobSet/<ns>/<name>)[:10]>``; one PodGroup is
created per template. Every child Job ``<jobset>-<replicatedJob>-<index>`` gets the annotation
``scheduling.k8s.io/group-template-name`` and its pods ``spec.schedulingGroup.podGroupName``
(see :func:`jobset_child_jobs`).

Extension (not in JobSet v0.13): the exclusive-placement annotation
``alpha.jobset.sigs.k8s.io/exclusive-topology`` (on the JobSet, or on a ReplicatedJob's Job
template) becomes the topology constraint of the PodGroups that hold those Jobs, unless
``schedulingConstraints`` are given explicitly (a different explicit key is an error).
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from workloadbuilder import naming
from workloadbuilder.api import (
    TopologyConstraint,
    WorkloadPodGroupSchedulingConstraints,
    to_dict,
)
from workloadbuilder.builder import Plan, PodSetKeyFunc
from workloadbuilder.errors import FieldError, ValidationError
from workloadbuilder.kinds._common import (
    LeafSpec,
    Owner,
    as_int,
    as_list,
    as_map,
    check_object_count,
    compile_leaves,
)
from workloadbuilder.kinds._jobset_input import (
    EXCLUSIVE_TOPOLOGY_ANNOTATION,
    Entry,
    Level,
    RJob,
    check_entries,
    check_leaves,
    check_managed_fields,
    check_single,
    check_untargeted,
    explicit_min,
    invalid,
    name_ns,
    parse_entries,
    parse_level,
    parse_rjobs,
)
from workloadbuilder.kinds.job import GROUP_TEMPLATE_NAME_ANNOTATION, NotManagedError

__all__ = [
    "EXCLUSIVE_TOPOLOGY_ANNOTATION",
    "GROUP_TEMPLATE_NAME_ANNOTATION",
    "JOBSET_API_GROUP",
    "JobSetChildJob",
    "jobset_child_job_manifests",
    "jobset_child_jobs",
    "jobset_workload_name",
    "plan_jobset",
]

JOBSET_API_GROUP = "jobset.x-k8s.io"

_LABEL_RJ = "jobset.sigs.k8s.io/replicatedjob-name"
_LABEL_RJ_REPLICAS = "jobset.sigs.k8s.io/replicatedjob-replicas"
_LABEL_JOB_INDEX = "jobset.sigs.k8s.io/job-index"
_LABEL_JOB_GLOBAL_INDEX = "jobset.sigs.k8s.io/job-global-index"
_LABEL_JOB_KEY = "jobset.sigs.k8s.io/job-key"
_LABEL_JOBSET = "jobset.sigs.k8s.io/jobset-name"


@attrs.frozen(kw_only=True)
class JobSetChildJob:
    """A child Job of a JobSet and where its pods are scheduled.

    ``annotations`` are the ones the JobSet controller stamps on the Job
    (``scheduling.k8s.io/group-template-name``); its pod template gets
    ``spec.schedulingGroup.podGroupName = pod_group_name``.
    """

    name: str
    replicated_job: str
    index: int
    template_name: str
    pod_group_name: str

    @property
    def annotations(self) -> dict[str, str]:
        """The downward-mapping annotation for the child Job."""
        return {GROUP_TEMPLATE_NAME_ANNOTATION: self.template_name}


# ---------------------------------------------------------------------------------------------
# Naming (KEP-969 "Naming Convention"; the rules live in workloadbuilder.naming)


def _workload_name(name: str, namespace: str) -> str:
    return naming.jobset_workload_name(name, namespace)


def jobset_workload_name(jobset: Mapping[str, Any]) -> str:
    """The name of the one Workload of a JobSet: ``<name>-<sha1(JobSet/<ns>/<name>)[:10]>``."""
    meta = as_map(jobset.get("metadata"), "metadata")
    name, namespace = name_ns(meta)
    return _workload_name(name, namespace)


# ---------------------------------------------------------------------------------------------
# Planning


@attrs.frozen(kw_only=True)
class _Compiled:
    name: str  # the JobSet's
    namespace: str
    leaves: tuple[LeafSpec, ...]
    pod_group_names: dict[str, str]  # template -> PodGroup
    jobs: tuple[JobSetChildJob, ...]


def _compile(jobset: Mapping[str, Any]) -> _Compiled:
    """Validate a JobSet as the API server and the JobSet webhook do, and compile its
    PodGroupTemplates (leaves) and child Jobs; the steps are the functions below."""
    if not isinstance(jobset, Mapping):
        raise ValidationError([FieldError(path="", type="Invalid value", detail="not an object")])
    meta = as_map(jobset.get("metadata"), "metadata")
    js_name, ns = name_ns(meta)
    annotations = as_map(meta.get("annotations"), "metadata.annotations")
    spec = as_map(jobset.get("spec"), "spec")
    if spec.get("scheduling") is None:
        raise NotManagedError(
            f"JobSet {ns}/{js_name} has no spec.scheduling: the JobSet controller creates no "
            "Workload or PodGroups for it",
            reason="no spec.scheduling",
        )
    sched = as_map(spec.get("scheduling"), "spec.scheduling")
    js_exclusive = annotations.get(EXCLUSIVE_TOPOLOGY_ANNOTATION)
    rjobs = parse_rjobs(spec, str(js_exclusive) if js_exclusive else None)
    errors: list[FieldError] = []
    if not rjobs:
        raise ValidationError(
            [
                FieldError(
                    path="spec.replicatedJobs",
                    type="Invalid value",
                    detail="must contain at least one replicatedJob when scheduling is configured",
                )
            ]
        )
    check_managed_fields(rjobs, errors)

    top = parse_level(sched, "spec.scheduling")
    entries = parse_entries(sched)

    uses_top = top.policy is not None or top.constraints is not None or top.disruption is not None
    if uses_top and entries:
        errors.append(
            FieldError(
                path="spec.scheduling",
                type="Forbidden",
                detail="cannot set schedulingPolicy, schedulingConstraints, or disruptionMode "
                "together with replicatedJobs; use exactly one of the top-level scheduling API "
                "or the per-ReplicatedJob (replicatedJobs) scheduling API",
            )
        )
    by_name = {rj.name: rj for rj in rjobs}
    targeted = check_entries(entries, by_name, errors)
    if entries and not uses_top:
        check_untargeted(rjobs, targeted, errors)

    startup = as_map(spec.get("startupPolicy"), "spec.startupPolicy")
    sequenced = startup.get("startupPolicyOrder") == "InOrder" or any(rj.depends_on for rj in rjobs)
    top_level = not entries and (top.policy is None or top.policy.gang is not None)
    single = top_level and not sequenced
    top_min = explicit_min(top)
    if sequenced and not entries and top_min is not None:
        errors.append(
            invalid(
                "spec.scheduling.schedulingPolicy.gang.minCount",
                top_min,
                "cannot be set when DependsOn or InOrder StartupPolicy is used; use "
                "per-ReplicatedJob gang policies instead",
            )
        )
    total_pods = sum(rj.parallelism * rj.replicas for rj in rjobs)
    if single:
        check_single(rjobs, top_min, total_pods, errors)
    if errors:
        raise ValidationError(errors)

    leaves, jobs_of = _plan_leaves(
        js_name,
        ns,
        top,
        entries,
        rjobs,
        single=single,
        sequenced=sequenced,
        top_min=top_min,
        total_pods=total_pods,
        errors=errors,
    )
    check_leaves(leaves, errors)
    if errors:
        raise ValidationError(errors)
    pg_names = {
        leaf.name: naming.jobset_pod_group_name(js_name, leaf.name, top_level=single)
        for leaf in leaves
    }
    jobs = _child_jobs(js_name, rjobs, jobs_of, pg_names)
    return _Compiled(
        name=js_name, namespace=ns, leaves=tuple(leaves), pod_group_names=pg_names, jobs=jobs
    )


def _plan_leaves(
    js_name: str,
    ns: str,
    top: Level,
    entries: Sequence[Entry],
    rjobs: Sequence[RJob],
    *,
    single: bool,
    sequenced: bool,
    top_min: int | None,
    total_pods: int,
    errors: list[FieldError],
) -> tuple[list[LeafSpec], dict[str, list[tuple[str, int]]]]:
    """The PodGroupTemplates (leaves) and, per template, the child Jobs ``(replicatedJob,
    index)`` it schedules."""
    by_name = {rj.name: rj for rj in rjobs}
    leaves: list[LeafSpec] = []
    jobs_of: dict[str, list[tuple[str, int]]] = {}  # template -> [(rj, index)]

    def add(
        name: str, level: Level, members: Sequence[RJob], default_min: int, keep_min: bool
    ) -> None:
        # An explicit minCount is kept only where upstream keeps it (JobSet treats 0 as unset);
        # otherwise the callback computes it from the represented pod count.
        policy = level.policy
        gang = policy.gang if policy is not None else None
        if policy is not None and gang is not None and (not keep_min or not gang.min_count):
            policy = attrs.evolve(policy, gang=attrs.evolve(gang, min_count=None))
        constraints = _with_exclusive(level, members, errors)
        leaves.append(
            LeafSpec(
                name=name,
                path="spec.scheduling",
                policy=policy,
                constraints=constraints,
                disruption=level.disruption,
                claims=level.claims,
                priority_class_name=members[0].priority_class_name,
                default_min_count=default_min,
                default_gang=True,
            )
        )

    if single:
        tname = naming.jobset_top_level_template_name(js_name, ns)
        add(tname, top, rjobs, top_min or total_pods, keep_min=True)
        jobs_of[tname] = [(rj.name, i) for rj in rjobs for i in range(rj.replicas)]
    else:
        grouped: set[str] = set()
        for e in entries:
            members = [by_name[t] for t in e.targets if t in by_name]
            grouped.update(m.name for m in members)
            if e.job is not None:
                rj = members[0]
                for idx in range(rj.replicas):
                    tname = naming.jobset_job_template_name(js_name, ns, rj.name, idx)
                    add(
                        tname,
                        _fallback(e.job, top),
                        [rj],
                        rj.parallelism,
                        keep_min=e.job.policy is not None,
                    )
                    jobs_of.setdefault(tname, []).append((rj.name, idx))
                continue
            tname = naming.jobset_group_template_name(js_name, ns, e.targets)
            keep = e.leaf.policy is not None or not sequenced
            pods = sum(m.parallelism * m.replicas for m in members)
            add(tname, _fallback(e.leaf, top), members, pods, keep)
            jobs_of[tname] = [(m.name, i) for m in members for i in range(m.replicas)]
        for rj in rjobs:
            if rj.name in grouped:
                continue
            tname = naming.jobset_replicated_job_template_name(js_name, ns, rj.name)
            add(tname, top, [rj], rj.parallelism * rj.replicas, keep_min=not sequenced)
            jobs_of[tname] = [(rj.name, i) for i in range(rj.replicas)]
    return leaves, jobs_of


def _child_jobs(
    js_name: str,
    rjobs: Sequence[RJob],
    jobs_of: Mapping[str, list[tuple[str, int]]],
    pg_names: Mapping[str, str],
) -> tuple[JobSetChildJob, ...]:
    """The child Jobs with their template and PodGroup, in creation order."""
    jobs = tuple(
        JobSetChildJob(
            name=f"{js_name}-{rj}-{idx}",
            replicated_job=rj,
            index=idx,
            template_name=tname,
            pod_group_name=pg_names[tname],
        )
        for tname, members in jobs_of.items()
        for rj, idx in members
    )
    order = {rj.name: rj.index for rj in rjobs}
    jobs = tuple(sorted(jobs, key=lambda j: (order[j.replicated_job], j.index)))
    return jobs


def _fallback(level: Level, top: Level) -> Level:
    """Leaf blocks win; unset ones fall back to the JobSet-level blocks (as upstream)."""
    return attrs.evolve(
        level,
        policy=level.policy if level.policy is not None else top.policy,
        constraints=level.constraints if level.constraints is not None else top.constraints,
        disruption=level.disruption if level.disruption is not None else top.disruption,
    )


def _with_exclusive(
    level: Level, members: Sequence[RJob], errors: list[FieldError]
) -> WorkloadPodGroupSchedulingConstraints | None:
    keys = {m.exclusive_key for m in members}
    if keys == {None}:
        return level.constraints
    if len(keys) > 1:
        errors.append(
            invalid(
                f"spec.replicatedJobs[{members[0].index}].template.metadata.annotations"
                f"[{EXCLUSIVE_TOPOLOGY_ANNOTATION}]",
                sorted(k or "" for k in keys),
                "ReplicatedJobs that share one PodGroup must use the same exclusive topology",
            )
        )
        return level.constraints
    key = next(iter(keys))
    assert key is not None
    if level.constraints is not None and level.constraints.topology:
        if any(t.key != key for t in level.constraints.topology):
            errors.append(
                invalid(
                    f"{level.path}.schedulingConstraints.topology",
                    [t.key for t in level.constraints.topology],
                    f"conflicts with the {EXCLUSIVE_TOPOLOGY_ANNOTATION} annotation ({key!r})",
                )
            )
        return level.constraints
    return WorkloadPodGroupSchedulingConstraints(topology=(TopologyConstraint(key=key),))


def _owner(jobset: Mapping[str, Any], name: str) -> Owner:
    meta = as_map(jobset.get("metadata"), "metadata")
    uid = meta.get("uid")
    api_version = jobset.get("apiVersion") or f"{JOBSET_API_GROUP}/v1alpha2"
    return Owner(
        api_version=str(api_version),
        kind="JobSet",
        name=name,
        uid=str(uid) if uid else None,
    )


def plan_jobset(jobset: Mapping[str, Any]) -> Plan:
    """Compile a JobSet with ``spec.scheduling`` into its Workload and PodGroups.

    ``plan.pod_group_names`` maps every child Job name (``<jobset>-<replicatedJob>-<index>``)
    to its PodGroup; ``plan.pod_group_for(pod)`` reads the pod's
    ``batch.kubernetes.io/job-name`` (or the JobSet labels). Without ``metadata.uid`` the
    objects carry no ownerReferences; without ``metadata.namespace`` the namespace is
    ``default``.

    Raises :class:`~workloadbuilder.errors.ValidationError` (field paths into the JobSet) for an
    invalid configuration and :class:`~workloadbuilder.kinds.NotManagedError` (a
    :class:`~workloadbuilder.errors.BuildError`) when the JobSet has no ``spec.scheduling``
    (the JobSet controller then creates nothing).
    """
    compiled = _compile(jobset)
    js_name, ns = compiled.name, compiled.namespace
    owner = _owner(jobset, js_name)
    job_to_pg = {j.name: j.pod_group_name for j in compiled.jobs}
    return compile_leaves(
        workload_name=_workload_name(js_name, ns),
        namespace=ns,
        owner=owner,
        leaves=compiled.leaves,
        pod_groups=[(pg, t) for t, pg in compiled.pod_group_names.items()],
        pod_group_names=job_to_pg,
        pod_key=_pod_key(js_name),
    )


def jobset_child_jobs(jobset: Mapping[str, Any]) -> tuple[JobSetChildJob, ...]:
    """Every child Job of the JobSet with its template name and PodGroup, in creation order."""
    return _compile(jobset).jobs


def jobset_child_job_manifests(jobset: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The child Jobs the JobSet controller creates, in creation order, as ``batch/v1`` Job
    documents.

    Each is ``<jobset>-<replicatedJob>-<index>`` in the JobSet's namespace, built from the
    ReplicatedJob's template, with the JobSet labels (``jobset.sigs.k8s.io/jobset-name``,
    ``replicatedjob-name``, ``replicatedjob-replicas``, ``job-index``, ``job-global-index``,
    ``job-key``) on the Job and on its pod template, and a controller ownerReference to the
    JobSet when it has a UID. With ``spec.scheduling`` each Job also gets the annotation
    ``scheduling.k8s.io/group-template-name`` and its pod template
    ``spec.schedulingGroup.podGroupName`` (see :func:`jobset_child_jobs`); without it the
    Jobs carry neither. Raises :class:`~workloadbuilder.errors.ValidationError` for an invalid
    JobSet.
    """
    meta = as_map(jobset.get("metadata"), "metadata")
    js_name, ns = name_ns(meta)
    spec = as_map(jobset.get("spec"), "spec")
    planned = (
        {j.name: j for j in jobset_child_jobs(jobset)} if spec.get("scheduling") is not None else {}
    )
    owner = _owner(jobset, js_name)
    owner_refs = [to_dict(owner.reference())] if owner.uid else []
    out: list[dict[str, Any]] = []
    global_index = 0
    for i, raw in enumerate(as_list(spec.get("replicatedJobs"), "spec.replicatedJobs")):
        path = f"spec.replicatedJobs[{i}]"
        rj = as_map(raw, path)
        rj_name = rj.get("name")
        if not isinstance(rj_name, str) or not rj_name:
            raise ValidationError([FieldError(path=f"{path}.name", type="Required value")])
        replicas = as_int(rj.get("replicas"), f"{path}.replicas", default=1, minimum=0)
        check_object_count(global_index + replicas, f"{path}.replicas", "Jobs")
        template = as_map(rj.get("template"), f"{path}.template")
        for index in range(replicas):
            name = f"{js_name}-{rj_name}-{index}"
            labels = {
                _LABEL_JOBSET: js_name,
                _LABEL_RJ: rj_name,
                _LABEL_RJ_REPLICAS: str(replicas),
                _LABEL_JOB_INDEX: str(index),
                _LABEL_JOB_GLOBAL_INDEX: str(global_index),
                _LABEL_JOB_KEY: hashlib.sha1(f"{ns}/{name}".encode()).hexdigest(),
            }
            global_index += 1
            out.append(_child_job(template, name, ns, labels, owner_refs, planned.get(name)))
    return out


def _child_job(
    template: Mapping[str, Any],
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    owner_refs: list[dict[str, Any]],
    child: JobSetChildJob | None,
) -> dict[str, Any]:
    job = copy.deepcopy(dict(template))
    meta: dict[str, Any] = {**dict(job.get("metadata") or {}), "name": name}
    meta["namespace"] = namespace
    meta["labels"] = {**dict(meta.get("labels") or {}), **labels}
    annotations = {**dict(meta.get("annotations") or {}), **(child.annotations if child else {})}
    if annotations:
        meta["annotations"] = annotations
    if owner_refs:
        meta["ownerReferences"] = copy.deepcopy(owner_refs)
    spec = dict(job.get("spec") or {})
    pod_template = dict(spec.get("template") or {})
    pod_meta = dict(pod_template.get("metadata") or {})
    pod_meta["labels"] = {**dict(pod_meta.get("labels") or {}), **labels}
    pod_template["metadata"] = pod_meta
    if child is not None:
        pod_spec = dict(pod_template.get("spec") or {})
        pod_spec["schedulingGroup"] = {"podGroupName": child.pod_group_name}
        pod_template["spec"] = pod_spec
    spec["template"] = pod_template
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def _pod_key(js_name: str) -> PodSetKeyFunc:
    def key(pod: Mapping[str, Any]) -> str | None:
        meta = pod.get("metadata")
        labels = meta.get("labels") if isinstance(meta, Mapping) else None
        if not isinstance(labels, Mapping):
            return None
        job = labels.get("batch.kubernetes.io/job-name") or labels.get("job-name")
        if isinstance(job, str) and job:
            return job
        rj, idx = labels.get(_LABEL_RJ), labels.get(_LABEL_JOB_INDEX)
        owner = labels.get(_LABEL_JOBSET, js_name)
        if isinstance(rj, str) and isinstance(idx, str):
            return f"{owner}-{rj}-{idx}"
        return None

    return key
