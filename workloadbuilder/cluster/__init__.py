"""One async seam to cluster state: the :class:`Cluster` protocol and its implementations.

:class:`MemoryCluster` is the embedded, in-process cluster. It, :class:`KubeCluster` (a real
API server, configured by :class:`ClientSettings`) and :class:`KubeConfigError` are imported
on first access, so programs that only use one of them never load the other's modules.
:class:`HttpTransport` is the lean keep-alive HTTP/1.1 client that carries ``KubeCluster``'s
requests and watches, proxies included (benchmarks use it for their plain clients too);
aiohttp is imported only for ``transport="aiohttp"``, kubernetes-asyncio only for the
credentials that need it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from workloadbuilder._lazy import lazy_names
from workloadbuilder.cluster._backoff import Backoff
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

if TYPE_CHECKING:
    from workloadbuilder.cluster._kube import ClientSettings, KubeCluster, KubeConfigError
    from workloadbuilder.cluster._memory import MemoryCluster
    from workloadbuilder.cluster._transport import HttpTransport, TransportError

__all__ = [
    "Backoff",
    "ClientSettings",
    "Cluster",
    "ClusterProxy",
    "EventHandler",
    "HttpTransport",
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
    "TransportError",
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

#: public names resolved on first access (module that defines them)
_LAZY = {
    "MemoryCluster": "workloadbuilder.cluster._memory",
    "ClientSettings": "workloadbuilder.cluster._kube",
    "KubeCluster": "workloadbuilder.cluster._kube",
    "KubeConfigError": "workloadbuilder.cluster._kube",
    "HttpTransport": "workloadbuilder.cluster._transport",
    "TransportError": "workloadbuilder.cluster._transport",
}


__getattr__, __dir__ = lazy_names(globals(), _LAZY)
