"""The built-in integrations: Job, JobSet, LeaderWorkerSet and GenericWorkload.

Each one loads its adapter module (``workloadbuilder.kinds.job`` / ``.jobset`` / ``.lws`` /
``.generic``) on first use and looks the adapter function up at every call.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import Any, cast

from workloadbuilder.api import Workload
from workloadbuilder.builder import MinCountPatch, Plan
from workloadbuilder.errors import BuildError
from workloadbuilder.kinds._integration import GroupVersionKind, Integration

__all__ = [
    "GENERIC_GVK",
    "JOBSET_GVK",
    "JOB_GVK",
    "LWS_GVK",
    "GenericWorkloadIntegration",
    "JobIntegration",
    "JobSetIntegration",
    "LeaderWorkerSetIntegration",
    "builtin_integrations",
]

JOB_GVK = GroupVersionKind(group="batch", versions=("v1",), kind="Job")
JOBSET_GVK = GroupVersionKind(group="jobset.x-k8s.io", versions=("v1alpha2",), kind="JobSet")
LWS_GVK = GroupVersionKind(
    group="leaderworkerset.x-k8s.io", versions=("v1",), kind="LeaderWorkerSet"
)
GENERIC_GVK = GroupVersionKind(
    group="workloadbuilder.io", versions=("v1alpha1",), kind="GenericWorkload"
)


class _Adapter:
    """An integration backed by an adapter module that is imported on first use."""

    _module_name: str
    _plan_func: str
    gvk: GroupVersionKind

    def _module(self) -> ModuleType:
        try:
            return importlib.import_module(self._module_name)
        except ImportError as e:
            raise BuildError(f"the {self.gvk.kind} adapter is not available: {e}") from e

    def _call(self, func: str, /, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._module(), func)(*args, **kwargs)

    def plan(self, obj: Mapping[str, Any], /, **options: Any) -> Plan:
        """The adapter's plan for ``obj`` (``options`` go to the adapter function)."""
        return cast(Plan, self._call(self._plan_func, obj, **options))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.gvk})"


def _suspended(obj: Mapping[str, Any]) -> bool:
    spec = obj.get("spec")
    return isinstance(spec, Mapping) and spec.get("suspend") is True


class JobIntegration(_Adapter):
    """``batch/v1`` Job (:func:`workloadbuilder.kinds.plan_job`): delegated groups for child
    Jobs, elastic ``minCount`` (it follows ``parallelism``), ``spec.suspend``."""

    gvk = JOB_GVK
    _module_name = "workloadbuilder.kinds.job"
    _plan_func = "plan_job"
    #: an existing Workload / PodGroup of a planned name without a controller is the user's:
    #: kube-controller-manager v1.37.2's Job controller never adopts it (see
    #: :class:`workloadbuilder.kinds.OwnerlessObjects`)
    adopt_ownerless = False

    def delegated_template(self, obj: Mapping[str, Any], /) -> str | None:
        """The ``scheduling.k8s.io/group-template-name`` of a delegating child Job."""
        module = self._module()
        if module.management_mode(obj) != "pod-group-only":
            return None
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        return str(annotations[module.GROUP_TEMPLATE_NAME_ANNOTATION])

    def find_parent_workload(
        self, obj: Mapping[str, Any], workloads: Iterable[Workload], /
    ) -> Workload | None:
        """The Workload whose ``spec.controllerRef`` is the Job's controller owner."""
        return cast("Workload | None", self._call("find_parent_workload", obj, workloads))

    def plan_delegated(self, obj: Mapping[str, Any], parent_workload: Workload, /) -> Plan:
        """The Job's PodGroup from its parent's Workload (``plan.owns_workload`` is false)."""
        return self.plan(obj, parent_workload=parent_workload)

    def resize_patches(self, obj: Mapping[str, Any], /, **options: Any) -> list[MinCountPatch]:
        """The minCount patches of the Job as it is now."""
        return self.plan(obj, **options).patches()

    def is_suspended(self, obj: Mapping[str, Any], /) -> bool:
        """``spec.suspend``."""
        return _suspended(obj)

    def suspend_patch(self, obj: Mapping[str, Any], suspended: bool, /) -> dict[str, Any]:
        """``{"spec": {"suspend": suspended}}``."""
        return {"spec": {"suspend": suspended}}


class JobSetIntegration(_Adapter):
    """``jobset.x-k8s.io`` JobSet (:func:`workloadbuilder.kinds.jobset.plan_jobset`): child
    Jobs, ``spec.suspend``."""

    gvk = JOBSET_GVK
    _module_name = "workloadbuilder.kinds.jobset"
    _plan_func = "plan_jobset"
    #: the JobSet controller (KEP-969) refuses a same-named object it does not control
    adopt_ownerless = False

    def child_workloads(self, obj: Mapping[str, Any], /) -> list[dict[str, Any]]:
        """The child Jobs (:func:`workloadbuilder.kinds.jobset.jobset_child_job_manifests`)."""
        return cast("list[dict[str, Any]]", self._call("jobset_child_job_manifests", obj))

    def is_suspended(self, obj: Mapping[str, Any], /) -> bool:
        """``spec.suspend``."""
        return _suspended(obj)

    def suspend_patch(self, obj: Mapping[str, Any], suspended: bool, /) -> dict[str, Any]:
        """``{"spec": {"suspend": suspended}}``."""
        return {"spec": {"suspend": suspended}}


class LeaderWorkerSetIntegration(_Adapter):
    """``leaderworkerset.x-k8s.io`` LeaderWorkerSet (:func:`workloadbuilder.kinds.lws.plan_lws`;
    ``revision=`` is passed through)."""

    gvk = LWS_GVK
    _module_name = "workloadbuilder.kinds.lws"
    _plan_func = "plan_lws"


class GenericWorkloadIntegration(_Adapter):
    """``workloadbuilder.io/v1alpha1`` GenericWorkload
    (:func:`workloadbuilder.kinds.generic.plan_generic_dict`)."""

    gvk = GENERIC_GVK
    _module_name = "workloadbuilder.kinds.generic"
    _plan_func = "plan_generic_dict"


def builtin_integrations() -> tuple[Integration, ...]:
    """New instances of the built-in integrations: Job, JobSet, LeaderWorkerSet,
    GenericWorkload."""
    return (
        JobIntegration(),
        JobSetIntegration(),
        LeaderWorkerSetIntegration(),
        GenericWorkloadIntegration(),
    )
