"""The upstream ``workloadbuilder`` model in Python, plus a facade for custom operators.

A controller describes its workload as a tree of :class:`WorkloadItem` (no children: a
PodGroupTemplate; children: a CompositePodGroupTemplate) with defaults, the user's building
blocks (:class:`WorkloadInput`) and callbacks; :class:`Builder` validates the tree
(``validate``), compiles it (``build_workload``) and materialises runtime groups
(``new_pod_group`` / ``new_composite_pod_group``). ``Builder.from_existing_workload`` serves
delegated child controllers. :func:`simple_workload` with :class:`PodSet` covers the common
"named pod sets, gang or basic" case in a few lines; it returns a :class:`Plan`, the same
result type as every kind adapter in :mod:`workloadbuilder.kinds`.
"""

from workloadbuilder.builder._builder import (
    Builder,
    build_flat_workload,
    iter_composite_templates,
    iter_leaf_templates,
    owner_group,
)
from workloadbuilder.builder._compile import resolve_config
from workloadbuilder.builder._facade import PodSet, controller_ref, simple_workload
from workloadbuilder.builder._plan import (
    POD_SET_ANNOTATION,
    WORKLOAD_ANNOTATION,
    MinCountPatch,
    Plan,
    PodSetKeyFunc,
    annotated_pod_set_key,
    check_planned,
    pod_group_min_count_patch,
    workload_min_count_patch,
)
from workloadbuilder.builder._types import (
    ALL_DISRUPTION_MODES,
    ALL_POLICIES,
    BuildOptions,
    DisruptionModeName,
    PolicyName,
    SchedulingConfig,
    SchedulingConfigFunc,
    WorkloadInput,
    WorkloadItem,
    join_path,
)

__all__ = [
    "ALL_DISRUPTION_MODES",
    "ALL_POLICIES",
    "POD_SET_ANNOTATION",
    "WORKLOAD_ANNOTATION",
    "BuildOptions",
    "Builder",
    "DisruptionModeName",
    "MinCountPatch",
    "Plan",
    "PodSet",
    "PodSetKeyFunc",
    "PolicyName",
    "SchedulingConfig",
    "SchedulingConfigFunc",
    "WorkloadInput",
    "WorkloadItem",
    "annotated_pod_set_key",
    "build_flat_workload",
    "check_planned",
    "controller_ref",
    "iter_composite_templates",
    "iter_leaf_templates",
    "join_path",
    "owner_group",
    "pod_group_min_count_patch",
    "resolve_config",
    "simple_workload",
    "workload_min_count_patch",
]
