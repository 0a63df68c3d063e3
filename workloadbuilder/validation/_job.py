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
    from_dict,
)
from workloadbuilder.errors import FieldError
from workloadbuilder.validation._blocks import (
    disruption_mode,
    resource_claims,
    scheduling_constraints,
    workload_policy,
)
from workloadbuilder.validation._common import (
    Op,
    attr_of,
    child,
    codec_error,
    forbidden,
    invalid,
    optional_immutable_struct,
    unchanged,
    update_pointer,
)
from workloadbuilder.validation._gates import FeatureGates

__all__ = ["validate_job_scheduling"]

_PATH = "spec.scheduling"


def _configuration_dv(op: Op, new: JobSchedulingConfiguration, old: Any) -> list[FieldError]:
    corr = old is not None
    errs: list[FieldError] = []
    # schedulingPolicy: +optional, +k8s:update=NoSet,NoUnset
    path = child(_PATH, "schedulingPolicy")
    prev_policy = attr_of(old, "scheduling_policy")
    if not unchanged(op, corr, new.scheduling_policy, prev_policy):
        update_errs = update_pointer(op, path, new.scheduling_policy, prev_policy)
        errs += update_errs
        if new.scheduling_policy is not None and not update_errs:
            errs += workload_policy(op, path, new.scheduling_policy, prev_policy)
    # schedulingConstraints and disruptionMode: +k8s:immutable +optional
    for attr, json_name, validator in (
        ("scheduling_constraints", "schedulingConstraints", scheduling_constraints),
        ("disruption_mode", "disruptionMode", disruption_mode),
    ):
        errs += optional_immutable_struct(
            op, child(_PATH, json_name), getattr(new, attr), attr_of(old, attr), corr, validator
        )
    # resourceClaims: +k8s:immutable, maxItems 4, listType=map keyed by name
    errs += resource_claims(
        op,
        child(_PATH, "resourceClaims"),
        new.resource_claims,
        attr_of(old, "resource_claims"),
        corr,
    )
    return errs


def _parse(
    job: Mapping[str, Any] | None,
) -> tuple[JobSchedulingConfiguration | None, int, list[FieldError]]:
    spec = job.get("spec") if isinstance(job, Mapping) else None
    if spec is None:
        return None, 1, []
    if not isinstance(spec, Mapping):
        return None, 1, [FieldError(path="spec", type="Invalid value", detail="expected an object")]
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
    if not unchanged(op, old is not None, new_cfg, old_cfg):
        if not gates.workload_with_job and new_cfg is not None:
            errs.append(forbidden(_PATH))
        update_errs = update_pointer(op, _PATH, new_cfg, old_cfg)
        errs += update_errs
        if new_cfg is not None and gates.workload_with_job and not update_errs:
            errs += _configuration_dv(op, new_cfg, old_cfg)
    return errs
