"""``resource.k8s.io/v1`` (Dynamic Resource Allocation, structured parameters) and the pod's
claim fields.

The models carry the fields a scheduler and the claim controller read; everything else (and
every field a later release adds) is kept verbatim in ``unknown_fields``, so a document
round-trips through the codec unchanged. Field names and nesting follow
``k8s.io/api/resource/v1`` at v1.37.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from workloadbuilder.api._codec import CodecError, from_dict, to_dict
from workloadbuilder.api._meta import ObjectMeta

__all__ = [
    "POD_CLAIM_NAME_ANNOTATION",
    "RESOURCE_GROUP",
    "RESOURCE_KINDS",
    "RESOURCE_V1",
    "AllocationResult",
    "CELDeviceSelector",
    "Device",
    "DeviceAllocationResult",
    "DeviceClaim",
    "DeviceClass",
    "DeviceClassSpec",
    "DeviceConstraint",
    "DeviceRequest",
    "DeviceRequestAllocationResult",
    "DeviceSelector",
    "ExactDeviceRequest",
    "PodResourceClaim",
    "PodResourceClaimStatus",
    "ResourceClaim",
    "ResourceClaimConsumerReference",
    "ResourceClaimSpec",
    "ResourceClaimStatus",
    "ResourceClaimTemplate",
    "ResourceClaimTemplateSpec",
    "ResourceObject",
    "ResourcePool",
    "ResourceSlice",
    "ResourceSliceSpec",
    "resource_object_from_dict",
    "resource_object_to_dict",
]

RESOURCE_GROUP = "resource.k8s.io"
RESOURCE_V1 = "resource.k8s.io/v1"
#: on a generated claim: the pod's (or PodGroup's) claim entry it was made for
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"


def _extra() -> Any:
    return attrs.field(factory=dict, repr=False)


# ---- the pod's side (core/v1) ---------------------------------------------------------


@attrs.frozen(kw_only=True)
class PodResourceClaim:
    """``pod.spec.resourceClaims[]``: exactly one of the two sources."""

    name: str
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class PodResourceClaimStatus:
    """``pod.status.resourceClaimStatuses[]``: the claim generated for a template entry
    (unset ``resource_claim_name``: no claim was needed)."""

    name: str
    resource_claim_name: str | None = None
    unknown_fields: dict[str, Any] = _extra()


# ---- DeviceClass ----------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class CELDeviceSelector:
    """``cel.expression``: a CEL expression over ``device`` that must be true."""

    expression: str
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class DeviceSelector:
    """One selector (``cel`` is the only kind in v1)."""

    cel: CELDeviceSelector | None = None
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class DeviceClassSpec:
    """``selectors`` every device of the class satisfies; ``config`` is kept verbatim."""

    selectors: tuple[DeviceSelector, ...] = ()
    config: tuple[dict[str, Any], ...] = ()
    extended_resource_name: str | None = None
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class DeviceClass:
    """``resource.k8s.io/v1`` DeviceClass (cluster-scoped)."""

    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: DeviceClassSpec = attrs.field(factory=DeviceClassSpec)
    api_version: str = RESOURCE_V1
    kind: str = "DeviceClass"
    unknown_fields: dict[str, Any] = _extra()


# ---- ResourceSlice --------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ResourcePool:
    """The pool a slice belongs to; only slices of the newest ``generation`` count."""

    name: str
    generation: int = 0
    resource_slice_count: int = 1
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class Device:
    """One device: ``attributes`` (name -> ``{string|int|bool|version: value}``) and
    ``capacity`` (name -> ``{value: quantity}``); names may be qualified with a domain."""

    name: str
    attributes: dict[str, Any] = attrs.field(factory=dict)
    capacity: dict[str, Any] = attrs.field(factory=dict)
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class ResourceSliceSpec:
    """Devices of one driver's pool, local to ``node_name`` or reachable from the nodes of
    ``node_selector`` or from ``all_nodes``."""

    driver: str
    pool: ResourcePool
    node_name: str | None = None
    node_selector: dict[str, Any] | None = None
    all_nodes: bool | None = None
    per_device_node_selection: bool | None = None
    devices: tuple[Device, ...] = ()
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class ResourceSlice:
    """``resource.k8s.io/v1`` ResourceSlice (cluster-scoped)."""

    spec: ResourceSliceSpec
    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    api_version: str = RESOURCE_V1
    kind: str = "ResourceSlice"
    unknown_fields: dict[str, Any] = _extra()


# ---- ResourceClaim --------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ExactDeviceRequest:
    """``exactly``: devices of one class, ``count`` of them or ``All``."""

    device_class_name: str
    selectors: tuple[DeviceSelector, ...] = ()
    allocation_mode: str | None = None
    count: int | None = None
    admin_access: bool | None = None
    tolerations: tuple[dict[str, Any], ...] = ()
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class DeviceRequest:
    """One request of a claim: ``exactly`` or ``firstAvailable`` (kept verbatim)."""

    name: str
    exactly: ExactDeviceRequest | None = None
    first_available: tuple[dict[str, Any], ...] = ()
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class DeviceConstraint:
    """``matchAttribute`` (or ``distinctAttribute``) over the devices of ``requests``
    (every request of the claim when empty)."""

    requests: tuple[str, ...] = ()
    match_attribute: str | None = None
    distinct_attribute: str | None = None
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class DeviceClaim:
    """``spec.devices``."""

    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()
    config: tuple[dict[str, Any], ...] = ()
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class ResourceClaimSpec:
    """``spec``: what is claimed."""

    devices: DeviceClaim = attrs.field(factory=DeviceClaim)
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class DeviceRequestAllocationResult:
    """One allocated device."""

    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool | None = None
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class DeviceAllocationResult:
    """``allocation.devices``."""

    results: tuple[DeviceRequestAllocationResult, ...] = ()
    config: tuple[dict[str, Any], ...] = ()
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class AllocationResult:
    """``status.allocation``: the devices and the nodes they can be used from."""

    devices: DeviceAllocationResult | None = None
    node_selector: dict[str, Any] | None = None
    allocation_timestamp: str | None = None
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class ResourceClaimConsumerReference:
    """``status.reservedFor[]``: a pod (``resource: pods``) or, with the
    ``DRAWorkloadResourceClaims`` gate, a PodGroup (``scheduling.k8s.io`` ``podgroups``)."""

    resource: str
    name: str
    uid: str
    api_group: str | None = None
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class ResourceClaimStatus:
    """``status``."""

    allocation: AllocationResult | None = None
    reserved_for: tuple[ResourceClaimConsumerReference, ...] = ()
    devices: tuple[dict[str, Any], ...] = ()
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class ResourceClaim:
    """``resource.k8s.io/v1`` ResourceClaim."""

    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: ResourceClaimSpec = attrs.field(factory=ResourceClaimSpec)
    status: ResourceClaimStatus | None = None
    api_version: str = RESOURCE_V1
    kind: str = "ResourceClaim"
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class ResourceClaimTemplateSpec:
    """``spec``: the metadata and spec of every claim made from the template."""

    spec: ResourceClaimSpec = attrs.field(factory=ResourceClaimSpec)
    metadata: ObjectMeta | None = None
    unknown_fields: dict[str, Any] = _extra()


@attrs.frozen(kw_only=True)
class ResourceClaimTemplate:
    """``resource.k8s.io/v1`` ResourceClaimTemplate."""

    metadata: ObjectMeta = attrs.field(factory=ObjectMeta)
    spec: ResourceClaimTemplateSpec = attrs.field(factory=ResourceClaimTemplateSpec)
    api_version: str = RESOURCE_V1
    kind: str = "ResourceClaimTemplate"
    unknown_fields: dict[str, Any] = _extra()


ResourceObject = DeviceClass | ResourceSlice | ResourceClaim | ResourceClaimTemplate

#: kind -> model (served as ``resource.k8s.io/v1``)
RESOURCE_KINDS: dict[str, type[ResourceObject]] = {
    "DeviceClass": DeviceClass,
    "ResourceSlice": ResourceSlice,
    "ResourceClaim": ResourceClaim,
    "ResourceClaimTemplate": ResourceClaimTemplate,
}


def resource_object_from_dict(data: Mapping[str, Any]) -> ResourceObject:
    """Parse a ``resource.k8s.io/v1`` document by its ``kind``; :class:`CodecError` names
    the field path of a wrong shape, an unknown kind or another apiVersion."""
    kind = data.get("kind")
    if not isinstance(kind, str) or kind not in RESOURCE_KINDS:
        raise CodecError(
            "kind", f"unsupported kind {kind!r}; expected one of {sorted(RESOURCE_KINDS)}"
        )
    if data.get("apiVersion") != RESOURCE_V1:
        raise CodecError(
            "apiVersion", f"{kind} is served as {RESOURCE_V1}, not {data.get('apiVersion')!r}"
        )
    return from_dict(data, RESOURCE_KINDS[kind])


def resource_object_to_dict(obj: ResourceObject) -> dict[str, Any]:
    """Serialise a ``resource.k8s.io/v1`` object (camelCase, omit-empty, unknown fields
    kept)."""
    return to_dict(obj)
