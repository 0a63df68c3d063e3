"""``scheduling.k8s.io`` v1beta1 Workload/PodGroup and v1alpha3 CompositePodGroup.

Field names, optionality and nesting follow ``k8s.io/api/scheduling/v1beta1`` and
``v1alpha3`` at v1.37 (``staging/src/k8s.io/api/scheduling`` of kubernetes v1.37.2). The
v1beta1 and v1alpha3 schemas of Workload and PodGroup are identical, so one model serves
both; ``api_version`` says which one a document is.
"""

from __future__ import annotations

from typing import Any

import attrs

from workloadbuilder.api._codec import JSON_FIRST, Int32
from workloadbuilder.api._meta import Condition, ObjectMeta

__all__ = [
    "GROUP",
    "V1ALPHA3",
    "V1BETA1",
    "AllDisruptionMode",
    "BasicSchedulingPolicy",
    "CompositeBasicSchedulingPolicy",
    "CompositeDisruptionMode",
    "CompositeGangSchedulingPolicy",
    "CompositePodGroup",
    "CompositePodGroupSchedulingConstraints",
    "CompositePodGroupSchedulingPolicy",
    "CompositePodGroupSpec",
    "CompositePodGroupStatus",
    "CompositePodGroupTemplate",
    "DisruptionMode",
    "GangSchedulingPolicy",
    "PodGroup",
    "PodGroupResourceClaim",
    "PodGroupResourceClaimStatus",
    "PodGroupSchedulingConstraints",
    "PodGroupSchedulingPolicy",
    "PodGroupSpec",
    "PodGroupStatus",
    "PodGroupTemplate",
    "SingleDisruptionMode",
    "TopologyConstraint",
    "TypedLocalObjectReference",
    "Workload",
    "WorkloadReference",
    "WorkloadSpec",
]

GROUP = "scheduling.k8s.io"
V1BETA1 = f"{GROUP}/v1beta1"
V1ALPHA3 = f"{GROUP}/v1alpha3"


def _extra() -> Any:
    return attrs.field(factory=dict, repr=False)


def _first() -> Any:
    """An optional field (default ``None``) serialised ahead of the fields declared before it,
    to keep the upstream (Go struct) JSON order."""
    return attrs.field(default=None, metadata={JSON_FIRST: True})


@attrs.frozen(kw_only=True)
class TypedLocalObjectReference:
    """Back-link from a Workload to the object that owns it (``spec.controllerRef``)."""

    kind: str
    name: str
    api_group: str | None = _first()
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class BasicSchedulingPolicy:
    """Pod-by-pod scheduling (``schedulingPolicy.basic: {}``)."""

    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class GangSchedulingPolicy:
    """All-or-nothing scheduling of at least ``min_count`` pods."""

    min_count: Int32
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class PodGroupSchedulingPolicy:
    """Union: exactly one of ``basic`` / ``gang``."""

    basic: BasicSchedulingPolicy | None = None
    gang: GangSchedulingPolicy | None = None
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class TopologyConstraint:
    """All pods of the group land on nodes sharing one value of node label ``key``."""

    key: str
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class PodGroupSchedulingConstraints:
    """``topology``: at most one constraint (gate ``TopologyAwareWorkloadScheduling``)."""

    topology: tuple[TopologyConstraint, ...] = ()
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class PodGroupResourceClaim:
    """A DRA claim shared by the whole PodGroup: exactly one of the two sources."""

    name: str
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class SingleDisruptionMode:
    """Pods may be disrupted one by one (the server default)."""

    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class AllDisruptionMode:
    """The group is disrupted (preempted) as one unit."""

    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class DisruptionMode:
    """Union: exactly one of ``single`` / ``all``."""

    single: SingleDisruptionMode | None = None
    all: AllDisruptionMode | None = None
    unknown_fields: dict[str, Any] = _extra()


# The composite variants have the same shape under their own upstream type names.
CompositeDisruptionMode = DisruptionMode


@attrs.frozen(kw_only=True)
class PodGroupTemplate:
    """A leaf template of a Workload: the policy copied into each PodGroup."""

    name: str
    scheduling_policy: PodGroupSchedulingPolicy
    scheduling_constraints: PodGroupSchedulingConstraints | None = None
    resource_claims: tuple[PodGroupResourceClaim, ...] = ()
    disruption_mode: DisruptionMode | None = None
    priority_class_name: str | None = None
    priority: Int32 | None = None
    preemption_policy: str | None = None
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class CompositeBasicSchedulingPolicy:
    """Children scheduled independently."""

    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class CompositeGangSchedulingPolicy:
    """At least ``min_group_count`` child groups must be schedulable together."""

    min_group_count: Int32
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class CompositePodGroupSchedulingPolicy:
    """Union: exactly one of ``basic`` / ``gang``."""

    basic: CompositeBasicSchedulingPolicy | None = None
    gang: CompositeGangSchedulingPolicy | None = None
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class CompositePodGroupSchedulingConstraints:
    """``topology``: at most one constraint."""

    topology: tuple[TopologyConstraint, ...] = ()
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class CompositePodGroupTemplate:
    """A non-leaf template: children are PodGroupTemplates and/or CompositePodGroupTemplates."""

    name: str
    scheduling_policy: CompositePodGroupSchedulingPolicy
    scheduling_constraints: CompositePodGroupSchedulingConstraints | None = None
    disruption_mode: DisruptionMode | None = None
    priority_class_name: str | None = None
    priority: Int32 | None = None
    preemption_policy: str | None = None
    pod_group_templates: tuple[PodGroupTemplate, ...] = ()
    composite_pod_group_templates: tuple[CompositePodGroupTemplate, ...] = ()
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class WorkloadSpec:
    """Union: exactly one of ``pod_group_templates`` / ``composite_pod_group_templates``."""

    controller_ref: TypedLocalObjectReference | None = None
    pod_group_templates: tuple[PodGroupTemplate, ...] = ()
    composite_pod_group_templates: tuple[CompositePodGroupTemplate, ...] = ()
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class Workload:
    """A static template of the scheduling units of one workload (no status)."""

    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: WorkloadSpec = attrs.field(factory=WorkloadSpec)
    api_version: str = V1BETA1
    kind: str = "Workload"
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class WorkloadReference:
    """Which Workload and which template a PodGroup / CompositePodGroup was made from."""

    workload_name: str
    template_name: str
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class PodGroupSpec:
    """``PodGroupSpec``: the runtime copy of a template's policy."""

    scheduling_policy: PodGroupSchedulingPolicy
    parent_composite_pod_group_name: str | None = _first()
    workload_ref: WorkloadReference | None = _first()
    scheduling_constraints: PodGroupSchedulingConstraints | None = None
    resource_claims: tuple[PodGroupResourceClaim, ...] = ()
    disruption_mode: DisruptionMode | None = None
    priority_class_name: str | None = None
    priority: Int32 | None = None
    preemption_policy: str | None = None
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class PodGroupResourceClaimStatus:
    """The generated ResourceClaim for one of ``spec.resourceClaims``."""

    name: str
    resource_claim_name: str | None = None
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class PodGroupStatus:
    """Written by the scheduler (conditions) and the ResourceClaim controller."""

    conditions: tuple[Condition, ...] = ()
    resource_claim_statuses: tuple[PodGroupResourceClaimStatus, ...] = ()
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class PodGroup:
    """The runtime scheduling unit (one gang instance)."""

    spec: PodGroupSpec
    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    status: PodGroupStatus | None = None
    api_version: str = V1BETA1
    kind: str = "PodGroup"
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class CompositePodGroupSpec:
    """``CompositePodGroupSpec`` (v1alpha3)."""

    workload_ref: WorkloadReference
    scheduling_policy: CompositePodGroupSchedulingPolicy
    parent_composite_pod_group_name: str | None = _first()
    scheduling_constraints: CompositePodGroupSchedulingConstraints | None = None
    disruption_mode: DisruptionMode | None = None
    priority_class_name: str | None = None
    priority: Int32 | None = None
    preemption_policy: str | None = None
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class CompositePodGroupStatus:
    """Conditions written by the scheduler."""

    conditions: tuple[Condition, ...] = ()
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class CompositePodGroup:
    """A non-leaf node of a group hierarchy (``scheduling.k8s.io/v1alpha3`` only)."""

    spec: CompositePodGroupSpec
    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    status: CompositePodGroupStatus | None = None
    api_version: str = V1ALPHA3
    kind: str = "CompositePodGroup"
    unknown_fields: dict[str, Any] = _extra()
