"""``ClusterProxy``: a Cluster that forwards every call to another one.

Subclass it to observe or alter what a component asks of the API without re-declaring the
whole protocol: override :meth:`ClusterProxy.around` (every request) and
:meth:`ClusterProxy.around_watch` (every watch stream), or override single methods and call
``super()``. The simulator uses it to learn about bindings as they happen; tests use it to
record which RBAC rules a component needs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from typing import Any, Literal, TypeVar

from workloadbuilder.cluster._protocol import (
    Cluster,
    KubeObject,
    ObjectList,
    PatchType,
    Preconditions,
    PropagationPolicy,
    ResourceInfo,
    WatchEvent,
    resource_info,
    resource_of,
)

__all__ = ["ClusterProxy"]

T = TypeVar("T")


class ClusterProxy:
    """Forwards every :class:`Cluster` call to ``inner``."""

    def __init__(self, inner: Cluster) -> None:
        self.inner = inner

    async def around(
        self, verb: str, info: ResourceInfo, subresource: str | None, call: Awaitable[T]
    ) -> T:
        """Every request passes through here: ``verb`` is the RBAC verb (``get``, ``list``,
        ``create``, ``update``, ``patch``, ``delete``), ``subresource`` e.g. ``status``,
        ``binding``, ``eviction``. The default just awaits ``call``."""
        return await call

    def around_watch(
        self, info: ResourceInfo, stream: AsyncIterator[WatchEvent]
    ) -> AsyncIterator[WatchEvent]:
        """Every watch stream passes through here. The default returns it unchanged."""
        return stream

    async def get(
        self, kind: str | ResourceInfo, name: str, namespace: str | None = None
    ) -> KubeObject:
        """Forwarded."""
        return await self.around(
            "get", resource_info(kind), None, self.inner.get(kind, name, namespace)
        )

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
        """Forwarded."""
        call = self.inner.list(
            kind,
            namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            limit=limit,
            continue_token=continue_token,
        )
        return await self.around("list", resource_info(kind), None, call)

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
        """Forwarded."""
        stream = self.inner.watch(
            kind,
            namespace,
            resource_version=resource_version,
            label_selector=label_selector,
            field_selector=field_selector,
            allow_bookmarks=allow_bookmarks,
            timeout_seconds=timeout_seconds,
        )
        return self.around_watch(resource_info(kind), stream)

    async def create(
        self,
        obj: KubeObject,
        namespace: str | None = None,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
    ) -> KubeObject:
        """Forwarded."""
        call = self.inner.create(obj, namespace, dry_run=dry_run, field_manager=field_manager)
        return await self.around("create", resource_of(obj), None, call)

    async def update(
        self, obj: KubeObject, *, dry_run: bool = False, field_manager: str | None = None
    ) -> KubeObject:
        """Forwarded."""
        call = self.inner.update(obj, dry_run=dry_run, field_manager=field_manager)
        return await self.around("update", resource_of(obj), None, call)

    async def update_status(
        self, obj: KubeObject, *, field_manager: str | None = None
    ) -> KubeObject:
        """Forwarded."""
        call = self.inner.update_status(obj, field_manager=field_manager)
        return await self.around("update", resource_of(obj), "status", call)

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
        """Forwarded."""
        call = self.inner.patch(
            kind,
            name,
            patch,
            namespace,
            patch_type=patch_type,
            subresource=subresource,
            field_manager=field_manager,
            force=force,
            dry_run=dry_run,
        )
        return await self.around("patch", resource_info(kind), subresource, call)

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
        """Forwarded."""
        call = self.inner.delete(
            kind,
            name,
            namespace,
            propagation_policy=propagation_policy,
            preconditions=preconditions,
            grace_period_seconds=grace_period_seconds,
        )
        await self.around("delete", resource_info(kind), None, call)

    async def bind(
        self, namespace: str, pod_name: str, node_name: str, *, pod_uid: str | None = None
    ) -> None:
        """Forwarded."""
        call = self.inner.bind(namespace, pod_name, node_name, pod_uid=pod_uid)
        await self.around("create", resource_info("Pod"), "binding", call)

    async def evict(
        self, namespace: str, pod_name: str, *, grace_period_seconds: int | None = None
    ) -> None:
        """Forwarded."""
        call = self.inner.evict(namespace, pod_name, grace_period_seconds=grace_period_seconds)
        await self.around("create", resource_info("Pod"), "eviction", call)

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
        """Forwarded."""
        call = self.inner.create_event(
            namespace=namespace,
            involved_object=involved_object,
            reason=reason,
            message=message,
            type=type,
            reporting_component=reporting_component,
        )
        await self.around("create", resource_info("Event", "v1"), None, call)

    async def close(self) -> None:
        """Closes ``inner``."""
        await self.inner.close()
