"""One async seam to cluster state: the :class:`Cluster` protocol and its implementations."""

from workloadbuilder.cluster._protocol import (
    Cluster,
    KubeObject,
    ObjectList,
    PatchType,
    Preconditions,
    PropagationPolicy,
    ResourceInfo,
    WatchEvent,
    WatchEventType,
    register_resource,
    resource_info,
    resource_of,
)

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
