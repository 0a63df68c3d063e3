"""Kind adapters: what to create for a Job, JobSet, LeaderWorkerSet or a custom workload.

``GenericWorkload`` (``workloadbuilder.io/v1alpha1``) is this SDK's document for custom
operators' workloads (see :mod:`workloadbuilder.kinds.generic`).

Every adapter returns a :class:`Plan` (the Workload, the PodGroups / CompositePodGroups to
create, the pod -> PodGroup mapping and the minCount patches). :func:`plan_for` dispatches on a
document's ``kind``. The JobSet, LeaderWorkerSet and generic adapters live in their own modules
and are imported on first use.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, cast

from workloadbuilder.builder import (
    MinCountPatch,
    Plan,
    PodSetKeyFunc,
    pod_group_min_count_patch,
    workload_min_count_patch,
)
from workloadbuilder.errors import BuildError
from workloadbuilder.kinds.job import NotManagedError, plan_job

__all__ = [
    "SUPPORTED_KINDS",
    "MinCountPatch",
    "NotManagedError",
    "Plan",
    "PodSetKeyFunc",
    "plan_for",
    "plan_job",
    "pod_group_min_count_patch",
    "workload_min_count_patch",
]

#: kind -> (API group, adapter module, adapter function)
SUPPORTED_KINDS: dict[str, tuple[str, str, str]] = {
    "Job": ("batch", "workloadbuilder.kinds.job", "plan_job"),
    "JobSet": ("jobset.x-k8s.io", "workloadbuilder.kinds.jobset", "plan_jobset"),
    "LeaderWorkerSet": ("leaderworkerset.x-k8s.io", "workloadbuilder.kinds.lws", "plan_lws"),
    "GenericWorkload": ("workloadbuilder.io", "workloadbuilder.kinds.generic", "plan_generic_dict"),
}


def plan_for(doc: Mapping[str, Any], **kwargs: Any) -> Plan | list[Plan]:
    """Plan the scheduling objects for a Job, JobSet, LeaderWorkerSet or GenericWorkload.

    Dispatches on ``kind`` (and checks the ``apiVersion`` group); ``kwargs`` go to the adapter
    (e.g. ``parent_workload=`` for a delegated Job). Raises :class:`BuildError` for any other
    kind, or when an adapter module is not available.
    """
    kind = doc.get("kind")
    if not isinstance(kind, str) or kind not in SUPPORTED_KINDS:
        raise BuildError(
            f"unsupported kind {kind!r}: expected one of {', '.join(sorted(SUPPORTED_KINDS))}"
        )
    group, module_name, func_name = SUPPORTED_KINDS[kind]
    api_version = doc.get("apiVersion")
    if not isinstance(api_version, str) or api_version.split("/")[0] != group:
        raise BuildError(f"{kind} must have apiVersion {group}/..., not {api_version!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise BuildError(f"the {kind} adapter is not available: {e}") from e
    adapter = getattr(module, func_name)
    return cast("Plan | list[Plan]", adapter(doc, **kwargs))
