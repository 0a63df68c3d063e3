"""The opt-in Job integration (see the package docstring)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from workloadbuilder.api import Workload
from workloadbuilder.errors import FieldError, ValidationError
from workloadbuilder.kinds import (
    JOB_GVK,
    GroupVersionKind,
    JobIntegration,
    MinCountPatch,
    NotManagedError,
    Plan,
)

__all__ = ["SCHEDULING_ANNOTATION", "OptInJobIntegration", "opted_in_job"]

#: Job annotation carrying the ``spec.scheduling`` block (JSON or YAML) of an opted-in Job.
SCHEDULING_ANNOTATION = "workloadbuilder.io/scheduling"

_PATH = f"metadata.annotations[{SCHEDULING_ANNOTATION}]"


def opted_in_job(job: Mapping[str, Any]) -> dict[str, Any] | None:
    """``job`` with the scheduling block of its annotation as ``spec.scheduling`` (the Job
    the native controller would see), or None when the Job did not opt in. A Job that has a
    ``spec.scheduling`` of its own is handled natively and is never rewritten (None).
    Raises :class:`ValidationError` for an annotation that is not a JSON/YAML object."""
    meta = job.get("metadata") or {}
    raw = (meta.get("annotations") or {}).get(SCHEDULING_ANNOTATION)
    spec = job.get("spec") or {}
    if raw is None or spec.get("scheduling") is not None:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError as e:
            raise ValidationError(
                [FieldError(path=_PATH, type="Invalid value", detail=f"not JSON or YAML: {e}")]
            ) from e
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise ValidationError(
            [
                FieldError(
                    path=_PATH,
                    type="Invalid value",
                    value=raw,
                    has_value=True,
                    detail="must be an object (a Job spec.scheduling block)",
                )
            ]
        )
    out = copy.deepcopy(dict(job))
    out["spec"] = {**dict(out.get("spec") or {}), "scheduling": value}
    return out


class OptInJobIntegration:
    """``batch/v1`` Jobs that opted in with :data:`SCHEDULING_ANNOTATION`, and delegating
    child Jobs; delegation, elastic resize and suspend as the built-in
    :class:`~workloadbuilder.kinds.JobIntegration`."""

    gvk: GroupVersionKind = JOB_GVK
    #: as the native Job controller: a pre-created ownerless Workload / PodGroup is not adopted
    adopt_ownerless = False

    def __init__(self) -> None:
        self._native = JobIntegration()

    def _effective(self, obj: Mapping[str, Any]) -> Mapping[str, Any]:
        if self._native.delegated_template(obj) is not None:
            return obj
        job = opted_in_job(obj)
        if job is None:
            meta = obj.get("metadata") or {}
            raise NotManagedError(
                f"Job {meta.get('namespace')}/{meta.get('name')} did not opt in "
                f"({SCHEDULING_ANNOTATION})",
                reason="not opted in",
            )
        return job

    def plan(self, obj: Mapping[str, Any], /, **options: Any) -> Plan:
        """The native controller's plan for the opted-in Job (``NotManagedError`` when it
        did not opt in)."""
        return self._native.plan(self._effective(obj), **options)

    def delegated_template(self, obj: Mapping[str, Any], /) -> str | None:
        """See :class:`~workloadbuilder.kinds.DelegatedGroups`."""
        return self._native.delegated_template(obj)

    def find_parent_workload(
        self, obj: Mapping[str, Any], workloads: Iterable[Workload], /
    ) -> Workload | None:
        """See :class:`~workloadbuilder.kinds.DelegatedGroups`."""
        return self._native.find_parent_workload(obj, workloads)

    def plan_delegated(self, obj: Mapping[str, Any], parent_workload: Workload, /) -> Plan:
        """See :class:`~workloadbuilder.kinds.DelegatedGroups`."""
        return self._native.plan_delegated(obj, parent_workload)

    def resize_patches(self, obj: Mapping[str, Any], /, **options: Any) -> list[MinCountPatch]:
        """See :class:`~workloadbuilder.kinds.ElasticResize`."""
        return self.plan(obj, **options).patches()

    def is_suspended(self, obj: Mapping[str, Any], /) -> bool:
        """``spec.suspend``."""
        return self._native.is_suspended(obj)

    def suspend_patch(self, obj: Mapping[str, Any], suspended: bool, /) -> dict[str, Any]:
        """``{"spec": {"suspend": suspended}}``."""
        return self._native.suspend_patch(obj, suspended)

    def __repr__(self) -> str:
        return f"OptInJobIntegration({self.gvk})"
