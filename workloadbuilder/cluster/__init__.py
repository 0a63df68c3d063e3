"""One async seam to cluster state: the :class:`Cluster` protocol and its implementations."""

from workloadbuilder.cluster._informer import (
    EventHandler,
    IndexFunc,
    Informer,
    groups_by_workload,
    namespaced_key,
    object_key,
    pods_by_node,
    pods_by_pod_group,
)
from workloadbuilder.cluster._kube import KubeCluster, KubeConfigError
from workloadbuilder.cluster._memory import MemoryCluster
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
from workloadbuilder.cluster._proxy import ClusterProxy
from workloadbuilder.cluster._retry import RetryPolicy

__all__ = [
    "Cluster",
    "ClusterProxy",
    "EventHandler",
    "IndexFunc",
    "Informer",
    "KubeCluster",
    "KubeConfigError",
    "KubeObject",
    "MemoryCluster",
    "ObjectList",
    "PatchType",
    "Preconditions",
    "PropagationPolicy",
    "ResourceInfo",
    "RetryPolicy",
    "WatchEvent",
    "WatchEventType",
    "groups_by_workload",
    "namespaced_key",
    "object_key",
    "pods_by_node",
    "pods_by_pod_group",
    "register_resource",
    "resource_info",
    "resource_of",
]
