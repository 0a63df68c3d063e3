"""The world every parity test builds: two control planes, one with the upstream
kube-scheduler v1.37.2 (pods with ``schedulerName: default-scheduler``), one where our
``scheduler.Scheduler`` runs in process over ``KubeCluster`` (pods with our scheduler name),
so the two schedulers never share Nodes; a :class:`ParitySide` per scheduler (its plane's
cluster, a fresh namespace, the cluster-scoped objects it made, deleted afterwards); and the
scenario run on both sides at once (:func:`both`).

Used by ``test_scheduler_parity.py`` and ``test_dra_parity.py``; each adds the builders and
observations of its own scenarios in a subclass of :class:`ParitySide`. Import it after the
test module has put the project root first on ``sys.path`` (see those modules).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any, TypeVar

from waits import priority_class_admitted

from workloadbuilder.api import PodGroup
from workloadbuilder.cluster import KubeCluster
from workloadbuilder.errors import NotFound
from workloadbuilder.scheduler import Scheduler, SchedulerConfig
from workloadbuilder.testing import ControlPlane
from workloadbuilder.testing.builders import make_node, make_priority_class

__all__ = ["UPSTREAM", "ParitySide", "both", "parity_plane", "parity_sides", "until"]

#: The upstream kube-scheduler's name (its default profile).
UPSTREAM = "default-scheduler"

_T = TypeVar("_T")
_S = TypeVar("_S", bound="ParitySide")


async def until(
    probe: Callable[[], Awaitable[_T | None]],
    what: str,
    *,
    timeout: float,
    interval: float,
) -> _T:
    """Poll ``probe`` every ``interval`` seconds until it returns something truthy (a
    deadline, no fixed sleeps); AssertionError naming ``what`` after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await probe()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(interval)


@contextlib.contextmanager
def parity_plane(
    control_plane: ControlPlane,
    *,
    upstream: bool,
    controller_manager: bool = False,
    controllers: Sequence[str] | None = None,
) -> Iterator[ControlPlane]:
    """A private plane from the session plane's binaries: with the upstream kube-scheduler
    (``upstream``) or without one (ours runs in process); with kube-controller-manager when
    ``controller_manager`` (its default controllers, or ``controllers``)."""
    kw: dict[str, Any] = {}
    if controllers is not None:
        kw["controllers"] = tuple(controllers)
    with ControlPlane(
        bin_dir=control_plane.bin_dir,
        with_scheduler=upstream,
        with_controller_manager=controller_manager,
        **kw,
    ) as plane:
        yield plane


class ParitySide:
    """One scheduler under test: its plane's cluster, a fresh namespace ``{prefix}-{name}-…``
    and the cluster-scoped objects it created (named ``{namespace}-{name}``)."""

    def __init__(self, name: str, plane: ControlPlane, scheduler_name: str, prefix: str) -> None:
        self.name = name
        self.scheduler_name = scheduler_name
        self.namespace = plane.create_namespace(f"{prefix}-{name}-")
        self.cluster = KubeCluster.from_kubeconfig(plane.kubeconfig)
        #: (kind, name) of the cluster-scoped objects made, deleted in reverse at the end
        self.created: list[tuple[str, str]] = []
        self.scheduler: Scheduler | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def nodes(self) -> list[str]:
        """The Nodes this side created, in order."""
        return [name for kind, name in self.created if kind == "Node"]

    def full(self, name: str) -> str:
        """The name of this side's cluster-scoped object ``name``."""
        return f"{self.namespace}-{name}"

    def track(self, kind: str, name: str) -> None:
        """Delete the cluster-scoped ``kind`` ``name`` when the side closes."""
        self.created.append((kind, name))

    async def start_ours(self) -> None:
        """Run our scheduler in the background under this side's scheduler name, as
        ``workloadbuilder scheduler`` would (preemption on, as kube-scheduler's default)."""
        self.scheduler = Scheduler(
            self.cluster, SchedulerConfig(scheduler_name=self.scheduler_name, preemption=True)
        )
        await self.scheduler.start()
        self._task = asyncio.create_task(self.scheduler.run())

    async def close(self) -> None:
        """Stop our scheduler; delete the pods (grace 0) and the cluster-scoped objects."""
        if self.scheduler is not None:
            await self.scheduler.stop()
        if self._task is not None:
            await self._task
        for pod in (await self.cluster.list("Pod", self.namespace)).items:
            assert isinstance(pod, dict)
            with contextlib.suppress(NotFound):
                await self.cluster.delete(
                    "Pod", pod["metadata"]["name"], self.namespace, grace_period_seconds=0
                )
        for kind, name in reversed(self.created):
            with contextlib.suppress(NotFound):
                await self.cluster.delete(kind, name)
        await self.cluster.close()

    # ---- builders and reading shared by every parity file ------------------------------

    async def node(
        self,
        name: str,
        *,
        cpu: str = "4",
        memory: str = "16Gi",
        labels: dict[str, str] | None = None,
    ) -> str:
        """A fake Node like scheduler_perf's: allocatable cpu/memory/pods, Ready."""
        full = self.full(name)
        node = make_node(full).label("kubernetes.io/hostname", full).labels(labels or {})
        obj = node.resources({"cpu": cpu, "memory": memory, "pods": "110"}).ready().obj()
        status = obj.pop("status")
        await self.cluster.create(obj)
        self.track("Node", full)
        await self.cluster.patch("Node", full, {"status": status}, subresource="status")
        return full

    async def priority_class(self, name: str, value: int) -> str:
        """A PriorityClass, once the Priority admission plugin knows it."""
        full = self.full(name)
        await self.cluster.create(make_priority_class(full, value).obj())
        self.track("PriorityClass", full)
        await priority_class_admitted(self.cluster, self.namespace, full)
        return full

    async def pods(self) -> dict[str, dict[str, Any]]:
        """This side's pods by name."""
        items = (await self.cluster.list("Pod", self.namespace)).items
        return {str(p["metadata"]["name"]): p for p in items if isinstance(p, dict)}

    async def placement(self) -> dict[str, str]:
        """``{pod: node}`` of the bound pods (node names without this side's prefix)."""
        cut = len(self.namespace) + 1
        return {
            n: str(p["spec"]["nodeName"])[cut:]
            for n, p in (await self.pods()).items()
            if p["spec"].get("nodeName")
        }

    async def scheduled(self, pod: str) -> tuple[str, str, str] | None:
        """``(status, reason, message)`` of the pod's PodScheduled condition."""
        obj = (await self.pods())[pod]
        for c in (obj.get("status") or {}).get("conditions") or ():
            if c.get("type") == "PodScheduled":
                return str(c["status"]), str(c.get("reason", "")), str(c.get("message", ""))
        return None

    async def group_condition(self, group: str) -> tuple[str, str] | None:
        """``(status, reason)`` of the PodGroup's PodGroupInitiallyScheduled condition."""
        pg = await self.cluster.get("PodGroup", group, self.namespace)
        assert isinstance(pg, PodGroup)
        conds = pg.status.conditions if pg.status else ()
        c = next((c for c in conds if c.type == "PodGroupInitiallyScheduled"), None)
        return (c.status, c.reason or "") if c else None


@contextlib.asynccontextmanager
async def parity_sides(upstream: _S, ours: _S) -> AsyncIterator[tuple[_S, _S]]:
    """(upstream, ours) for one scenario: our scheduler started on ``ours``, both sides
    cleaned up afterwards."""
    try:
        await ours.start_ours()
        yield upstream, ours
    finally:
        await asyncio.gather(upstream.close(), ours.close())


async def both(sides: tuple[_S, _S], scenario: Callable[[_S], Awaitable[_T]]) -> list[_T]:
    """Run ``scenario`` on both sides at once; returns [upstream's result, ours]."""
    return list(await asyncio.gather(*(scenario(s) for s in sides)))
