"""Regressions found by comparing with the upstream kube-scheduler
(``tests/controlplane/test_scheduler_parity.py``), reproduced deterministically in process."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from sched_helpers import Env

from workloadbuilder.cluster import KubeObject, MemoryCluster, PatchType, ResourceInfo
from workloadbuilder.runtime import ManualClock
from workloadbuilder.scheduler._queue import EntityKey


class _HeldBindings(MemoryCluster):
    """MemoryCluster whose ``pods/binding`` calls wait for ``release``, recording every
    PodGroup status patch."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock=clock.now)
        self.release = asyncio.Event()
        self.group_statuses: list[str] = []

    async def bind(
        self, namespace: str, pod_name: str, node_name: str, *, pod_uid: str | None = None
    ) -> None:
        await self.release.wait()
        await super().bind(namespace, pod_name, node_name, pod_uid=pod_uid)

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
        if kind == "PodGroup" and subresource == "status" and isinstance(patch, Mapping):
            for c in patch["status"]["conditions"]:
                if c["type"] == "PodGroupInitiallyScheduled":
                    self.group_statuses.append(f"{c['status']}/{c['reason']}")
        return await super().patch(
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


async def test_leftover_pods_do_not_flip_a_scheduled_group_to_false() -> None:
    """A basic group of 3 with room for 2: the two are placed and their bindings are in flight
    when the group is retried for the third (upstream retries on its own pods' binding too).
    That retry fails, but the group was initially scheduled: it must never be written
    ``False/Unschedulable`` (seen as the final state against the real API server)."""
    clock = ManualClock()
    cluster = _HeldBindings(clock)
    env = Env(cluster, "default", "memory")
    try:
        for n in ("a", "b"):
            await env.node(n, cpu="4")
        await env.pod_group("basic")
        for i in range(3):
            await env.pod(f"basic-{i}", "basic", cpu="3")
        s = env.scheduler(clock=clock)
        await s.start()
        await s.sync()
        key: EntityKey = ("PodGroup", env.namespace, "basic")

        await s._round(wait=False)  # the first cycle: two placed, bindings held
        assert sum(1 for p in s.cache.pods.values() if p.assumed_node) == 2
        assert s.queue.move(key)  # a relevant event while the bindings are in flight
        clock.advance(60)
        await s._round(wait=False)  # the retry: nothing more fits
        assert s.queue.entities[key].attempts >= 1

        cluster.release.set()
        await s.until_idle()
        assert len(await env.bound("basic-")) == 2
        cond = await env.group_condition("basic")
        assert (cond.status, cond.reason) == ("True", "Scheduled")
        assert cluster.group_statuses == ["True/Scheduled"]
    finally:
        await env.cleanup()
        await cluster.close()
