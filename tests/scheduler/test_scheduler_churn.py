"""Churn: gangs created, bound and deleted, many times over. Whatever the scheduler keeps per
pod, group or queue entry must go with the objects (issue 16, "Soak": RSS stays flat). These
tests assert the structures, not memory figures; benchmarks measure memory."""

from __future__ import annotations

import pytest
from sched_helpers import Env

from workloadbuilder.runtime import ManualClock

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
