"""``batch/v1`` ``Job.spec.scheduling`` validation (kube-apiserver v1.37.2).

Sources: ``pkg/apis/batch/validation/validation.go`` (``validateGangMinCount``,
``validateJobScheduling`` via the workloadbuilder library, ``validateJobSchedulingUpdate``),
``pkg/apis/batch/v1/zz_generated.validations.go`` (declarative rules of ``spec.scheduling``
and the ``v1alpha3`` building blocks), ``pkg/api/job/util.go`` (``DropDisabledFields``) and the
``batch/v1`` defaults (``parallelism`` defaults to 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workloadbuilder.api import (
    CodecError,
    JobSchedulingConfiguration,
    WorkloadPodGroupDisruptionMode,
    WorkloadPodGroupResourceClaim,
    WorkloadPodGroupSchedulingConstraints,
    WorkloadPodGroupSchedulingPolicy,
    from_dict,
)
from workloadbuilder.errors import FieldError
from workloadbuilder.validation._common import (
    Op,
    child,
    codec_error,
    each_val,
    eq,
    forbidden,
    immutable,
    invalid,
    label_key,
    long_name,
    max_items,
    minimum,
    required,
    short_name,
    union,
    update_pointer,
    val_slice_unique,
)
from workloadbuilder.validation._gates import FeatureGates

__all__ = ["validate_job_scheduling"]

_PATH = "spec.scheduling"


def _unchanged(op: Op, correlated: bool, new: Any, old: Any) -> bool:
    return op.update and correlated and eq(new, old)


def _attr(obj: Any, name: str) -> Any:
    return None if obj is None else getattr(obj, name)


def _policy(op: Op, path: str, new: WorkloadPodGroupSchedulingPolicy, old: Any) -> list[FieldError]:
    errs = union(
        op,
        path,
        ("basic", "gang"),
        (new.basic is not None, new.gang is not None),
        None if old is None else (old.basic is not None, old.gang is not None),
    )
    prev_gang = _attr(old, "gang")
    if new.gang is not None and not _unchanged(op, old is not None, new.gang, prev_gang):
        count = new.gang.min_count
        prev_count = _attr(prev_gang, "min_count")
        if count is not None and not _unchanged(op, prev_gang is not None, count, prev_count):
            errs += minimum(child(child(path, "gang"), "minCount"), count, 1)
    return errs


def _topology_key(op: Op, path: str, new: Any, old: Any) -> list[FieldError]:
    key_path = child(path, "key")
    if not new.key:
        return [required(key_path)]
    return label_key(key_path, new.key)


def _constraints(
    op: Op, path: str, new: WorkloadPodGroupSchedulingConstraints, old: Any
) -> list[FieldError]:
    topo_path = child(path, "topology")
    prev = _attr(old, "topology")
    if _unchanged(op, old is not None, new.topology, prev or ()):
        return []
    errs = max_items(topo_path, new.topology, 1)
    if errs or not new.topology:
        return errs
    return each_val(op, topo_path, new.topology, None, None, _topology_key)


def _disruption(
    op: Op, path: str, new: WorkloadPodGroupDisruptionMode, old: Any
) -> list[FieldError]:
    return union(
        op,
        path,
        ("single", "all"),
        (new.single is not None, new.all is not None),
        None if old is None else (old.single is not None, old.all is not None),
    )


def _claim(op: Op, path: str, new: WorkloadPodGroupResourceClaim, old: Any) -> list[FieldError]:
    corr = old is not None
    errs = union(
        op,
        path,
        ("resourceClaimName", "resourceClaimTemplateName"),
        (new.resource_claim_name is not None, new.resource_claim_template_name is not None),
        None
        if old is None
        else (old.resource_claim_name is not None, old.resource_claim_template_name is not None),
    )
    if not _unchanged(op, corr, new.name, _attr(old, "name")):
        errs += (
            [required(child(path, "name"))]
            if not new.name
            else short_name(child(path, "name"), new.name)
        )
    for attr, json_name in (
        ("resource_claim_name", "resourceClaimName"),
        ("resource_claim_template_name", "resourceClaimTemplateName"),
    ):
        value = getattr(new, attr)
        if value is None or _unchanged(op, corr, value, _attr(old, attr)):
            continue
        errs += long_name(child(path, json_name), value)
    return errs


def _configuration_dv(op: Op, new: JobSchedulingConfiguration, old: Any) -> list[FieldError]:
    corr = old is not None
    errs: list[FieldError] = []
    # schedulingPolicy: +optional, +k8s:update=NoSet,NoUnset
    path = child(_PATH, "schedulingPolicy")
    prev_policy = _attr(old, "scheduling_policy")
    if not _unchanged(op, corr, new.scheduling_policy, prev_policy):
        update_errs = update_pointer(op, path, new.scheduling_policy, prev_policy)
        errs += update_errs
        if new.scheduling_policy is not None and not update_errs:
            errs += _policy(op, path, new.scheduling_policy, prev_policy)
    # schedulingConstraints and disruptionMode: +k8s:immutable +optional
    for attr, json_name, validator in (
        ("scheduling_constraints", "schedulingConstraints", _constraints),
        ("disruption_mode", "disruptionMode", _disruption),
    ):
        value, prev = getattr(new, attr), _attr(old, attr)
        if _unchanged(op, corr, value, prev):
            continue
        if op.update:
            errs += immutable(op, child(_PATH, json_name))
        elif value is not None:
            errs += validator(op, child(_PATH, json_name), value, prev)
    # resourceClaims: +k8s:immutable, maxItems 4, listType=map keyed by name
    claims_path = child(_PATH, "resourceClaims")
    prev_claims = _attr(old, "resource_claims") or ()
    if not _unchanged(op, corr, new.resource_claims, prev_claims):
        early = op.update
        if op.update:
            errs += immutable(op, claims_path)
        too_many = max_items(claims_path, new.resource_claims, 4)
        errs += too_many
        if not (early or too_many or not new.resource_claims):
            errs += val_slice_unique(claims_path, new.resource_claims, lambda c: c.name)
            errs += each_val(
                op, claims_path, new.resource_claims, prev_claims, lambda c: c.name, _claim
            )
    return errs


def _parse(
    job: Mapping[str, Any] | None,
) -> tuple[JobSchedulingConfiguration | None, int, list[FieldError]]:
    spec = job.get("spec") if isinstance(job, Mapping) else None
    if not isinstance(spec, Mapping):
        return None, 1, []
    parallelism = spec.get("parallelism")
    if not isinstance(parallelism, int) or isinstance(parallelism, bool):
        parallelism = 1  # batch/v1 SetDefaults_Job
    raw = spec.get("scheduling")
    if raw is None:
        return None, parallelism, []
    if not isinstance(raw, Mapping):
        return (
            None,
            parallelism,
            [FieldError(path=_PATH, type="Invalid value", detail="expected an object")],
        )
    try:
        return from_dict(raw, JobSchedulingConfiguration), parallelism, []
    except CodecError as e:
        return None, parallelism, [codec_error(e, _PATH)]


def _resolved_basic(cfg: JobSchedulingConfiguration) -> bool:
    # workloadbuilder: default basic; an input union resolves basic first, then gang.
    policy = cfg.scheduling_policy
    if policy is None or (policy.basic is None and policy.gang is None):
        return True
    return policy.basic is not None


def _resolved_all(cfg: JobSchedulingConfiguration) -> bool:
    mode = cfg.disruption_mode
    return mode is not None and mode.single is None and mode.all is not None


def validate_job_scheduling(
    job: Mapping[str, Any],
    old: Mapping[str, Any] | None = None,
    *,
    gates: FeatureGates | None = None,
) -> list[FieldError]:
    """The ``spec.scheduling`` errors kube-apiserver v1.37 reports for creating ``job``
    (``old=None``) or updating ``old`` to ``job`` (both raw ``batch/v1`` Job dicts).

    Hand-written rules first (gang ``minCount`` <= ``parallelism``, ``all`` disruption with a
    basic policy, the basic<->gang switch on update), then the declarative ones (cannot add or
    remove ``spec.scheduling`` / ``schedulingPolicy`` after creation, only
    ``gang.minCount`` is mutable, unions, formats, limits). With ``workload_with_job`` off the
    server silently drops ``spec.scheduling`` unless the old Job already had it.
    """
    gates = gates or FeatureGates()
    new_cfg, parallelism, errs = _parse(job)
    if errs:
        return errs
    old_cfg: JobSchedulingConfiguration | None = None
    if old is not None:
        old_cfg, _, old_errs = _parse(old)
        if old_errs:
            return old_errs
    if not gates.workload_with_job and old_cfg is None:
        new_cfg = None
    op = Op(update=old is not None, options=gates.options())

    # hand-written (ValidateJobSpec, then ValidateJobSpecUpdate)
    if new_cfg is not None:
        policy = new_cfg.scheduling_policy
        gang = policy.gang if policy is not None else None
        if gang is not None and gang.min_count is not None and gang.min_count > parallelism:
            errs.append(
                invalid(
                    f"{_PATH}.schedulingPolicy.gang.minCount",
                    gang.min_count,
                    f"must not be greater than parallelism ({parallelism})",
                )
            )
        if _resolved_basic(new_cfg) and _resolved_all(new_cfg):
            errs.append(
                invalid(
                    f"{_PATH}.disruptionMode",
                    "",
                    "the disruptionMode `all` is not supported with the Basic scheduling policy",
                )
            )
    if old is not None and new_cfg is not None and old_cfg is not None:
        new_policy, old_policy = new_cfg.scheduling_policy, old_cfg.scheduling_policy
        if (
            new_policy is not None
            and old_policy is not None
            and (old_policy.basic is not None) != (new_policy.basic is not None)
        ):
            errs.append(
                invalid(
                    f"{_PATH}.schedulingPolicy",
                    None,
                    "the basic/gang policy variant is immutable after creation; "
                    "only schedulingPolicy.gang.minCount may be updated",
                )
            )

    # declarative (JobSpec.Scheduling)
    if not _unchanged(op, old is not None, new_cfg, old_cfg):
        if not gates.workload_with_job and new_cfg is not None:
            errs.append(forbidden(_PATH))
        update_errs = update_pointer(op, _PATH, new_cfg, old_cfg)
        errs += update_errs
        if new_cfg is not None and gates.workload_with_job and not update_errs:
            errs += _configuration_dv(op, new_cfg, old_cfg)
    return errs
