"""workloadbuilder: the Python SDK for Kubernetes v1.37 workload-aware scheduling.

The names most programs need are available here; everything else lives in the subpackages:
:mod:`workloadbuilder.api` (typed models and codec), :mod:`workloadbuilder.validation`,
:mod:`workloadbuilder.naming`, :mod:`workloadbuilder.builder`, :mod:`workloadbuilder.kinds`,
:mod:`workloadbuilder.cluster` and :mod:`workloadbuilder.testing`.

Re-exports are resolved lazily, so ``import workloadbuilder.api`` does not pull in the HTTP
client stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from workloadbuilder._lazy import lazy_names
from workloadbuilder.errors import FieldError, ValidationError, WorkloadBuilderError

if TYPE_CHECKING:
    from workloadbuilder.api import (
        CompositePodGroup,
        PodGroup,
        Workload,
        from_dict,
        object_from_dict,
        object_to_dict,
        to_dict,
    )
    from workloadbuilder.builder import (
        Builder,
        BuildOptions,
        PodSet,
        WorkloadItem,
        simple_workload,
    )
    from workloadbuilder.cluster import Cluster, Informer, KubeCluster, MemoryCluster
    from workloadbuilder.kinds import Plan, plan_for
    from workloadbuilder.validation import validate_object

#: the version of the distribution (semver); pyproject.toml reads it from here
__version__ = "0.9.0"

_LAZY: dict[str, str] = {
    "CompositePodGroup": "workloadbuilder.api",
    "PodGroup": "workloadbuilder.api",
    "Workload": "workloadbuilder.api",
    "from_dict": "workloadbuilder.api",
    "object_from_dict": "workloadbuilder.api",
    "object_to_dict": "workloadbuilder.api",
    "to_dict": "workloadbuilder.api",
    "BuildOptions": "workloadbuilder.builder",
    "Builder": "workloadbuilder.builder",
    "PodSet": "workloadbuilder.builder",
    "WorkloadItem": "workloadbuilder.builder",
    "simple_workload": "workloadbuilder.builder",
    "Cluster": "workloadbuilder.cluster",
    "Informer": "workloadbuilder.cluster",
    "KubeCluster": "workloadbuilder.cluster",
    "MemoryCluster": "workloadbuilder.cluster",
    "Plan": "workloadbuilder.kinds",
    "plan_for": "workloadbuilder.kinds",
    "validate_object": "workloadbuilder.validation",
}

__all__ = [
    "BuildOptions",
    "Builder",
    "Cluster",
    "CompositePodGroup",
    "FieldError",
    "Informer",
    "KubeCluster",
    "MemoryCluster",
    "Plan",
    "PodGroup",
    "PodSet",
    "ValidationError",
    "Workload",
    "WorkloadBuilderError",
    "WorkloadItem",
    "__version__",
    "from_dict",
    "object_from_dict",
    "object_to_dict",
    "plan_for",
    "simple_workload",
    "to_dict",
    "validate_object",
]


__getattr__, __dir__ = lazy_names(globals(), _LAZY)
