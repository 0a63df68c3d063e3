"""A Cluster wrapper that tells the simulator about the scheduler's bindings and deletions
as they happen, so the simulator never has to list every pod to find them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Literal

from workloadbuilder.cluster import (
    Cluster,
    KubeObject,
    ObjectList,
    PatchType,
    Preconditions,
    PropagationPolicy,
    ResourceInfo,
    WatchEvent,
    resource_info,
)

__all__ = ["RecordingCluster"]


class RecordingCluster:
    """Delegates every call to ``inner``; after a successful ``bind`` (or an update/patch that
    leaves a pod with ``spec.nodeName``) calls ``on_bind(namespace, pod, node)``, after a Pod
    ``delete`` or ``evict`` calls ``on_delete(namespace, pod)``. The simulator ignores reports
    about pods that are already bound."""

    def __init__(
        self,
        inner: Cluster,
        *,
        on_bind: Callable[[str, str, str], None],
        on_delete: Callable[[str, str], None],
    ) -> None:
        self.inner = inner
        self._on_bind = on_bind
        self._on_delete = on_delete

    async def get(
        self, kind: str | ResourceInfo, name: str, namespace: str | None = None
    ) -> KubeObject:
        """Delegated."""
        return await self.inner.get(kind, name, namespace)

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
        """Delegated."""
        return await self.inner.list(
            kind,
            namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            limit=limit,
            continue_token=continue_token,
        )

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
        """Delegated."""
        return self.inner.watch(
            kind,
            namespace,
            resource_version=resource_version,
            label_selector=label_selector,
            field_selector=field_selector,
            allow_bookmarks=allow_bookmarks,
            timeout_seconds=timeout_seconds,
        )

    async def create(
        self,
        obj: KubeObject,
        namespace: str | None = None,
        *,
        dry_run: bool = False,
        field_manager: str | None = None,
    ) -> KubeObject:
        """Delegated."""
        return await self.inner.create(obj, namespace, dry_run=dry_run, field_manager=field_manager)

    async def update(
        self, obj: KubeObject, *, dry_run: bool = False, field_manager: str | None = None
    ) -> KubeObject:
        """Delegated; reports a pod whose ``spec.nodeName`` an update sets."""
        stored = await self.inner.update(obj, dry_run=dry_run, field_manager=field_manager)
        if not dry_run:
            self._check_node_name(stored)
        return stored

    def _check_node_name(self, stored: KubeObject) -> None:
        if isinstance(stored, dict) and stored.get("kind") == "Pod":
            node = (stored.get("spec") or {}).get("nodeName")
            meta = stored.get("metadata") or {}
            if node:
                self._on_bind(str(meta.get("namespace")), str(meta.get("name")), str(node))

    async def update_status(
        self, obj: KubeObject, *, field_manager: str | None = None
    ) -> KubeObject:
        """Delegated."""
        return await self.inner.update_status(obj, field_manager=field_manager)

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
        """Delegated; reports a pod whose ``spec.nodeName`` a patch sets."""
        stored = await self.inner.patch(
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
        if subresource is None and not dry_run:
            self._check_node_name(stored)
        return stored

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
        """Delegated; reports deleted pods."""
        await self.inner.delete(
            kind,
            name,
            namespace,
            propagation_policy=propagation_policy,
            preconditions=preconditions,
            grace_period_seconds=grace_period_seconds,
        )
        if resource_info(kind).kind == "Pod" and namespace:
            self._on_delete(namespace, name)

    async def bind(
        self, namespace: str, pod_name: str, node_name: str, *, pod_uid: str | None = None
    ) -> None:
        """Delegated; reports the binding once it succeeded."""
        await self.inner.bind(namespace, pod_name, node_name, pod_uid=pod_uid)
        self._on_bind(namespace, pod_name, node_name)

    async def evict(
        self, namespace: str, pod_name: str, *, grace_period_seconds: int | None = None
    ) -> None:
        """Delegated; reports the evicted pod."""
        await self.inner.evict(namespace, pod_name, grace_period_seconds=grace_period_seconds)
        self._on_delete(namespace, pod_name)

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
        """Delegated."""
        await self.inner.create_event(
            namespace=namespace,
            involved_object=involved_object,
            reason=reason,
            message=message,
            type=type,
            reporting_component=reporting_component,
        )

    async def close(self) -> None:
        """Delegated."""
        await self.inner.close()
