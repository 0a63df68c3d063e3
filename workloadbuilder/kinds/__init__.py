"""Kind integrations: what to create for a Job, JobSet, LeaderWorkerSet or a custom workload.

Every kind is an :class:`Integration` (Kueue jobframework shape): its GVK and
``plan(obj) -> Plan`` (the Workload, the PodGroups / CompositePodGroups to create, the
pod -> PodGroup mapping and the minCount patches). Optional capabilities are detected at run
time: :class:`ChildWorkloads` (JobSet -> Jobs), :class:`DelegatedGroups` (a child Job whose
PodGroup comes from its parent's Workload), :class:`ElasticResize`, :class:`Suspendable` and,
read by the Reconciler, :class:`OwnerConditions` (a ``GangScheduled`` owner condition) and
:class:`OwnerlessObjects` (whether a pre-created object is adopted).

:func:`default_registry` holds the built-in Job, JobSet, LeaderWorkerSet and
``GenericWorkload`` (``workloadbuilder.io/v1alpha1``, this SDK's document for custom
operators' workloads, see :mod:`workloadbuilder.kinds.generic`) integrations; an operator
author adds a kind with :func:`register`. ``workloadbuilder build``, the simulator and the
controllers look kinds up there; :func:`plan_for` is the one-call shortcut. The JobSet,
LeaderWorkerSet and generic adapters live in their own modules and are imported on first use.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workloadbuilder.builder import (
    MinCountPatch,
    Plan,
    PodSetKeyFunc,
    pod_group_min_count_patch,
    workload_min_count_patch,
)
from workloadbuilder.kinds._builtin import (
    GENERIC_GVK,
    JOB_GVK,
    JOBSET_GVK,
    LWS_GVK,
    GenericWorkloadIntegration,
    JobIntegration,
    JobSetIntegration,
    LeaderWorkerSetIntegration,
    builtin_integrations,
)
from workloadbuilder.kinds._integration import (
    ChildWorkloads,
    DelegatedGroups,
    DuplicateIntegrationError,
    ElasticResize,
    GroupVersionKind,
    Integration,
    IntegrationRegistry,
    OwnerConditions,
    OwnerlessObjects,
    Suspendable,
    UnknownKindError,
    capabilities,
)
from workloadbuilder.kinds.job import NotManagedError, plan_job

__all__ = [
    "GENERIC_GVK",
    "JOBSET_GVK",
    "JOB_GVK",
    "LWS_GVK",
    "ChildWorkloads",
    "DelegatedGroups",
    "DuplicateIntegrationError",
    "ElasticResize",
    "GenericWorkloadIntegration",
    "GroupVersionKind",
    "Integration",
    "IntegrationRegistry",
    "JobIntegration",
    "JobSetIntegration",
    "LeaderWorkerSetIntegration",
    "MinCountPatch",
    "NotManagedError",
    "OwnerConditions",
    "OwnerlessObjects",
    "Plan",
    "PodSetKeyFunc",
    "Suspendable",
    "UnknownKindError",
    "builtin_integrations",
    "capabilities",
    "default_registry",
    "plan_for",
    "plan_job",
    "pod_group_min_count_patch",
    "register",
    "workload_min_count_patch",
]

_DEFAULT = IntegrationRegistry(builtin_integrations())


def default_registry() -> IntegrationRegistry:
    """The process-wide registry: the built-in integrations plus every :func:`register`-ed
    one."""
    return _DEFAULT


def register(integration: Integration) -> Integration:
    """Add a custom kind's integration to :func:`default_registry` and return it.

    Raises :class:`DuplicateIntegrationError` when its group and kind are already registered.
    """
    return _DEFAULT.register(integration)


def plan_for(doc: Mapping[str, Any], **kwargs: Any) -> Plan:
    """Plan the scheduling objects for any registered kind (Job, JobSet, LeaderWorkerSet,
    GenericWorkload, or a custom one).

    Looks the integration up by ``apiVersion`` group and ``kind`` in :func:`default_registry`;
    ``kwargs`` go to the integration's ``plan`` (e.g. ``parent_workload=`` for a delegated
    Job). Raises :class:`UnknownKindError` (a :class:`~workloadbuilder.errors.BuildError`) for
    an unknown kind or a wrong group, :class:`~workloadbuilder.errors.BuildError` when an
    adapter module is not available.
    """
    return _DEFAULT.plan(doc, **kwargs)
