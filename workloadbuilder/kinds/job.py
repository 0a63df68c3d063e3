"""``batch/v1`` Job adapter: what kube-controller-manager v1.37.2 creates for a Job (KEP-5547).

Behaviour of ``pkg/controller/job/job_scheduling_manager.go`` and ``pkg/api/job/util.go`` at
v1.37.2 (feature gate ``WorkloadWithJob`` on):

* Management mode: ``none`` when the pod template already sets ``spec.schedulingGroup``
  (bring-your-own PodGroup) or the Job has a controller owner without the delegation
  annotation (CronJob-created Jobs included); ``both`` for a Job without a controller owner;
  ``pod-group-only`` for a Job with a controller owner and the annotation
  ``scheduling.k8s.io/group-template-name``.
* ``both``: one WorkloadItem named ``<job>-pgt-0``; defaults ``basic`` and the pod template's
  ``priorityClassName``; ``spec.scheduling`` overrides block by block; an unset gang
  ``minCount`` defaults to ``parallelism`` (default 1) clamped to at least 1. The Workload
  (``<job>-<hash(uid)>``) has a controller ownerReference to the Job (``controller`` and
  ``blockOwnerDeletion`` true) and ``spec.controllerRef {apiGroup: batch, kind: Job, name}``.
  The PodGroup (``<workload>-<template>-<hash>``) has the same controller ownerReference to the
  Job plus a non-controller ownerReference to the Workload (``controller`` and
  ``blockOwnerDeletion`` unset; its ``uid`` is the Workload's, known only after creation -- see
  :meth:`Plan.with_workload_uid`).
* ``pod-group-only``: only a PodGroup, from the named template of the parent-owned Workload
  (found with :func:`find_parent_workload`), owned by the Job alone; its gang ``minCount``
  follows the parent's template.
* Pods get ``spec.schedulingGroup.podGroupName``; their only ownerReference stays the Job's
  (checked against the real v1.37.2 kube-controller-manager: no ownerReference to the PodGroup).
* A Job name longer than 57 characters makes the template name ``<job>-pgt-0`` longer than a
  DNS label allows; the real controller then fails with ``FailedWorkloadCreate`` and creates
  nothing, so :func:`plan_job` raises ``ValidationError`` for it.

The API server adds ``disruptionMode: {single: {}}``, ``priority`` and the
``scheduling.k8s.io/podgroup-protection`` finalizer to PodGroups on create; plans do not.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import attrs

from workloadbuilder.api import (
    CodecError,
    JobSchedulingConfiguration,
    OwnerReference,
    PodGroup,
    Workload,
    from_dict,
)
from workloadbuilder.builder import (
    ALL_DISRUPTION_MODES,
    ALL_POLICIES,
    Builder,
    BuildOptions,
    Plan,
    PodSetKeyFunc,
    SchedulingConfig,
    SchedulingConfigFunc,
    WorkloadInput,
    WorkloadItem,
    check_planned,
    pod_group_min_count_patch,
    workload_min_count_patch,
)
from workloadbuilder.errors import BuildError, FieldError, ValidationError
from workloadbuilder.kinds._common import as_int, namespace_of
from workloadbuilder.naming import job_template_name, pod_group_name, workload_name
from workloadbuilder.validation import content_dns1123_label

__all__ = [
    "GROUP_TEMPLATE_NAME_ANNOTATION",
    "ManagementMode",
    "NotManagedError",
    "find_parent_workload",
    "job_controller_ref",
    "job_is_new",
    "job_pod_metadata",
    "job_scheduling",
    "job_workload_item",
    "link_job_pod",
    "management_mode",
    "plan_job",
]

#: Set by a parent controller on a child Job: the parent Workload's template for its pods.
GROUP_TEMPLATE_NAME_ANNOTATION = "scheduling.k8s.io/group-template-name"

ManagementMode = Literal["none", "both", "pod-group-only"]

_SCHEDULING_PATH = "spec.scheduling"
_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
#: The longest Job name whose template name ``<job>-pgt-0`` is still a DNS label (63).
_MAX_JOB_NAME = 63 - len("-pgt-0")


class NotManagedError(BuildError):
    """The Job controller creates no scheduling objects for this Job (see ``reason``)."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@attrs.frozen
class _Job:
    name: str
    namespace: str
    uid: str | None
    annotations: Mapping[str, str]
    owner_references: Sequence[Mapping[str, Any]]
    parallelism: int | None
    priority_class_name: str | None
    scheduling: JobSchedulingConfiguration | None
    has_scheduling_group: bool


def _mapping(value: Any, path: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError(
            [FieldError(path=path, type="Invalid value", detail="expected an object")]
        )
    return value


def _parse(job: Mapping[str, Any]) -> _Job:
    meta = _mapping(job.get("metadata"), "metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ValidationError([FieldError(path="metadata.name", type="Required value")])
    namespace = namespace_of(meta)
    uid = meta.get("uid") or None
    spec = _mapping(job.get("spec"), "spec")
    parallelism = spec.get("parallelism")
    if parallelism is not None:
        parallelism = as_int(parallelism, "spec.parallelism", default=1, minimum=0)
    template = _mapping(spec.get("template"), "spec.template")
    pod_spec = _mapping(template.get("spec"), "spec.template.spec")
    pcn = pod_spec.get("priorityClassName") or None
    scheduling = None
    if spec.get("scheduling") is not None:
        try:
            scheduling = from_dict(
                _mapping(spec["scheduling"], _SCHEDULING_PATH), JobSchedulingConfiguration
            )
        except CodecError as e:
            path = f"{_SCHEDULING_PATH}.{e.path}" if e.path else _SCHEDULING_PATH
            raise ValidationError(
                [FieldError(path=path, type="Invalid value", detail=e.detail)]
            ) from None
    annotations = meta.get("annotations") or {}
    owner_refs = meta.get("ownerReferences") or []
    return _Job(
        name=name,
        namespace=str(namespace),
        uid=str(uid) if uid else None,
        annotations={str(k): str(v) for k, v in dict(annotations).items()},
        owner_references=[r for r in owner_refs if isinstance(r, Mapping)],
        parallelism=parallelism,
        priority_class_name=str(pcn) if pcn else None,
        scheduling=scheduling,
        has_scheduling_group=pod_spec.get("schedulingGroup") is not None,
    )


def _controller_of(j: _Job) -> Mapping[str, Any] | None:
    for ref in j.owner_references:
        if ref.get("controller") is True:
            return ref
    return None


def management_mode(job: Mapping[str, Any]) -> ManagementMode:
    """Which scheduling objects the Job controller manages for ``job`` (gate assumed on)."""
    j = _parse(job)
    return _mode(j)


def _mode(j: _Job) -> ManagementMode:
    if j.has_scheduling_group:
        return "none"
    if _controller_of(j) is None:
        return "both"
    if GROUP_TEMPLATE_NAME_ANNOTATION in j.annotations:
        return "pod-group-only"
    return "none"


def job_is_new(job: Mapping[str, Any], *, has_pods: bool = False) -> bool:
    """True if the Job never started (upstream ``isNewJob``): objects are only *created* for
    such Jobs; a started Job only discovers existing ones."""
    status = _mapping(job.get("status"), "status")
    if has_pods or status.get("startTime") is not None:
        return False
    if status.get("succeeded") or status.get("failed"):
        return False
    return not any(
        isinstance(c, Mapping) and c.get("type") == "Suspended"
        for c in status.get("conditions") or []
    )


def job_controller_ref(job: Mapping[str, Any]) -> OwnerReference:
    """``metav1.NewControllerRef(job, batch/v1 Job)``; a missing UID becomes ``""``."""
    j = _parse(job)
    return _owner(j)


def _owner(j: _Job) -> OwnerReference:
    return OwnerReference(
        api_version="batch/v1",
        kind="Job",
        name=j.name,
        uid=j.uid or "",
        controller=True,
        block_owner_deletion=True,
    )


def job_scheduling(job: Mapping[str, Any]) -> JobSchedulingConfiguration | None:
    """The Job's ``spec.scheduling`` as a typed model (``None`` when absent)."""
    return _parse(job).scheduling


def _default_min_count(parallelism: int | None) -> SchedulingConfigFunc:
    def callback(cfg: SchedulingConfig) -> SchedulingConfig:
        if cfg.policy == "gang" and cfg.min_count is None:
            p = 1 if parallelism is None else parallelism
            return attrs.evolve(cfg, min_count=max(1, p))
        return cfg

    return callback


def _item(j: _Job, *, name: str, path: str) -> WorkloadItem:
    s = j.scheduling
    inp = WorkloadInput()
    if s is not None:
        inp = WorkloadInput.at_standard_paths(
            policy=s.scheduling_policy,
            constraints=s.scheduling_constraints,
            disruption_mode=s.disruption_mode,
            resource_claims=s.resource_claims,
        )
    return WorkloadItem(
        name=name,
        path=path,
        default_config=SchedulingConfig(policy="basic", priority_class_name=j.priority_class_name),
        input=inp,
        callbacks=[_default_min_count(j.parallelism)],
    )


def job_workload_item(job: Mapping[str, Any], *, path: str = _SCHEDULING_PATH) -> WorkloadItem:
    """The single-item tree the Job controller compiles (upstream ``WorkloadItemForJob``)."""
    j = _parse(job)
    return _item(j, name=job_template_name(j.name), path=path)


def find_parent_workload(job: Mapping[str, Any], workloads: Iterable[Workload]) -> Workload | None:
    """The parent-owned Workload of a delegated Job: in the Job's namespace, with
    ``spec.controllerRef`` equal to the Job's controller owner (group, kind, name)."""
    j = _parse(job)
    parent = _controller_of(j)
    if parent is None:
        return None
    api_version = str(parent.get("apiVersion") or "")
    if api_version.count("/") > 1:
        return None
    group = api_version.split("/")[0] if "/" in api_version else ""
    for wl in workloads:
        ref = wl.spec.controller_ref
        if wl.metadata.namespace not in (None, j.namespace) or ref is None:
            continue
        if (
            (ref.api_group or "") == group
            and ref.kind == parent.get("kind")
            and (ref.name == parent.get("name"))
        ):
            return wl
    return None


def _validate(j: _Job, item: WorkloadItem) -> list[FieldError]:
    errs: list[FieldError] = []
    s = j.scheduling
    if s is not None and s.scheduling_policy is not None and s.scheduling_policy.gang is not None:
        mc = s.scheduling_policy.gang.min_count
        p = 1 if j.parallelism is None else j.parallelism
        if mc is not None and mc > p:
            errs.append(
                FieldError(
                    path=f"{_SCHEDULING_PATH}.schedulingPolicy.gang.minCount",
                    type="Invalid value",
                    value=mc,
                    has_value=True,
                    detail=f"must not be greater than parallelism ({p})",
                )
            )
    opts = BuildOptions(
        allowed_policies=ALL_POLICIES, allowed_disruption_modes=ALL_DISRUPTION_MODES
    )
    return errs + Builder(item, opts).validate()


def _pod_set_key(j: _Job) -> PodSetKeyFunc:
    def key(pod: Mapping[str, Any]) -> str | None:
        meta = pod.get("metadata") or {}
        for ref in meta.get("ownerReferences") or []:
            if not isinstance(ref, Mapping) or ref.get("controller") is not True:
                continue
            if ref.get("kind") != "Job" or not str(ref.get("apiVersion", "")).startswith("batch/"):
                return None
            if j.uid:
                return j.name if ref.get("uid") == j.uid else None
            return j.name if ref.get("name") == j.name else None
        labels = meta.get("labels") or {}
        if j.uid and j.uid in (
            labels.get("batch.kubernetes.io/controller-uid"),
            labels.get("controller-uid"),
        ):
            return j.name
        if j.name in (labels.get("batch.kubernetes.io/job-name"), labels.get("job-name")):
            return j.name
        return None

    return key


def job_pod_metadata(
    name: str, uid: str | None = None, *, completion_index: int | None = None
) -> tuple[dict[str, str], dict[str, str]]:
    """The labels and annotations the Job controller adds to the pods of Job ``name``: the
    job-name labels, the controller-uid labels (with a ``uid``) and, for an Indexed Job, the
    completion index label and annotation. The pod -> PodGroup mapping of :func:`plan_job`
    reads these labels."""
    labels = {"batch.kubernetes.io/job-name": name, "job-name": name}
    annotations: dict[str, str] = {}
    if uid:
        labels["batch.kubernetes.io/controller-uid"] = uid
        labels["controller-uid"] = uid
    if completion_index is not None:
        labels[_COMPLETION_INDEX] = str(completion_index)
        annotations[_COMPLETION_INDEX] = str(completion_index)
    return labels, annotations


def link_job_pod(pod: Mapping[str, Any], pod_group: str) -> dict[str, Any]:
    """A copy of ``pod`` linked to its PodGroup the way the v1.37.2 Job controller creates pods:
    ``spec.schedulingGroup.podGroupName`` set, ownerReferences left as they are (the real
    controller adds none to the PodGroup)."""
    out = copy.deepcopy(dict(pod))
    out.setdefault("spec", {})["schedulingGroup"] = {"podGroupName": pod_group}
    return out


def plan_job(
    job: Mapping[str, Any],
    *,
    parent_workload: Workload | None = None,
    validate: bool = True,
) -> Plan:
    """Plan the Workload and PodGroup the v1.37.2 Job controller creates for ``job``.

    ``job`` is a ``batch/v1`` Job document. For a delegated Job (management mode
    ``pod-group-only``) pass the parent's Workload as ``parent_workload`` (see
    :func:`find_parent_workload`); the plan then contains only the PodGroup and
    ``owns_workload`` is false. Without ``metadata.uid`` names are derived from
    ``<namespace>/<name>`` (see :mod:`workloadbuilder.naming`).

    Raises :class:`NotManagedError` (mode ``none``), :class:`ValidationError` (the API server
    would reject the Job's ``spec.scheduling``, e.g. ``minCount`` > ``parallelism``; only
    checked when ``validate``), or :class:`BuildError`.
    """
    j = _parse(job)
    mode = _mode(j)
    owner = _owner(j)
    if mode == "none":
        reason = (
            "the pod template sets spec.schedulingGroup (bring-your-own PodGroup)"
            if j.has_scheduling_group
            else "the Job has a controller owner that does not delegate PodGroup management"
        )
        raise NotManagedError(
            f"the Job controller manages no scheduling objects for Job "
            f"{j.namespace}/{j.name}: {reason}",
            reason=reason,
        )
    if mode == "pod-group-only":
        return _plan_delegated(j, owner, parent_workload)

    template = job_template_name(j.name)
    item = _item(j, name=template, path=_SCHEDULING_PATH)
    if validate:
        errs = _validate(j, item)
        if errs:
            raise ValidationError(errs, subject=f"Job {j.namespace}/{j.name}")
    wl_name = workload_name(j.name, j.uid, j.namespace)
    opts = BuildOptions(name=wl_name, namespace=j.namespace, owner=owner)
    workload = Builder(item, opts).build_workload()
    # The real controller cannot create a Workload whose template name is not a DNS label
    # (Job names > 57 characters): it records FailedWorkloadCreate and creates nothing.
    # The real controller cannot create a Workload whose template name is not a DNS label
    # (Job names > 57 characters): it records FailedWorkloadCreate and creates nothing. The
    # errors are the Workload validation's own; the subject names the Job's field at fault.
    name_errors = [
        FieldError(
            path="spec.podGroupTemplates[0].name",
            type="Invalid value",
            detail=detail,
            value=template,
            has_value=True,
        )
        for detail in content_dns1123_label(template)
    ]
    if name_errors:
        cause = FieldError(
            path="metadata.name",
            type="Too long",
            detail=(
                f"must have at most {_MAX_JOB_NAME} characters for the Job controller to create "
                f"its Workload (its PodGroupTemplate is named {template!r})"
            ),
        )
        raise ValidationError(name_errors, subject=f"Job {j.namespace}/{j.name}", causes=[cause])
    pg_name = pod_group_name(wl_name, template)
    pg = Builder.from_existing_workload(workload, BuildOptions(owner=owner)).new_pod_group(
        pg_name, template
    )
    workload_ref = OwnerReference(
        api_version=workload.api_version, kind="Workload", name=wl_name, uid=""
    )
    pg = attrs.evolve(
        pg,
        metadata=attrs.evolve(
            pg.metadata, owner_references=(*pg.metadata.owner_references, workload_ref)
        ),
    )
    if validate:
        check_planned(workload)
        check_planned(pg)
    return _plan(j, workload, pg, owns_workload=True)


def _plan(j: _Job, workload: Workload, pg: PodGroup, *, owns_workload: bool) -> Plan:
    name = pg.metadata.name or ""
    patch = pod_group_min_count_patch(pg)
    return Plan(
        workload=workload,
        pod_groups=(pg,),
        pod_group_names={j.name: name},
        min_count_patch=workload_min_count_patch(workload) if owns_workload else None,
        pod_group_patches={name: patch} if patch is not None else {},
        owns_workload=owns_workload,
        pod_set_key=_pod_set_key(j),
    )


def _plan_delegated(j: _Job, owner: OwnerReference, parent: Workload | None) -> Plan:
    template_name = j.annotations[GROUP_TEMPLATE_NAME_ANNOTATION]
    if parent is None:
        raise BuildError(
            f"Job {j.namespace}/{j.name} delegates PodGroup management "
            f"({GROUP_TEMPLATE_NAME_ANNOTATION}={template_name}): pass the parent's Workload "
            "as parent_workload"
        )
    templates = parent.spec.pod_group_templates
    if not templates:
        raise BuildError(
            f"workload {parent.metadata.namespace}/{parent.metadata.name} has no PodGroupTemplates"
        )
    tmpl = templates[0] if not template_name else None
    for t in templates:
        if template_name and t.name == template_name:
            tmpl = t
    if tmpl is None:
        raise BuildError(
            f'PodGroupTemplate "{template_name}" not found in workload '
            f"{parent.metadata.namespace}/{parent.metadata.name}"
        )
    pg = Builder.from_existing_workload(parent, BuildOptions(owner=owner)).new_pod_group(
        pod_group_name(parent.metadata.name or "", tmpl.name), tmpl.name
    )
    return _plan(j, parent, pg, owns_workload=False)
