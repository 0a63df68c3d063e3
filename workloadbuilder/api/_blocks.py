"""v1alpha3 controller building blocks (KEP-6089) and the ``batch/v1`` Job scheduling block.

Controllers embed these in their own APIs; ``workloadbuilder.builder`` compiles them into
Workload / PodGroup / CompositePodGroup objects. Unlike the object types, ``minCount`` and
``minGroupCount`` are optional here: an unset value means "the controller's default".
"""

from __future__ import annotations

from typing import Any

import attrs

from workloadbuilder.api._codec import Int32
from workloadbuilder.api._scheduling import TopologyConstraint

__all__ = [
    "JobSchedulingConfiguration",
    "WorkloadCompositePodGroupBasicSchedulingPolicy",
    "WorkloadCompositePodGroupDisruptionMode",
    "WorkloadCompositePodGroupGangSchedulingPolicy",
    "WorkloadCompositePodGroupSchedulingConstraints",
    "WorkloadCompositePodGroupSchedulingPolicy",
    "WorkloadPodGroupAllDisruptionMode",
    "WorkloadPodGroupBasicSchedulingPolicy",
    "WorkloadPodGroupDisruptionMode",
    "WorkloadPodGroupGangSchedulingPolicy",
    "WorkloadPodGroupResourceClaim",
    "WorkloadPodGroupSchedulingConstraints",
    "WorkloadPodGroupSchedulingPolicy",
    "WorkloadPodGroupSingleDisruptionMode",
]


def _extra() -> Any:
    return attrs.field(factory=dict, repr=False)


@attrs.frozen(kw_only=True)
class WorkloadPodGroupBasicSchedulingPolicy:
    """``basic: {}``."""

    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class WorkloadPodGroupGangSchedulingPolicy:
    """``gang: {minCount?}``; unset ``min_count`` means the controller's default."""

    min_count: Int32 | None = None
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class WorkloadPodGroupSchedulingPolicy:
    """Union: exactly one of ``basic`` / ``gang``."""

    basic: WorkloadPodGroupBasicSchedulingPolicy | None = None
    gang: WorkloadPodGroupGangSchedulingPolicy | None = None
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class WorkloadPodGroupSchedulingConstraints:
    """``topology``: at most one constraint."""

    topology: tuple[TopologyConstraint, ...] = ()
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class WorkloadPodGroupSingleDisruptionMode:
    """``single: {}``."""

    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class WorkloadPodGroupAllDisruptionMode:
    """``all: {}``."""

    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class WorkloadPodGroupDisruptionMode:
    """Union: exactly one of ``single`` / ``all``."""

    single: WorkloadPodGroupSingleDisruptionMode | None = None
    all: WorkloadPodGroupAllDisruptionMode | None = None
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class WorkloadPodGroupResourceClaim:
    """A claim for the whole group: exactly one of the two sources."""

    name: str
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class WorkloadCompositePodGroupBasicSchedulingPolicy:
    """``basic: {}``."""

    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class WorkloadCompositePodGroupGangSchedulingPolicy:
    """``gang: {minGroupCount?}``."""

    min_group_count: Int32 | None = None
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class WorkloadCompositePodGroupSchedulingPolicy:
    """Union: exactly one of ``basic`` / ``gang``."""

    basic: WorkloadCompositePodGroupBasicSchedulingPolicy | None = None
    gang: WorkloadCompositePodGroupGangSchedulingPolicy | None = None
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class WorkloadCompositePodGroupSchedulingConstraints:
    """``topology``: at most one constraint."""

    topology: tuple[TopologyConstraint, ...] = ()
    unknown_fields: dict[str, Any] = _extra()


WorkloadCompositePodGroupDisruptionMode = WorkloadPodGroupDisruptionMode


@attrs.frozen(kw_only=True)
class JobSchedulingConfiguration:
    """``batch/v1`` ``Job.spec.scheduling`` (gate ``WorkloadWithJob``)."""

    scheduling_policy: WorkloadPodGroupSchedulingPolicy | None = None
    scheduling_constraints: WorkloadPodGroupSchedulingConstraints | None = None
    disruption_mode: WorkloadPodGroupDisruptionMode | None = None
    resource_claims: tuple[WorkloadPodGroupResourceClaim, ...] = ()
    unknown_fields: dict[str, Any] = _extra()
