"""The gang invariant, observed from outside: a pod watch counts bound pods per PodGroup."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from workloadbuilder.api import PodGroup
from workloadbuilder.cluster import Cluster


class GangWatch:
    """Watches pods (and reads PodGroups) in one namespace."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.node_of: dict[str, str | None] = {}
        self.group_of: dict[str, str] = {}
        self.violations: list[str] = []
        self._max = 0
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        lst = await self.cluster.list("Pod", self.namespace)
        for p in lst.items:
            assert isinstance(p, dict)
            self._apply("ADDED", p)
        self._task = asyncio.create_task(self._run(lst.resource_version))

    async def _run(self, rv: str) -> None:
        async for ev in self.cluster.watch("Pod", self.namespace, resource_version=rv):
            if ev.type in ("ADDED", "MODIFIED", "DELETED"):
                assert isinstance(ev.object, dict)
                self._apply(ev.type, ev.object)

    def _apply(self, etype: str, pod: dict[str, Any]) -> None:
        name = str(pod["metadata"]["name"])
        if etype == "DELETED":
            self.node_of.pop(name, None)
            return
        self.node_of[name] = (pod.get("spec") or {}).get("nodeName")
        group = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
        if group:
            self.group_of[name] = str(group)

    def bound_per_group(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for name, node in self.node_of.items():
            g = self.group_of.get(name)
            if g is not None:
                out.setdefault(g, 0)
                if node:
                    out[g] += 1
        return out

    async def settle(self, _hint: int = 0, timeout: float = 20.0) -> None:
        """Wait until the watch has caught up with a fresh list."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            items = (await self.cluster.list("Pod", self.namespace)).items
            want = {str(p["metadata"]["name"]): p["spec"].get("nodeName") for p in items}  # type: ignore[index]
            if want == self.node_of:
                break
            if loop.time() > deadline:
                raise AssertionError("pod watch did not catch up")
            await asyncio.sleep(0.02)
        groups = {}
        for pg in (await self.cluster.list("PodGroup", self.namespace)).items:
            assert isinstance(pg, PodGroup)
            gang = pg.spec.scheduling_policy.gang
            if gang is not None:
                groups[pg.metadata.name] = gang.min_count
        self._min = groups

    def check(self) -> None:
        for g, bound in self.bound_per_group().items():
            m = self._min.get(g)
            if m is None:
                continue
            self._max = max(self._max, bound)
            if 0 < bound < m:
                self.violations.append(f"{g}: {bound} of minCount {m} bound")
        assert not self.violations, self.violations

    def max_bound_seen(self) -> int:
        return self._max

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
