"""Churn: gangs created, bound and deleted, many times over. Whatever the scheduler keeps per
pod, group or queue entry must go with the objects (issue 16, "Soak": RSS stays flat). These
tests assert the structures, not memory figures; benchmarks measure memory."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sched_helpers import Env

from workloadbuilder.runtime import ManualClock
from workloadbuilder.scheduler import Scheduler, SchedulerConfig
from workloadbuilder.scheduler._cache import PodInfo

pytestmark = pytest.mark.asyncio

ROUNDS = 40
GANGS_PER_ROUND = 3
SIZE = 4


async def _churn(env: Env, clock: ManualClock, rounds: int) -> int:
    """Create, bind and delete ``rounds`` x ``GANGS_PER_ROUND`` gangs; returns pods bound."""
    s = env.scheduler(clock=clock)
    await s.start()
    bound = 0
    for r in range(rounds):
        names = [f"g{r}-{g}" for g in range(GANGS_PER_ROUND)]
        for name in names:
            await env.gang(name, SIZE, cpu="100m", memory="128Mi")
        bound += await s.until_idle()
        for name in names:
            for i in range(SIZE):
                await env.cluster.delete("Pod", f"{name}-{i}", env.namespace)
            await env.cluster.delete("PodGroup", name, env.namespace)
        await s.until_idle()
        clock.advance(1.0)  # well inside max_in_unschedulable: no periodic flush helps
    return bound


async def test_churned_gangs_leave_nothing_behind(mem_env: tuple[Env, ManualClock]) -> None:
    env, clock = mem_env
    await env.node("n1", cpu="64", memory="256Gi")
    bound = await _churn(env, clock, ROUNDS)
    assert bound == ROUNDS * GANGS_PER_ROUND * SIZE
    (s,) = env.schedulers
    cache, queue = s.cache, s.queue
    assert cache.pods == {}
    assert cache.groups == {}
    assert cache._pods_by_uid == {}
    assert cache.nominations == {}
    assert queue.entities == {}
    # every heap entry of a deleted group is stale: none may outlive the churn
    assert queue._active == []
    assert queue._backoff == []
    assert len(queue._unschedulable) <= 64, len(queue._unschedulable)
    assert s.status.sent_group == {}
    assert s.enqueuer._roots == {}
    assert s.schedule_one.explanations == {}
    assert len(cache._signatures) <= 1  # one pod shape, interned once
    await s.stop()


async def test_queue_heaps_stay_bounded_with_live_groups(
    mem_env: tuple[Env, ManualClock],
) -> None:
    """A long-lived unschedulable group keeps the flush from draining the pool's heap; the
    entries of deleted groups behind it are still dropped."""
    env, clock = mem_env
    await env.node("n1", cpu="64", memory="256Gi")
    await env.gang("stuck", SIZE, cpu="1000")  # never fits: waits in the unschedulable pool
    await _churn(env, clock, ROUNDS)
    (s,) = env.schedulers
    live = len(s.queue.entities)
    assert live == 1
    assert len(s.queue._unschedulable) <= 2 * live + 64
    await s.stop()


class SlowEvents:
    """Delegates to a cluster; every ``create_event`` takes ``delay`` event-loop turns, so
    the API server takes events more slowly than pods are bound. Samples the scheduler's
    event queue on every call."""

    def __init__(self, inner: Any, delay: int) -> None:
        self._inner = inner
        self.delay = delay
        self.scheduler: Scheduler | None = None
        self.written = 0
        self.max_queued = 0
        self.max_waiting = 0  # bindings waiting for room in the event queue
        self.queued_infos = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def create_event(self, **kwargs: Any) -> None:
        assert self.scheduler is not None
        queue = self.scheduler.status._event_queue
        self.max_queued = max(self.max_queued, len(queue))
        self.queued_infos += sum(1 for e in queue for x in e if isinstance(x, PodInfo))
        for _ in range(self.delay):
            await asyncio.sleep(0)
        self.max_waiting = max(self.max_waiting, len(self.scheduler.status._room))
        await self._inner.create_event(**kwargs)
        self.written += 1


async def test_event_backlog_is_bounded_and_holds_no_pod_infos(
    mem_env: tuple[Env, ManualClock],
) -> None:
    """Events written more slowly than pods are bound (a loaded API server): the backlog
    stays at ``max_queued_events`` -- the bindings wait for room instead of running ahead,
    so every ``Scheduled`` event is written and none is dropped (before issue 14 the newer
    ones were dropped) -- and a queued event does not keep its pod's ``PodInfo`` alive
    after the pod is gone (the one-hour soak's residual growth: every bound pod's info
    waited in an unbounded queue)."""
    env, clock = mem_env
    await env.node("n1", cpu="64", memory="256Gi")
    slow = SlowEvents(env.cluster, delay=50)
    # one event writer whatever the backlog (bind_concurrency 1): bindings outrun events
    cfg = SchedulerConfig(
        scheduler_name=env.scheduler_name,
        event_concurrency=1,
        bind_concurrency=1,
        max_queued_events=4,
    )
    s = Scheduler(slow, cfg, clock=clock)
    slow.scheduler = s
    env.schedulers.append(s)
    await s.start()
    bound = 0
    for r in range(ROUNDS // 4):
        names = [f"e{r}-{g}" for g in range(GANGS_PER_ROUND)]
        for name in names:
            await env.gang(name, SIZE, cpu="100m", memory="128Mi")
        bound += await s.until_idle()
        for name in names:
            for i in range(SIZE):
                await env.cluster.delete("Pod", f"{name}-{i}", env.namespace)
            await env.cluster.delete("PodGroup", name, env.namespace)
        await s.until_idle()
    assert bound == (ROUNDS // 4) * GANGS_PER_ROUND * SIZE
    # sampled as a write starts (one just taken off): the queue filled, and no further
    assert slow.max_queued == cfg.max_queued_events - 1
    assert slow.max_waiting > 0  # a binding waited for room
    assert s.status.events_dropped == 0
    assert slow.written == bound  # one Scheduled event per pod
    assert slow.queued_infos == 0
    assert s.status.events_pending == 0
    assert s.cache.pods == {}
    await s.stop()
