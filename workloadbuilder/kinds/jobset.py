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
    WorkloadPodGroupDisruptionMode,
    WorkloadPodGroupResourceClaim,
    WorkloadPodGroupSchedulingConstraints,
    WorkloadPodGroupSchedulingPolicy,
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
    parse_pod_group_blocks,
)
from workloadbuilder.kinds.job import GROUP_TEMPLATE_NAME_ANNOTATION, NotManagedError
from workloadbuilder.validation import MAX_TEMPLATES

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
EXCLUSIVE_TOPOLOGY_ANNOTATION = "alpha.jobset.sigs.k8s.io/exclusive-topology"

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
    name, namespace = _name_ns(meta)
    return _workload_name(name, namespace)


# ---------------------------------------------------------------------------------------------
# Input model


@attrs.frozen(kw_only=True)
class _RJob:
    index: int
    name: str
    replicas: int
    parallelism: int
    priority_class_name: str | None
    depends_on: bool
    exclusive_key: str | None
    pod_template_spec: Mapping[str, Any]
    job_spec: Mapping[str, Any]


@attrs.frozen(kw_only=True)
class _Level:
    """The scheduling blocks of one level (top-level, a replicatedJobs entry, or its ``job``)."""

    path: str
    policy: WorkloadPodGroupSchedulingPolicy | None = None
    constraints: WorkloadPodGroupSchedulingConstraints | None = None
    disruption: WorkloadPodGroupDisruptionMode | None = None
    claims: tuple[WorkloadPodGroupResourceClaim, ...] = ()

    @property
    def empty(self) -> bool:
        return (
            self.policy is None
            and self.constraints is None
            and self.disruption is None
            and not self.claims
        )


@attrs.frozen(kw_only=True)
class _Entry:
    index: int
    targets: tuple[str, ...]
    leaf: _Level
    job: _Level | None


def _name_ns(meta: Mapping[str, Any]) -> tuple[str, str]:
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ValidationError([FieldError(path="metadata.name", type="Required value")])
    namespace = meta.get("namespace") or "default"
    if not isinstance(namespace, str):
        raise ValidationError(
            [FieldError(path="metadata.namespace", type="Invalid value", detail="must be a string")]
        )
    return name, namespace


def _parse_level(data: Mapping[str, Any], path: str) -> _Level:
    policy, constraints, disruption, claims = parse_pod_group_blocks(data, path)
    return _Level(
        path=path, policy=policy, constraints=constraints, disruption=disruption, claims=claims
    )


def _explicit_min(level: _Level | None) -> int | None:
    """An explicit ``gang.minCount`` (JobSet treats 0 as unset)."""
    if level is None or level.policy is None or level.policy.gang is None:
        return None
    mc = level.policy.gang.min_count
    return mc if mc else None


def _parse_rjobs(spec: Mapping[str, Any], js_exclusive: str | None) -> list[_RJob]:
    out = []
    for i, raw in enumerate(as_list(spec.get("replicatedJobs"), "spec.replicatedJobs")):
        path = f"spec.replicatedJobs[{i}]"
        rj = as_map(raw, path)
        name = rj.get("name")
        if not isinstance(name, str) or not name:
            raise ValidationError([FieldError(path=f"{path}.name", type="Required value")])
        template = as_map(rj.get("template"), f"{path}.template")
        tmeta = as_map(template.get("metadata"), f"{path}.template.metadata")
        tann = as_map(tmeta.get("annotations"), f"{path}.template.metadata.annotations")
        job_spec = as_map(template.get("spec"), f"{path}.template.spec")
        pod_template = as_map(job_spec.get("template"), f"{path}.template.spec.template")
        pod_spec = as_map(pod_template.get("spec"), f"{path}.template.spec.template.spec")
        pcn = pod_spec.get("priorityClassName")
        exclusive = tann.get(EXCLUSIVE_TOPOLOGY_ANNOTATION) or js_exclusive
        out.append(
            _RJob(
                index=i,
                name=name,
                replicas=as_int(rj.get("replicas"), f"{path}.replicas", default=1, minimum=0),
                parallelism=as_int(
                    job_spec.get("parallelism"),
                    f"{path}.template.spec.parallelism",
                    default=1,
                    minimum=0,
                ),
                priority_class_name=pcn if isinstance(pcn, str) and pcn else None,
                depends_on=bool(as_list(rj.get("dependsOn"), f"{path}.dependsOn")),
                exclusive_key=str(exclusive) if exclusive else None,
                pod_template_spec=pod_spec,
                job_spec=job_spec,
            )
        )
        check_object_count(sum(r.replicas for r in out), f"{path}.replicas", "Jobs")
    return out


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
    js_name, ns = _name_ns(meta)
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
    rjobs = _parse_rjobs(spec, str(js_exclusive) if js_exclusive else None)
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
    _check_managed_fields(rjobs, errors)

    top = _parse_level(sched, "spec.scheduling")
    entries = _parse_entries(sched)

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
    targeted = _check_entries(entries, by_name, errors)
    if entries and not uses_top:
        _check_untargeted(rjobs, targeted, errors)

    startup = as_map(spec.get("startupPolicy"), "spec.startupPolicy")
    sequenced = startup.get("startupPolicyOrder") == "InOrder" or any(rj.depends_on for rj in rjobs)
    top_level = not entries and (top.policy is None or top.policy.gang is not None)
    single = top_level and not sequenced
    top_min = _explicit_min(top)
    if sequenced and not entries and top_min is not None:
        errors.append(
            _invalid(
                "spec.scheduling.schedulingPolicy.gang.minCount",
                top_min,
                "cannot be set when DependsOn or InOrder StartupPolicy is used; use "
                "per-ReplicatedJob gang policies instead",
            )
        )
    total_pods = sum(rj.parallelism * rj.replicas for rj in rjobs)
    if single:
        _check_single(rjobs, top_min, total_pods, errors)
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
    _check_leaves(leaves, errors)
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


def _check_managed_fields(rjobs: Sequence[_RJob], errors: list[FieldError]) -> None:
    """The fields the JobSet controller manages are not set by hand."""
    for rj in rjobs:
        rpath = f"spec.replicatedJobs[{rj.index}].template.spec"
        if rj.pod_template_spec.get("schedulingGroup") is not None:
            errors.append(
                FieldError(
                    path=f"{rpath}.template.spec.schedulingGroup",
                    type="Forbidden",
                    detail="cannot be set directly when spec.scheduling is configured; the "
                    "JobSet controller manages this field",
                )
            )
        if rj.job_spec.get("scheduling") is not None:
            errors.append(
                FieldError(
                    path=f"{rpath}.scheduling",
                    type="Forbidden",
                    detail="cannot be set when the JobSet's spec.scheduling is configured",
                )
            )


def _parse_entries(sched: Mapping[str, Any]) -> list[_Entry]:
    """``spec.scheduling.replicatedJobs``: the per-ReplicatedJob scheduling entries."""
    entries: list[_Entry] = []
    for i, raw in enumerate(as_list(sched.get("replicatedJobs"), "spec.scheduling.replicatedJobs")):
        epath = f"spec.scheduling.replicatedJobs[{i}]"
        entry = as_map(raw, epath)
        targets = tuple(
            str(t)
            for t in as_list(entry.get("targetReplicatedJobs"), f"{epath}.targetReplicatedJobs")
        )
        job_raw = entry.get("job")
        job = (
            None
            if job_raw is None
            else _parse_level(as_map(job_raw, f"{epath}.job"), f"{epath}.job")
        )
        entries.append(_Entry(index=i, targets=targets, leaf=_parse_level(entry, epath), job=job))
    return entries


def _check_entries(
    entries: Sequence[_Entry], by_name: Mapping[str, _RJob], errors: list[FieldError]
) -> set[str]:
    """Check each entry's targets, its ``job`` block and minCount; returns the targeted
    ReplicatedJobs."""
    targeted: set[str] = set()
    for e in entries:
        tpath = f"spec.scheduling.replicatedJobs[{e.index}].targetReplicatedJobs"
        if not e.targets:
            errors.append(FieldError(path=tpath, type="Required value"))
        valid: list[str] = []
        for j, t in enumerate(e.targets):
            if t not in by_name:
                errors.append(
                    _invalid(f"{tpath}[{j}]", t, "does not reference a valid replicatedJob name")
                )
            elif t in targeted:
                errors.append(
                    _invalid(
                        f"{tpath}[{j}]", t, "is targeted by more than one replicatedJobs entry"
                    )
                )
            else:
                targeted.add(t)
                valid.append(t)
        if not valid:
            continue
        epath = f"spec.scheduling.replicatedJobs[{e.index}]"
        if e.job is not None:
            if len(e.targets) != 1:
                errors.append(
                    _invalid(
                        tpath,
                        list(e.targets),
                        "must target exactly one replicatedJob when job is set",
                    )
                )
            if not e.leaf.empty:
                errors.append(
                    _invalid(
                        f"{epath}.job",
                        True,
                        "cannot be set together with schedulingPolicy, schedulingConstraints, "
                        "disruptionMode, or resourceClaims on the same replicatedJobs entry; job "
                        "replaces the single shared PodGroup those fields configure with one "
                        "PodGroup per Job",
                    )
                )
            mc = _explicit_min(e.job)
            per_job = by_name[valid[0]].parallelism
            if mc is not None and mc > per_job:
                errors.append(
                    _invalid(
                        f"{epath}.job.schedulingPolicy.gang.minCount",
                        mc,
                        f"cannot exceed the per-Job pod count (parallelism) of replicatedJob "
                        f"{valid[0]!r} ({per_job})",
                    )
                )
            continue
        first_pcn = by_name[valid[0]].priority_class_name or ""
        for j, t in enumerate(valid[1:], start=1):
            pcn = by_name[t].priority_class_name or ""
            if pcn != first_pcn:
                errors.append(
                    _invalid(
                        f"{tpath}[{j}]",
                        t,
                        f"priorityClassName {pcn!r} must match {first_pcn!r} of the other "
                        "ReplicatedJobs sharing this PodGroup",
                    )
                )
        mc = _explicit_min(e.leaf)
        total = sum(by_name[t].parallelism * by_name[t].replicas for t in valid)
        if mc is not None and mc > total:
            errors.append(
                _invalid(
                    f"{epath}.schedulingPolicy.gang.minCount",
                    mc,
                    f"cannot exceed the number of pods across the targeted ReplicatedJobs "
                    f"{list(e.targets)} ({total})",
                )
            )
    return targeted


def _check_untargeted(rjobs: Sequence[_RJob], targeted: set[str], errors: list[FieldError]) -> None:
    """Without top-level scheduling every ReplicatedJob needs an entry."""
    for rj in rjobs:
        if rj.name not in targeted:
            errors.append(
                _invalid(
                    f"spec.replicatedJobs[{rj.index}].name",
                    rj.name,
                    "must be targeted by a replicatedJobs entry when spec.scheduling does "
                    "not set a top-level schedulingPolicy, schedulingConstraints, or "
                    "disruptionMode",
                )
            )


def _check_single(
    rjobs: Sequence[_RJob], top_min: int | None, total_pods: int, errors: list[FieldError]
) -> None:
    """Top-level gang scheduling: one priority class and a minCount within the pod count."""
    first = rjobs[0].priority_class_name or ""
    for rj in rjobs[1:]:
        if (rj.priority_class_name or "") != first:
            errors.append(
                _invalid(
                    f"spec.replicatedJobs[{rj.index}].template.spec.template.spec."
                    "priorityClassName",
                    rj.priority_class_name or "",
                    f"must match {first!r} when top-level gang scheduling is used",
                )
            )
    if top_min is not None and top_min > total_pods:
        errors.append(
            _invalid(
                "spec.scheduling.schedulingPolicy.gang.minCount",
                top_min,
                f"cannot exceed the number of pods in the JobSet ({total_pods})",
            )
        )


def _plan_leaves(
    js_name: str,
    ns: str,
    top: _Level,
    entries: Sequence[_Entry],
    rjobs: Sequence[_RJob],
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
        name: str, level: _Level, members: Sequence[_RJob], default_min: int, keep_min: bool
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


def _check_leaves(leaves: Sequence[LeafSpec], errors: list[FieldError]) -> None:
    """Unique generated names, and no more templates than a Workload holds."""
    seen: set[str] = set()
    for leaf in leaves:
        if leaf.name in seen:
            errors.append(
                _invalid(
                    "spec.scheduling.replicatedJobs",
                    leaf.name,
                    f"generated scheduling group name {leaf.name!r} is not unique",
                )
            )
        seen.add(leaf.name)
    if len(leaves) > MAX_TEMPLATES:
        errors.append(
            FieldError(
                path="spec.scheduling",
                type="Too many",
                detail=f"the JobSet needs {len(leaves)} PodGroupTemplates; a Workload holds at "
                f"most {MAX_TEMPLATES}",
                value=len(leaves),
                has_value=True,
            )
        )


def _child_jobs(
    js_name: str,
    rjobs: Sequence[_RJob],
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


def _fallback(level: _Level, top: _Level) -> _Level:
    """Leaf blocks win; unset ones fall back to the JobSet-level blocks (as upstream)."""
    return attrs.evolve(
        level,
        policy=level.policy if level.policy is not None else top.policy,
        constraints=level.constraints if level.constraints is not None else top.constraints,
        disruption=level.disruption if level.disruption is not None else top.disruption,
    )


def _with_exclusive(
    level: _Level, members: Sequence[_RJob], errors: list[FieldError]
) -> WorkloadPodGroupSchedulingConstraints | None:
    keys = {m.exclusive_key for m in members}
    if keys == {None}:
        return level.constraints
    if len(keys) > 1:
        errors.append(
            _invalid(
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
                _invalid(
                    f"{level.path}.schedulingConstraints.topology",
                    [t.key for t in level.constraints.topology],
                    f"conflicts with the {EXCLUSIVE_TOPOLOGY_ANNOTATION} annotation ({key!r})",
                )
            )
        return level.constraints
    return WorkloadPodGroupSchedulingConstraints(topology=(TopologyConstraint(key=key),))


def _invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(path=path, type="Invalid value", detail=detail, value=value, has_value=True)


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
    js_name, ns = _name_ns(meta)
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
