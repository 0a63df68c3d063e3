"""A JobSet as planning reads it (its ReplicatedJobs, the scheduling blocks of each level,
the per-ReplicatedJob entries) and the checks the API server and the JobSet webhook make of
it; :mod:`workloadbuilder.kinds.jobset` compiles it into PodGroupTemplates and child Jobs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from workloadbuilder.api import (
    WorkloadPodGroupDisruptionMode,
    WorkloadPodGroupResourceClaim,
    WorkloadPodGroupSchedulingConstraints,
    WorkloadPodGroupSchedulingPolicy,
)
from workloadbuilder.errors import FieldError, ValidationError
from workloadbuilder.kinds._common import (
    LeafSpec,
    as_int,
    as_list,
    as_map,
    check_object_count,
    parse_pod_group_blocks,
)
from workloadbuilder.validation import MAX_TEMPLATES

__all__ = [
    "EXCLUSIVE_TOPOLOGY_ANNOTATION",
    "Entry",
    "Level",
    "RJob",
    "check_entries",
    "check_leaves",
    "check_managed_fields",
    "check_single",
    "check_untargeted",
    "explicit_min",
    "invalid",
    "name_ns",
    "parse_entries",
    "parse_level",
    "parse_rjobs",
]


#: exclusive placement (an extension): on the JobSet or a ReplicatedJob's Job template, the
#: topology constraint of the PodGroups that hold those Jobs
EXCLUSIVE_TOPOLOGY_ANNOTATION = "alpha.jobset.sigs.k8s.io/exclusive-topology"


@attrs.frozen(kw_only=True)
class RJob:
    """One ReplicatedJob as planning reads it."""

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
class Level:
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
class Entry:
    """One ``spec.scheduling.replicatedJobs`` entry: its targets, its own blocks and its
    ``job`` block (one PodGroup per Job)."""

    index: int
    targets: tuple[str, ...]
    leaf: Level
    job: Level | None


def name_ns(meta: Mapping[str, Any]) -> tuple[str, str]:
    """The JobSet's name and namespace (``default`` when unset)."""
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ValidationError([FieldError(path="metadata.name", type="Required value")])
    namespace = meta.get("namespace") or "default"
    if not isinstance(namespace, str):
        raise ValidationError(
            [FieldError(path="metadata.namespace", type="Invalid value", detail="must be a string")]
        )
    return name, namespace


def parse_level(data: Mapping[str, Any], path: str) -> Level:
    """The scheduling blocks of one level at ``path``."""
    policy, constraints, disruption, claims = parse_pod_group_blocks(data, path)
    return Level(
        path=path, policy=policy, constraints=constraints, disruption=disruption, claims=claims
    )


def explicit_min(level: Level | None) -> int | None:
    """An explicit ``gang.minCount`` (JobSet treats 0 as unset)."""
    if level is None or level.policy is None or level.policy.gang is None:
        return None
    mc = level.policy.gang.min_count
    return mc if mc else None


def parse_rjobs(spec: Mapping[str, Any], js_exclusive: str | None) -> list[RJob]:
    """``spec.replicatedJobs``, with the JobSet's exclusive-topology key as the default of
    each ReplicatedJob's."""
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
            RJob(
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


def check_managed_fields(rjobs: Sequence[RJob], errors: list[FieldError]) -> None:
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


def parse_entries(sched: Mapping[str, Any]) -> list[Entry]:
    """``spec.scheduling.replicatedJobs``: the per-ReplicatedJob scheduling entries."""
    entries: list[Entry] = []
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
            else parse_level(as_map(job_raw, f"{epath}.job"), f"{epath}.job")
        )
        entries.append(Entry(index=i, targets=targets, leaf=parse_level(entry, epath), job=job))
    return entries


def check_entries(
    entries: Sequence[Entry], by_name: Mapping[str, RJob], errors: list[FieldError]
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
                    invalid(f"{tpath}[{j}]", t, "does not reference a valid replicatedJob name")
                )
            elif t in targeted:
                errors.append(
                    invalid(f"{tpath}[{j}]", t, "is targeted by more than one replicatedJobs entry")
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
                    invalid(
                        tpath,
                        list(e.targets),
                        "must target exactly one replicatedJob when job is set",
                    )
                )
            if not e.leaf.empty:
                errors.append(
                    invalid(
                        f"{epath}.job",
                        True,
                        "cannot be set together with schedulingPolicy, schedulingConstraints, "
                        "disruptionMode, or resourceClaims on the same replicatedJobs entry; job "
                        "replaces the single shared PodGroup those fields configure with one "
                        "PodGroup per Job",
                    )
                )
            mc = explicit_min(e.job)
            per_job = by_name[valid[0]].parallelism
            if mc is not None and mc > per_job:
                errors.append(
                    invalid(
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
                    invalid(
                        f"{tpath}[{j}]",
                        t,
                        f"priorityClassName {pcn!r} must match {first_pcn!r} of the other "
                        "ReplicatedJobs sharing this PodGroup",
                    )
                )
        mc = explicit_min(e.leaf)
        total = sum(by_name[t].parallelism * by_name[t].replicas for t in valid)
        if mc is not None and mc > total:
            errors.append(
                invalid(
                    f"{epath}.schedulingPolicy.gang.minCount",
                    mc,
                    f"cannot exceed the number of pods across the targeted ReplicatedJobs "
                    f"{list(e.targets)} ({total})",
                )
            )
    return targeted


def check_untargeted(rjobs: Sequence[RJob], targeted: set[str], errors: list[FieldError]) -> None:
    """Without top-level scheduling every ReplicatedJob needs an entry."""
    for rj in rjobs:
        if rj.name not in targeted:
            errors.append(
                invalid(
                    f"spec.replicatedJobs[{rj.index}].name",
                    rj.name,
                    "must be targeted by a replicatedJobs entry when spec.scheduling does "
                    "not set a top-level schedulingPolicy, schedulingConstraints, or "
                    "disruptionMode",
                )
            )


def check_single(
    rjobs: Sequence[RJob], top_min: int | None, total_pods: int, errors: list[FieldError]
) -> None:
    """Top-level gang scheduling: one priority class and a minCount within the pod count."""
    first = rjobs[0].priority_class_name or ""
    for rj in rjobs[1:]:
        if (rj.priority_class_name or "") != first:
            errors.append(
                invalid(
                    f"spec.replicatedJobs[{rj.index}].template.spec.template.spec."
                    "priorityClassName",
                    rj.priority_class_name or "",
                    f"must match {first!r} when top-level gang scheduling is used",
                )
            )
    if top_min is not None and top_min > total_pods:
        errors.append(
            invalid(
                "spec.scheduling.schedulingPolicy.gang.minCount",
                top_min,
                f"cannot exceed the number of pods in the JobSet ({total_pods})",
            )
        )


def check_leaves(leaves: Sequence[LeafSpec], errors: list[FieldError]) -> None:
    """Unique generated names, and no more templates than a Workload holds."""
    seen: set[str] = set()
    for leaf in leaves:
        if leaf.name in seen:
            errors.append(
                invalid(
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


def invalid(path: str, value: Any, detail: str) -> FieldError:
    """An ``Invalid value`` field error."""
    return FieldError(path=path, type="Invalid value", detail=detail, value=value, has_value=True)
