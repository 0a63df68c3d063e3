"""One async seam to cluster state: the :class:`Cluster` protocol and its implementations."""

from workloadbuilder.cluster._kube import KubeCluster, KubeConfigError
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
from workloadbuilder.cluster._retry import RetryPolicy

__all__ = [
    "Cluster",
    "KubeCluster",
    "KubeConfigError",
    "KubeObject",
    "ObjectList",
    "PatchType",
    "Preconditions",
    "PropagationPolicy",
    "ResourceInfo",
    "RetryPolicy",
    "WatchEvent",
    "WatchEventType",
    "register_resource",
    "resource_info",
    "resource_of",
]
