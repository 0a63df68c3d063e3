"""Cluster wrappers: one tells the simulator about the scheduler's bindings and deletions
as they happen, so the simulator never has to list every pod to find them; the other tells
it about the scheduling objects the integrations' Reconcilers write."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

from workloadbuilder.cluster import (
    Cluster,
    ClusterProxy,
    KubeObject,
    PatchType,
    Preconditions,
    PropagationPolicy,
    ResourceInfo,
    resource_info,
)
from workloadbuilder.simulator._preemption import Preemptor, disruption_preemptor

__all__ = ["ControllerWrites", "RecordingCluster"]

T = TypeVar("T")


class RecordingCluster(ClusterProxy):
    """Forwards every call to ``inner``; after a successful ``bind`` (or an update/patch that
    leaves a pod with ``spec.nodeName``) calls ``on_bind(namespace, pod, node)``, after a Pod
    ``delete`` or ``evict`` calls ``on_delete(namespace, pod)``, after a pod status patch
    that sets ``DisruptionTarget`` (preemption) calls ``on_disruption(namespace, pod,
    preemptor)``. The simulator ignores reports about pods that are already bound."""

    def __init__(
        self,
        inner: Cluster,
        *,
        on_bind: Callable[[str, str, str], None],
        on_delete: Callable[[str, str], None],
        on_disruption: Callable[[str, str, Preemptor], None] | None = None,
    ) -> None:
        super().__init__(inner)
        self._on_bind = on_bind
        self._on_delete = on_delete
        self._on_disruption = on_disruption

    def _check_node_name(self, stored: KubeObject) -> None:
        if isinstance(stored, dict) and stored.get("kind") == "Pod":
            node = (stored.get("spec") or {}).get("nodeName")
            meta = stored.get("metadata") or {}
            if node:
                self._on_bind(str(meta.get("namespace")), str(meta.get("name")), str(node))

    async def update(
        self, obj: KubeObject, *, dry_run: bool = False, field_manager: str | None = None
    ) -> KubeObject:
        """Forwarded; reports a pod whose ``spec.nodeName`` an update sets."""
        stored = await super().update(obj, dry_run=dry_run, field_manager=field_manager)
        if not dry_run:
            self._check_node_name(stored)
        return stored

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
        """Forwarded; reports a pod whose ``spec.nodeName`` a patch sets."""
        stored = await super().patch(
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
        elif (
            subresource == "status"
            and not dry_run
            and self._on_disruption is not None
            and namespace
            and resource_info(kind).kind == "Pod"
        ):
            preemptor = disruption_preemptor(patch, namespace)
            if preemptor is not None:
                self._on_disruption(namespace, name, preemptor)
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
        """Forwarded; reports deleted pods."""
        await super().delete(
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
        """Forwarded; reports the binding once it succeeded."""
        await super().bind(namespace, pod_name, node_name, pod_uid=pod_uid)
        self._on_bind(namespace, pod_name, node_name)

    async def evict(
        self, namespace: str, pod_name: str, *, grace_period_seconds: int | None = None
    ) -> None:
        """Forwarded; reports the evicted pod."""
        await super().evict(namespace, pod_name, grace_period_seconds=grace_period_seconds)
        self._on_delete(namespace, pod_name)


_SCHEDULING_KINDS = frozenset({"Workload", "CompositePodGroup", "PodGroup"})


class ControllerWrites(ClusterProxy):
    """Forwards every call to ``inner`` (the cluster the integrations' Reconcilers use);
    reports every Workload, CompositePodGroup and PodGroup they create or change
    (``on_write(stored)``) and delete (``on_delete(kind, namespace, name)``), so the simulator
    records the scheduling objects the integrations made without listing them."""

    def __init__(
        self,
        inner: Cluster,
        *,
        on_write: Callable[[KubeObject], None],
        on_delete: Callable[[str, str, str], None],
    ) -> None:
        super().__init__(inner)
        self._on_write = on_write
        self._on_delete_object = on_delete

    async def around(
        self, verb: str, info: ResourceInfo, subresource: str | None, call: Awaitable[T]
    ) -> T:
        """Awaits ``call``; reports created, updated and patched scheduling objects."""
        out = await call
        if (
            verb in ("create", "update", "patch")
            and subresource is None
            and info.kind in _SCHEDULING_KINDS
        ):
            self._on_write(cast(KubeObject, out))
        return out

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
        """Forwarded; reports deleted scheduling objects."""
        await super().delete(
            kind,
            name,
            namespace,
            propagation_policy=propagation_policy,
            preconditions=preconditions,
            grace_period_seconds=grace_period_seconds,
        )
        info = resource_info(kind)
        if info.kind in _SCHEDULING_KINDS:
            self._on_delete_object(info.kind, namespace or "", name)
