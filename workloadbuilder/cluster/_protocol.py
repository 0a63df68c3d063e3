"""The one seam to the API: the async :class:`Cluster` protocol and its value types.

Two implementations behave the same for everything the project uses: ``KubeCluster``
(kubernetes-asyncio, real clusters) and ``MemoryCluster`` (the embedded default).

Objects: our own kinds (Workload, PodGroup, CompositePodGroup) are passed and returned as the
typed models of :mod:`workloadbuilder.api`; every other kind is a plain JSON dict.
Kinds are named by :class:`ResourceInfo` or, for registered kinds, by their ``kind`` string
(``"Pod"``, ``"PodGroup"``, ``"Job"``, ...); see :func:`resource_info`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

import attrs

from workloadbuilder.api import CompositePodGroup, PodGroup, Workload

__all__ = [
    "Cluster",
    "KubeObject",
    "ObjectList",
    "PatchType",
    "Preconditions",
    "PropagationPolicy",
    "ResourceInfo",
    "WatchEvent",
    "WatchEventType",
    "register_resource",
    "resource_info",
    "resource_of",
]

#: What a Cluster returns: a typed model for our kinds, a JSON dict for the rest.
KubeObject = Workload | PodGroup | CompositePodGroup | dict[str, Any]

PatchType = Literal["merge", "json", "strategic", "apply"]
PropagationPolicy = Literal["Background", "Foreground", "Orphan"]
WatchEventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]


@attrs.frozen(kw_only=True)
class ResourceInfo:
    """Where a kind lives in the API: group/version, kind, plural, scope, subresources."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool = True
    has_status: bool = True

    @property
    def api_version(self) -> str:
        """``group/version``, or just ``version`` for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        """The REST path of the collection or of one object."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        return f"{base}/{name}" if name else base


_REGISTRY: dict[str, ResourceInfo] = {}
_BY_GVK: dict[tuple[str, str], ResourceInfo] = {}


def register_resource(info: ResourceInfo, *, default: bool = True) -> ResourceInfo:
    """Make a kind known (e.g. a custom operator's CRD). ``default`` makes it the one that
    :func:`resource_info` returns for the bare kind name."""
    _BY_GVK[(info.api_version, info.kind)] = info
    if default or info.kind not in _REGISTRY:
        _REGISTRY[info.kind] = info
    return info


for _info in (
    ResourceInfo(group="", version="v1", kind="Pod", plural="pods"),
    ResourceInfo(group="", version="v1", kind="Node", plural="nodes", namespaced=False),
    ResourceInfo(group="", version="v1", kind="Namespace", plural="namespaces", namespaced=False),
    ResourceInfo(group="", version="v1", kind="Event", plural="events", has_status=False),
    ResourceInfo(group="", version="v1", kind="ConfigMap", plural="configmaps", has_status=False),
    # the controllers PodTopologySpread's default constraints select pods by
    ResourceInfo(group="", version="v1", kind="Service", plural="services"),
    ResourceInfo(
        group="", version="v1", kind="ReplicationController", plural="replicationcontrollers"
    ),
    ResourceInfo(group="apps", version="v1", kind="ReplicaSet", plural="replicasets"),
    ResourceInfo(group="apps", version="v1", kind="StatefulSet", plural="statefulsets"),
    ResourceInfo(
        group="scheduling.k8s.io",
        version="v1",
        kind="PriorityClass",
        plural="priorityclasses",
        namespaced=False,
        has_status=False,
    ),
    ResourceInfo(
        group="scheduling.k8s.io",
        version="v1beta1",
        kind="Workload",
        plural="workloads",
        has_status=False,
    ),
    ResourceInfo(group="scheduling.k8s.io", version="v1beta1", kind="PodGroup", plural="podgroups"),
    ResourceInfo(
        group="scheduling.k8s.io",
        version="v1alpha3",
        kind="CompositePodGroup",
        plural="compositepodgroups",
    ),
    ResourceInfo(group="batch", version="v1", kind="Job", plural="jobs"),
    ResourceInfo(group="jobset.x-k8s.io", version="v1alpha2", kind="JobSet", plural="jobsets"),
    ResourceInfo(
        group="leaderworkerset.x-k8s.io",
        version="v1",
        kind="LeaderWorkerSet",
        plural="leaderworkersets",
    ),
    ResourceInfo(
        group="coordination.k8s.io", version="v1", kind="Lease", plural="leases", has_status=False
    ),
    ResourceInfo(
        group="resource.k8s.io", version="v1", kind="ResourceClaim", plural="resourceclaims"
    ),
    ResourceInfo(
        group="resource.k8s.io",
        version="v1",
        kind="ResourceClaimTemplate",
        plural="resourceclaimtemplates",
        has_status=False,
    ),
    ResourceInfo(
        group="resource.k8s.io",
        version="v1",
        kind="ResourceSlice",
        plural="resourceslices",
        namespaced=False,
        has_status=False,
    ),
    ResourceInfo(
        group="resource.k8s.io",
        version="v1",
        kind="DeviceClass",
        plural="deviceclasses",
        namespaced=False,
        has_status=False,
    ),
    ResourceInfo(
        group="resource.k8s.io",
        version="v1",
        kind="DeviceTaintRule",
        plural="devicetaintrules",
        namespaced=False,
    ),
    ResourceInfo(
        group="policy", version="v1", kind="PodDisruptionBudget", plural="poddisruptionbudgets"
    ),
    # storage: what the volume scheduling plugins read (and the PV binding writes)
    ResourceInfo(
        group="",
        version="v1",
        kind="PersistentVolume",
        plural="persistentvolumes",
        namespaced=False,
    ),
    ResourceInfo(
        group="", version="v1", kind="PersistentVolumeClaim", plural="persistentvolumeclaims"
    ),
    ResourceInfo(
        group="storage.k8s.io",
        version="v1",
        kind="StorageClass",
        plural="storageclasses",
        namespaced=False,
        has_status=False,
    ),
    ResourceInfo(
        group="storage.k8s.io",
        version="v1",
        kind="CSINode",
        plural="csinodes",
        namespaced=False,
        has_status=False,
    ),
    ResourceInfo(
        group="storage.k8s.io",
        version="v1",
        kind="CSIDriver",
        plural="csidrivers",
        namespaced=False,
        has_status=False,
    ),
    ResourceInfo(
        group="storage.k8s.io",
        version="v1",
        kind="VolumeAttachment",
        plural="volumeattachments",
        namespaced=False,
    ),
):
    register_resource(_info)
# Workload and PodGroup are also served as v1alpha3.
register_resource(
    ResourceInfo(
        group="scheduling.k8s.io",
        version="v1alpha3",
        kind="Workload",
        plural="workloads",
        has_status=False,
    ),
    default=False,
)
register_resource(
    ResourceInfo(
        group="scheduling.k8s.io", version="v1alpha3", kind="PodGroup", plural="podgroups"
    ),
    default=False,
)
# events.k8s.io/v1 Events (the newer shape of Events; ``resource_info("Event")`` stays core/v1).
register_resource(
    ResourceInfo(
        group="events.k8s.io", version="v1", kind="Event", plural="events", has_status=False
    ),
    default=False,
)


def resource_info(kind: str | ResourceInfo, api_version: str | None = None) -> ResourceInfo:
    """Look up a registered kind (optionally at a given apiVersion)."""
    if isinstance(kind, ResourceInfo):
        return kind
    if api_version is not None:
        try:
            return _BY_GVK[(api_version, kind)]
        except KeyError:
            raise KeyError(f"unknown resource {api_version} {kind}; register it first") from None
    try:
        return _REGISTRY[kind]
    except KeyError:
        raise KeyError(f"unknown kind {kind!r}; register it with register_resource()") from None


def resource_of(obj: KubeObject) -> ResourceInfo:
    """The ResourceInfo of an object, from its ``apiVersion``/``kind``."""
    if isinstance(obj, dict):
        return resource_info(str(obj.get("kind")), obj.get("apiVersion"))
    return resource_info(obj.kind, obj.api_version)


@attrs.frozen(kw_only=True)
class ObjectList:
    """One page of a list: the items, the list's resourceVersion and the continue token."""

    items: tuple[KubeObject, ...]
    resource_version: str
    continue_token: str | None = None


@attrs.frozen(kw_only=True)
class WatchEvent:
    """One watch event. ``BOOKMARK`` events carry only ``metadata.resourceVersion``."""

    type: WatchEventType
    object: KubeObject


@attrs.frozen(kw_only=True)
class Preconditions:
    """Delete preconditions: the object must still have this uid / resourceVersion."""

    uid: str | None = None
    resource_version: str | None = None


@runtime_checkable
class Cluster(Protocol):
    """Async access to cluster state. Errors are :mod:`workloadbuilder.errors` ``ApiError``\\ s
    (``NotFound``, ``Conflict``, ``AlreadyExists``, ``Invalid``, ``Forbidden``, ``Gone``...)."""

    async def get(
        self, kind: str | ResourceInfo, name: str, namespace: str | None = None
    ) -> KubeObject:
        """Read one object."""
        ...

    async def list(
        self,
        kind: str | ResourceInfo,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> ObjectList:
        """List objects (all namespaces when ``namespace`` is None), one page at a time when
        ``limit`` is given."""
        ...

    def watch(
        self,
        kind: str | ResourceInfo,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        allow_bookmarks: bool = True,
        timeout_seconds: float | None = None,
    ) -> AsyncIterator[WatchEvent]:
        """Stream changes after ``resource_version``. Raises ``Gone`` when it is too old.
        Ends after ``timeout_seconds`` (server-side) or when the connection ends."""
        ...

    async def create(
        self,
        obj: KubeObject,
        namespace: str | None = None,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
    ) -> KubeObject:
        """Create an object; returns what the server stored (defaults applied)."""
        ...

    async def update(
        self, obj: KubeObject, *, dry_run: bool = False, field_manager: str | None = None
    ) -> KubeObject:
        """Replace an object (optimistic concurrency on ``metadata.resourceVersion``)."""
        ...

    async def update_status(
        self, obj: KubeObject, *, field_manager: str | None = None
    ) -> KubeObject:
        """Replace the status subresource."""
        ...

    async def patch(
        self,
        kind: str | ResourceInfo,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        namespace: str | None = None,
        *,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool = False,
        dry_run: bool = False,
    ) -> KubeObject:
        """Patch an object or its ``status``: JSON merge, JSON patch, strategic merge, or
        server-side apply (``field_manager`` required, ``force`` takes over conflicts)."""
        ...

    async def delete(
        self,
        kind: str | ResourceInfo,
        name: str,
        namespace: str | None = None,
        *,
        propagation_policy: PropagationPolicy | None = None,
        preconditions: Preconditions | None = None,
        grace_period_seconds: int | None = None,
    ) -> None:
        """Delete an object (finalizers hold it with a ``deletionTimestamp``)."""
        ...

    async def bind(
        self, namespace: str, pod_name: str, node_name: str, *, pod_uid: str | None = None
    ) -> None:
        """``pods/binding``: set ``spec.nodeName``. ``Conflict`` when already bound."""
        ...

    async def evict(
        self, namespace: str, pod_name: str, *, grace_period_seconds: int | None = None
    ) -> None:
        """``policy/v1`` Eviction of a pod (honours PodDisruptionBudgets on a real server)."""
        ...

    async def create_event(
        self,
        *,
        namespace: str,
        involved_object: Mapping[str, Any],
        reason: str,
        message: str,
        type: Literal["Normal", "Warning"] = "Normal",
        reporting_component: str = "workloadbuilder",
    ) -> None:
        """Record a core/v1 Event about ``involved_object`` (apiVersion/kind/name/uid)."""
        ...

    async def close(self) -> None:
        """Release connections and stop background work."""
        ...
