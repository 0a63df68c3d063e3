"""Builders and helpers for the scheduler behaviour tests."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from waits import priority_class_admitted

from workloadbuilder.api import PodGroup, from_dict
from workloadbuilder.cluster import Cluster
from workloadbuilder.errors import NotFound
from workloadbuilder.scheduler import Scheduler, SchedulerConfig
from workloadbuilder.testing.builders import (
    make_node,
    make_pod,
    make_pod_group,
    make_priority_class,
)

GPU = "nvidia.com/gpu"


class Env:
    """A cluster, a namespace, and helpers that create objects on it (built with
    :mod:`workloadbuilder.testing.builders`). Node names are unique per test."""

    def __init__(self, cluster: Cluster, namespace: str, backend: str) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.backend = backend
        self.scheduler_name = (
            "workloadbuilder-scheduler" if backend == "memory" else f"wb-{namespace}"
        )
        self.prefix = "" if backend == "memory" else f"{namespace}-"
        self.nodes: list[str] = []
        self.priority_classes: list[str] = []
        self.schedulers: list[Scheduler] = []

    # ---- builders --------------------------------------------------------------------

    def node_name(self, name: str) -> str:
        return f"{self.prefix}{name}"

    async def node(
        self,
        name: str,
        *,
        cpu: str = "8",
        memory: str = "32Gi",
        pods: int = 110,
        gpu: int = 0,
        labels: dict[str, str] | None = None,
        taints: list[dict[str, str]] | None = None,
        unschedulable: bool = False,
    ) -> str:
        full = self.node_name(name)
        node = make_node(full).label("test-env", self.namespace).labels(labels or {})
        node.resources({"cpu": cpu, "memory": memory, "pods": pods})
        if gpu:
            node.resource(GPU, gpu)
        node.taints(*(taints or ()))
        if unschedulable:
            node.unschedulable()
        obj = node.obj()
        status = obj.pop("status")
        await self.cluster.create(obj)
        self.nodes.append(full)
        await self.cluster.patch("Node", full, {"status": status}, subresource="status")
        return full

    async def priority_class(self, name: str, value: int) -> str:
        full = f"{self.prefix}{name}"
        await self.cluster.create(make_priority_class(full, value).obj())
        self.priority_classes.append(full)
        await priority_class_admitted(self.cluster, self.namespace, full)
        return full

    async def pod_group(
        self,
        name: str,
        min_count: int | None = None,
        *,
        priority_class: str | None = None,
        topology: str | None = None,
        parent: str | None = None,
    ) -> PodGroup:
        pg = make_pod_group(name, self.namespace)
        if min_count is not None:
            pg.gang(min_count)
        if priority_class:
            pg.priority_class(priority_class)
        if topology:
            pg.topology(topology)
        if parent:  # a child of a CompositePodGroup comes from a Workload's template tree
            pg.parent(parent).workload_ref(parent, name)
        out = await self.cluster.create(from_dict(pg.obj(), PodGroup))
        assert isinstance(out, PodGroup)
        return out

    async def pod(
        self,
        name: str,
        group: str | None = None,
        *,
        cpu: str = "1",
        memory: str = "1Gi",
        gpu: int = 0,
        priority_class: str | None = None,
        scheduler_name: str | None = None,
        node_selector: dict[str, str] | None = None,
        tolerations: list[dict[str, str]] | None = None,
        node_name: str | None = None,
        labels: dict[str, str] | None = None,
        ports: list[dict[str, Any]] | None = None,
        spec: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        pod = make_pod(name, self.namespace).scheduler_name(scheduler_name or self.scheduler_name)
        pod.request("cpu", cpu).request("memory", memory)
        if gpu:
            pod.request(GPU, gpu).limit(GPU, gpu)
        if group:
            pod.pod_group(group)
        if priority_class:
            pod.priority_class(priority_class)
        if node_selector:
            pod.node_selectors(node_selector)
        pod.tolerations(*(tolerations or ()))
        if node_name:
            pod.node_name(node_name)  # created bound (by "another scheduler")
        obj = pod.obj()
        if labels:
            obj["metadata"].setdefault("labels", {}).update(labels)
        if ports:
            obj["spec"]["containers"][0]["ports"] = ports
        obj["spec"].update(spec or {})
        out = await self.cluster.create(obj)
        assert isinstance(out, dict)
        return out

    async def gang(self, name: str, size: int, min_count: int | None = None, **pod: Any) -> None:
        await self.pod_group(name, min_count if min_count is not None else size)
        for i in range(size):
            await self.pod(f"{name}-{i}", name, **pod)

    # ---- reading ---------------------------------------------------------------------

    def scheduler(self, clock: Any = None, **config: Any) -> Scheduler:
        cfg = SchedulerConfig(scheduler_name=self.scheduler_name, **config)
        s = Scheduler(self.cluster, cfg, clock=clock)
        self.schedulers.append(s)
        return s

    async def pods(self) -> dict[str, dict[str, Any]]:
        items = (await self.cluster.list("Pod", self.namespace)).items
        return {str(p["metadata"]["name"]): p for p in items if isinstance(p, dict)}

    async def bound(self, prefix: str = "") -> dict[str, str]:
        """``{pod name: node}`` of bound pods whose name starts with ``prefix``."""
        return {
            n: str(p["spec"]["nodeName"])
            for n, p in (await self.pods()).items()
            if n.startswith(prefix) and p["spec"].get("nodeName")
        }

    async def group_condition(self, name: str) -> Any:
        pg = await self.cluster.get("PodGroup", name, self.namespace)
        assert isinstance(pg, PodGroup)
        conds = pg.status.conditions if pg.status else ()
        return next((c for c in conds if c.type == "PodGroupInitiallyScheduled"), None)

    async def pod_condition(self, name: str) -> dict[str, Any] | None:
        pod = await self.cluster.get("Pod", name, self.namespace)
        assert isinstance(pod, dict)
        for c in (pod.get("status") or {}).get("conditions") or ():
            if c.get("type") == "PodScheduled":
                return dict(c)
        return None

    async def until(self, s: Scheduler, check: Callable[[], Any], *, timeout: float = 20.0) -> None:
        """Schedule until ``await check()`` is truthy (poll with a deadline; on MemoryCluster
        the first round already decides)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            await s.until_idle()
            if await check():
                return
            if loop.time() > deadline:
                raise AssertionError("condition not reached before the deadline")
            await asyncio.sleep(0.05)

    def cached_pods(self, s: Scheduler) -> int:
        """How many of this test's pods (its namespace) the scheduler's cache holds."""
        return sum(1 for ns, _ in s.cache.pods if ns == self.namespace)

    async def seen(self, s: Scheduler, check: Callable[[], bool], *, timeout: float = 20.0) -> None:
        """Wait until the scheduler's cache satisfies ``check`` (the watch delivered)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            await s.sync()
            if check():
                return
            if loop.time() > deadline:
                raise AssertionError("the scheduler did not see the change before the deadline")
            await asyncio.sleep(0.02)

    async def cleanup(self) -> None:
        for s in self.schedulers:
            await s.stop()
        if self.backend == "memory":
            return
        for name in list((await self.pods()).keys()):
            with contextlib.suppress(NotFound):
                await self.cluster.delete("Pod", name, self.namespace, grace_period_seconds=0)
        for n in self.nodes:
            with contextlib.suppress(NotFound):
                await self.cluster.delete("Node", n)
        for pc in self.priority_classes:
            with contextlib.suppress(NotFound):
                await self.cluster.delete("PriorityClass", pc)
