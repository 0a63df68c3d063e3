"""The scheduler: it owns the lifecycle and wires informers -> event handlers -> cache and
queue -> schedule-one -> binding and status. It implements the runtime's ``Component``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeGuard

from workloadbuilder.cluster import Cluster
from workloadbuilder.runtime import Clock, Feed, WallClock, gc_policy, probe_feeds, settle
from workloadbuilder.scheduler._binding import Binder
from workloadbuilder.scheduler._cache import Cache, GroupInfo, PodInfo
from workloadbuilder.scheduler._config import SchedulerConfig
from workloadbuilder.scheduler._dra import DRAManager
from workloadbuilder.scheduler._enqueue import Enqueuer
from workloadbuilder.scheduler._eventhandlers import EventHandlers, creation_order
from workloadbuilder.scheduler._framework import Framework
from workloadbuilder.scheduler._interface import ClusterEvent, QueueingHint
from workloadbuilder.scheduler._metrics import PENDING
from workloadbuilder.scheduler._plugins import default_framework
from workloadbuilder.scheduler._podconstraints import shared_namespaces
from workloadbuilder.scheduler._podtopologyspread import CONTROLLER_KINDS, PodTopologySpread
from workloadbuilder.scheduler._queue import SchedulingQueue
from workloadbuilder.scheduler._schedule_one import ScheduleOne
from workloadbuilder.scheduler._status import (
    CONDITION_INITIALLY_SCHEDULED,
    REASON_SCHEDULED,
    REASON_SCHEDULER_ERROR,
    REASON_UNSCHEDULABLE,
    StatusWriter,
)
from workloadbuilder.scheduler._tasks import Tasks
from workloadbuilder.scheduler._volumes import VOLUME_KINDS, VolumeState

if TYPE_CHECKING:
    from workloadbuilder.runtime import Component

#: seconds of scheduling cycles between two yields to the event loop in :meth:`Scheduler.run`
_YIELD_EVERY = 0.002

__all__ = [
    "CONDITION_INITIALLY_SCHEDULED",
    "REASON_SCHEDULED",
    "REASON_SCHEDULER_ERROR",
    "REASON_UNSCHEDULABLE",
    "Scheduler",
]


class Scheduler:
    """A workload-aware gang scheduler that talks to a cluster only through
    :class:`~workloadbuilder.cluster.Cluster`.

    Use :meth:`run` against a real cluster. The simulator (and tests) drive it step by step
    (the runtime's ``Component`` protocol): :meth:`sync` folds every change seen so far into
    the cache and queue, :meth:`until_idle` runs cycles until nothing can be scheduled now
    (and waits for the bindings), :meth:`next_wakeup` says when a backoff or the periodic
    flush is due.

    Profiles: ``framework`` serves ``config.scheduler_name``; ``frameworks`` (schedulerName
    -> framework, e.g. :attr:`LoadedConfig.frameworks
    <workloadbuilder.scheduler.LoadedConfig.frameworks>`) serves several names at once, as
    kube-scheduler serves the profiles of one configuration: one cache (no node is
    double-booked across profiles), one queue and one binder; each pod, PodGroup or
    CompositePodGroup tree is scheduled, preempted for and bound by the framework its pods'
    ``spec.schedulerName`` names. Pods naming none of them are not scheduled.
    """

    def __init__(
        self,
        cluster: Cluster,
        config: SchedulerConfig | None = None,
        *,
        clock: Clock | None = None,
        framework: Framework | None = None,
        frameworks: Mapping[str, Framework] | None = None,
    ) -> None:
        self.cluster = cluster
        self.clock: Clock = clock or WallClock()
        self.config, self.frameworks = _profiles(config, framework, frameworks)
        #: the framework of ``config.scheduler_name`` (the only one with one profile)
        self.framework = self.frameworks[self.config.scheduler_name]
        for fw in self.frameworks.values():
            fw.refresh()  # sealed: plugin lists changed in place count from here
        self.cache = Cache(tuple(self.frameworks))
        #: the DRA state (upstream's SharedDRAManager): fed by the DRA informers, handed to
        #: the plugins through the framework when the scheduler starts
        self.dra_manager = DRAManager(self.cache)
        #: the volume state (PVs, PVCs, StorageClasses, CSINodes...): fed by its informers
        #: when a volume plugin is enabled, handed to those plugins when the scheduler starts
        self.volume_state = VolumeState(self.cache)
        self.queue = SchedulingQueue(
            self.clock.now,
            initial_backoff=self.config.initial_backoff,
            max_backoff=self.config.max_backoff,
            max_in_unschedulable=self.config.max_in_unschedulable,
            hints_for=_hints_for(tuple(self.frameworks.values())),
        )
        #: pods bound by this scheduler so far
        self.bound_total = 0
        self._tasks = Tasks()
        self.status = StatusWriter(cluster, self.config, self.clock, self._tasks)
        if len(self.frameworks) > 1:  # each profile reports its own events
            self.status.profiles = frozenset(self.frameworks)
        self.status.pod_current = self._pod_waits
        self.status.group_current = self._group_waits
        self.enqueuer = Enqueuer(self.cache, self.queue, self.frameworks, self.config)
        self.binder = Binder(
            cluster,
            self.cache,
            self.queue,
            self.framework,
            self.enqueuer,
            self.status,
            self._tasks,
            concurrency=self.config.bind_concurrency,
            on_bound=self._count_bound,
        )
        self.status.binds_in_flight = lambda: self.binder.in_flight
        self.status.binds_waiting = self.binder.waiting
        self.handlers = EventHandlers(
            self.cache, self.queue, self.enqueuer, self.status, self.clock
        )
        self.schedule_one = ScheduleOne(
            self.cache,
            self.queue,
            self.frameworks,
            self.enqueuer,
            self.binder,
            self.status,
            self.config,
        )
        self._feeds: list[Feed] = []
        self._wake: asyncio.Event | None = None
        self._started = False
        self._stopping = False
        self._metric_at = -1e9
        self.queue.on_active = self._poke
        self.handlers.on_node_pending = self._poke

    @property
    def explanations(self) -> dict[tuple[str, str], str]:
        """``(namespace, podgroup)`` -> the last Unschedulable / SchedulerError message."""
        return self.schedule_one.explanations

    def _share_dra_manager(self, dra: DRAManager) -> bool:
        """Hand the one DRA manager to every profile's plugins; whether any took it."""
        took = [fw.use_shared_dra_manager(dra) for fw in self.frameworks.values()]
        return any(took)

    def _count_bound(self) -> None:
        self.bound_total += 1

    def _pod_waits(self, p: PodInfo) -> bool:
        """A held-back explanation of ``p`` is still worth writing: the cache's pod, pending."""
        return self.cache.pods.get(p.key) is p and not p.scheduled and not p.deleting

    def _group_waits(self, g: GroupInfo) -> bool:
        """A held-back PodGroup condition of ``g`` is still worth writing."""
        return self.cache.groups.get(g.key) is g and g.pod_group is not None

    # ---- lifecycle (runtime.Component) -----------------------------------------------

    @property
    def started(self) -> bool:
        """Whether :meth:`start` completed."""
        return self._started

    async def start(self) -> None:
        """List every watched kind into the cache, then keep watching in the background."""
        if self._started:
            return
        if self.config.gc_freeze:  # the initial lists will live: no older collections now
            gc_policy.hold()
        self.binder.reset()
        self.status.reset()
        self._wake = asyncio.Event()
        c, h, order = self.cluster, self.handlers, creation_order
        self._feeds = [
            Feed(c, "PriorityClass", h.on_priority_class, optional=True),
            Feed(c, "Node", h.on_node, order=order),
            Feed(c, "PodGroup", h.on_pod_group, optional=True, order=order),
            Feed(c, "CompositePodGroup", h.on_composite_pod_group, optional=True),
            Feed(c, "Pod", h.on_pod, order=order),
        ]
        # every profile's plugins: one Namespace view and one controller store for them all
        every = [p for fw in self.frameworks.values() for p in (*fw.reserve, *fw.scores)]
        spaces = shared_namespaces(every)
        if spaces is not None:  # namespaceSelector terms read their labels: before pods
            fold = h.dra_handler("Namespace", spaces.on_namespace, None, spaces.previous)
            self._feeds.insert(-1, Feed(c, "Namespace", fold, optional=True))
        dra = self.dra_manager  # its kinds, before pods, when a plugin uses it
        if self._share_dra_manager(dra):
            self._feeds[-1:-1] = [
                Feed(c, kind, h.dra_handler(kind, fold, woken, previous), optional=True)
                for kind, fold, woken, previous in (
                    ("DeviceClass", dra.on_device_class, None, None),
                    ("ResourceSlice", dra.on_resource_slice, None, None),
                    ("DeviceTaintRule", dra.on_device_taint_rule, None, None),
                    (
                        "ResourceClaim",
                        dra.on_resource_claim,
                        dra.woken_by_claim,
                        dra.previous_claim,
                    ),
                )
            ]
        spreads = [p for p in every if _spreads(p)]
        if spreads:  # default spread constraints: the pods' Services, controllers
            store = spreads[0].controllers
            for p in spreads[1:]:
                p.controllers = store
            self._feeds[-1:-1] = [
                Feed(c, kind, store.handler(kind), optional=True) for kind in CONTROLLER_KINDS
            ]
        vol = self.volume_state  # its kinds, before pods, when a volume plugin uses it
        if any([fw.use_volume_state(vol) for fw in self.frameworks.values()]):
            self._feeds[-1:-1] = [
                Feed(c, k, h.dra_handler(k, vol.handler(k), None, vol.previous(k)), optional=True)
                for k in VOLUME_KINDS
            ]
        if self.config.preemption:  # only preemption reads PodDisruptionBudgets
            self._feeds.append(Feed(c, "PodDisruptionBudget", h.on_pdb, optional=True))
        try:
            await probe_feeds(self._feeds)  # which optional kinds are served: one round trip
            for f in self._feeds:
                await f.start()
        except BaseException:
            if gc_policy.holding:  # no install follows: the collector as it was
                gc_policy.uninstall()
            raise
        if self.config.gc_freeze:  # the initial lists are cached: freeze the long-lived heap
            gc_policy.install()
        self._started = True
        self._stopping = False

    async def stop(self) -> None:
        """Stop watching and wait for bindings and status writes in flight."""
        self._stopping = True
        self._poke()
        for f in self._feeds:
            await f.stop()
        await self._tasks.drain()
        self._started = False

    async def run(self) -> None:
        """Schedule until :meth:`stop` is called (real clusters)."""
        await self.start()
        assert self._wake is not None
        self.handlers.node_batch = self.config.node_batch
        while not self._stopping:
            await self._round(wait=False)
            if self._stopping:
                break
            self._wake.clear()
            if self.queue.has_active():
                continue
            wake = self.next_wakeup()
            timeout = None if wake is None else max(0.0, wake - self.clock.now())
            waiter = asyncio.create_task(self._wake.wait())
            sleeper = (
                asyncio.create_task(self.clock.sleep(timeout)) if timeout is not None else None
            )
            pending = {waiter} | ({sleeper} if sleeper else set())
            _, rest = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for t in rest:
                t.cancel()

    async def sync(self) -> None:
        """Process every cluster change delivered so far into the cache and the queue."""
        if not self._started:
            await self.start()
        await settle(self._feeds)

    async def until_idle(self) -> int:
        """Run cycles until nothing is schedulable now; waits for the bindings and status
        writes. Returns the number of pods bound."""
        before = self.bound_total
        while await self._round(wait=True):
            pass
        return self.bound_total - before

    def next_wakeup(self) -> float | None:
        """Clock time at which a backoff expires, the unschedulable flush or a held-back
        explanation is due (None if nothing is waiting; the current time if something is
        ready now)."""
        if self.queue.has_active():
            return self.clock.now()
        times = [
            t
            for t in (
                self.queue.next_wakeup(),
                self.status.next_refresh(),
                self.handlers.next_node_flush(),
            )
            if t is not None
        ]
        return min(times) if times else None

    # ---- driving ---------------------------------------------------------------------

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def _round(self, *, wait: bool) -> bool:
        await self.sync()
        self.handlers.flush_node_events(force=wait)
        progressed = self.status.refresh_due() > 0
        yielded = time.perf_counter()
        while (e := self.queue.pop()) is not None:
            self.schedule_one(e)
            progressed = True
            if not wait and time.perf_counter() - yielded >= _YIELD_EVERY:
                # let the bindings, status writes and watches run between attempts: a long
                # round (a backlog re-attempted after a node event) otherwise starves them,
                # and binds (each waiting on a response) go out one wave per yield
                await asyncio.sleep(0)
                yielded = time.perf_counter()
        now = time.monotonic()
        if wait or now - self._metric_at >= 1.0:  # O(queue): not on every round of run()
            self._metric_at = now
            self._update_pending_metric()
        if wait and self._tasks:
            await self._tasks.drain()
            progressed = True
        return progressed

    def _update_pending_metric(self) -> None:
        for kind, states in self.queue.counts().items():
            t = "pod" if kind == "Pod" else "podgroup"
            for state in ("gated", "active", "backoff", "unschedulable"):
                PENDING.labels(type=t, queue=state).set(states.get(state, 0))


def _spreads(plugin: object) -> TypeGuard[PodTopologySpread]:
    """PodTopologySpread with default constraints (it reads Services and controllers)."""
    return isinstance(plugin, PodTopologySpread) and plugin.needs_controllers


def _profiles(
    config: SchedulerConfig | None,
    framework: Framework | None,
    frameworks: Mapping[str, Framework] | None,
) -> tuple[SchedulerConfig, dict[str, Framework]]:
    """The settings and the frameworks by schedulerName the scheduler serves."""
    if frameworks is None:
        cfg = config or SchedulerConfig()
        fw = framework or default_framework(
            gang_strategy=cfg.gang_scoring,
            single_strategy=cfg.single_scoring,
            score_resources=cfg.score_resources,
        )
        return cfg, {cfg.scheduler_name: fw}
    if framework is not None:
        raise ValueError("pass framework (one profile) or frameworks (several), not both")
    out = dict(frameworks)
    if not out:
        raise ValueError("frameworks: at least one profile is needed")
    for name in out:
        if not isinstance(name, str) or not name:
            raise ValueError(f"frameworks: {name!r} is not a schedulerName")
    if len({id(fw) for fw in out.values()}) != len(out):
        raise ValueError("frameworks: each profile needs its own Framework")
    if config is None:
        config = SchedulerConfig(scheduler_name=next(iter(out)))
    elif config.scheduler_name not in out:
        raise ValueError(
            f"config.scheduler_name {config.scheduler_name!r} is not one of the profiles "
            f"({', '.join(out)})"
        )
    return config, out


def _hints_for(
    frameworks: tuple[Framework, ...],
) -> Callable[[ClusterEvent], Sequence[QueueingHint | None]]:
    """The queue's queueing hints: the one profile's; with several, every profile's (an
    event that any profile's plugins register may wake a waiting entity: at worst one retry
    too many, never a wake-up missed)."""
    if len(frameworks) == 1:
        return frameworks[0].hints_for

    def hints_for(event: ClusterEvent) -> list[QueueingHint | None]:
        return [h for fw in frameworks for h in fw.hints_for(event)]

    return hints_for


if TYPE_CHECKING:

    def _is_a_component(s: Scheduler) -> Component:  # mypy checks the protocol
        return s
