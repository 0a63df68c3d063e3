"""Validation of the v1alpha3 building blocks at a controller's field path.

For operator authors who accept scheduling blocks in their own API (as ``Job.spec.scheduling``
does) and want the API server's errors at their own paths; :class:`~workloadbuilder.Builder`
validates a ``WorkloadItem`` tree with these.

The generated ``Validate_WorkloadPodGroup*`` and ``Validate_WorkloadCompositePodGroup*``
functions of ``k8s.io/api/scheduling/v1alpha3`` (v0.37.2), including their update ratcheting
(data equal to the old value is not re-validated; a union whose membership did not change is
not re-checked). The rules are those of :mod:`workloadbuilder.validation` (the same blocks
make up ``Job.spec.scheduling``); these wrappers take the builder's ``update`` flag.
"""

from __future__ import annotations

from workloadbuilder.api import (
    WorkloadCompositePodGroupDisruptionMode,
    WorkloadCompositePodGroupSchedulingConstraints,
    WorkloadCompositePodGroupSchedulingPolicy,
    WorkloadPodGroupDisruptionMode,
    WorkloadPodGroupResourceClaim,
    WorkloadPodGroupSchedulingConstraints,
    WorkloadPodGroupSchedulingPolicy,
)
from workloadbuilder.errors import FieldError
from workloadbuilder.validation._blocks import (
    disruption_mode,
    resource_claim,
    scheduling_constraints,
    workload_policy,
)
from workloadbuilder.validation._common import Op

__all__ = [
    "validate_composite_constraints",
    "validate_composite_policy",
    "validate_constraints",
    "validate_disruption_mode",
    "validate_policy",
    "validate_resource_claim",
]


def _op(update: bool) -> Op:
    return Op(update=update, options={})


def validate_policy(
    path: str,
    new: WorkloadPodGroupSchedulingPolicy,
    old: WorkloadPodGroupSchedulingPolicy | None,
    *,
    update: bool,
) -> list[FieldError]:
    """``Validate_WorkloadPodGroupSchedulingPolicy``."""
    return workload_policy(_op(update), path, new, old, count="minCount")


def validate_composite_policy(
    path: str,
    new: WorkloadCompositePodGroupSchedulingPolicy,
    old: WorkloadCompositePodGroupSchedulingPolicy | None,
    *,
    update: bool,
) -> list[FieldError]:
    """``Validate_WorkloadCompositePodGroupSchedulingPolicy``."""
    return workload_policy(_op(update), path, new, old, count="minGroupCount")


def validate_constraints(
    path: str,
    new: WorkloadPodGroupSchedulingConstraints,
    old: WorkloadPodGroupSchedulingConstraints | None,
    *,
    update: bool,
) -> list[FieldError]:
    """``Validate_WorkloadPodGroupSchedulingConstraints``."""
    return scheduling_constraints(_op(update), path, new, old)


def validate_composite_constraints(
    path: str,
    new: WorkloadCompositePodGroupSchedulingConstraints,
    old: WorkloadCompositePodGroupSchedulingConstraints | None,
    *,
    update: bool,
) -> list[FieldError]:
    """``Validate_WorkloadCompositePodGroupSchedulingConstraints``."""
    return scheduling_constraints(_op(update), path, new, old)


def validate_disruption_mode(
    path: str,
    new: WorkloadPodGroupDisruptionMode | WorkloadCompositePodGroupDisruptionMode,
    old: WorkloadPodGroupDisruptionMode | WorkloadCompositePodGroupDisruptionMode | None,
    *,
    update: bool,
) -> list[FieldError]:
    """``Validate_WorkloadPodGroupDisruptionMode`` (the composite block has the same rules)."""
    return disruption_mode(_op(update), path, new, old)


def validate_resource_claim(
    path: str,
    new: WorkloadPodGroupResourceClaim,
    old: WorkloadPodGroupResourceClaim | None,
    *,
    update: bool,
) -> list[FieldError]:
    """``Validate_WorkloadPodGroupResourceClaim`` (``old`` correlated by claim name)."""
    return resource_claim(_op(update), path, new, old)
