"""Backoff, flush, bind failures and leader election with a virtual clock on MemoryCluster."""

from __future__ import annotations

import contextlib
from typing import Any

from sched_helpers import Env
from sched_invariant import GangWatch

from workloadbuilder.errors import Conflict
from workloadbuilder.runtime import LeaderElector, ManualClock
from workloadbuilder.scheduler._queue import SchedulingQueue


def _state(s: Any, name: str) -> str:
    return str(s.queue.entities[("PodGroup", "default", name)].state)


def test_backoff_durations_follow_upstream() -> None:
    q = SchedulingQueue(lambda: 0.0, initial_backoff=1.0, max_backoff=10.0)
    assert [q.backoff_duration(n) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


async def test_backoff_then_retry_on_node_added(mem_env: tuple[Env, ManualClock]) -> None:
    env, clock = mem_env
    await env.node("a", cpu="2")
    await env.gang("g", 3)
    s = env.scheduler(clock=clock)
    t0 = clock.now()
    assert await s.until_idle() == 0
    e = s.queue.entities[("PodGroup", "default", "g")]
    assert e.state == "unschedulable" and e.attempts == 1
    # nothing relevant happens: the next wakeup is the periodic flush
    assert s.next_wakeup() == t0 + s.config.max_in_unschedulable
    await env.node("b", cpu="2")  # relevant: leaves the pool, but still backing off (1s)
    assert await s.until_idle() == 0
    assert _state(s, "g") == "backoff"
    assert s.next_wakeup() == t0 + 1.0
    clock.advance(1.0)
    assert await s.until_idle() == 3


async def test_backoff_doubles(mem_env: tuple[Env, ManualClock]) -> None:
    env, clock = mem_env
    await env.node("a", cpu="1")
    await env.gang("g", 2)
    s = env.scheduler(clock=clock)
    await s.until_idle()
    e = s.queue.entities[("PodGroup", "default", "g")]
    await env.node("b", cpu="100m")  # relevant event, but does not help
    await s.until_idle()
    clock.advance(1.0)
    await s.until_idle()
    assert e.attempts == 2 and e.state == "unschedulable"
    t2 = clock.now()
    await env.node("c", cpu="100m")
    await s.until_idle()
    assert _state(s, "g") == "backoff" and s.next_wakeup() == t2 + 2.0


async def test_periodic_flush_retries(mem_env: tuple[Env, ManualClock]) -> None:
    env, clock = mem_env
    await env.node("a", cpu="1")
    await env.gang("g", 2)
    s = env.scheduler(clock=clock, max_in_unschedulable=60.0)
    await s.until_idle()
    e = s.queue.entities[("PodGroup", "default", "g")]
    wake = s.next_wakeup()
    assert wake == clock.now() + 60.0
    clock.advance(60.0)
    await s.until_idle()
    assert e.attempts == 2


class FlakyBind:
    """Delegates to a cluster; the first bind of each pod in ``fail`` raises Conflict."""

    def __init__(self, inner: Any, fail: set[str]) -> None:
        self._inner = inner
        self.fail = set(fail)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def bind(
        self, namespace: str, pod_name: str, node_name: str, *, pod_uid: str | None = None
    ) -> None:
        if pod_name in self.fail:
            self.fail.discard(pod_name)
            raise Conflict("injected failure")
        await self._inner.bind(namespace, pod_name, node_name, pod_uid=pod_uid)


async def test_failed_bind_forgets_and_requeues_remaining_need(
    mem_env: tuple[Env, ManualClock],
) -> None:
    env, clock = mem_env
    await env.node("a", cpu="4")
    await env.gang("g", 3)
    flaky = FlakyBind(env.cluster, {"g-1"})
    from workloadbuilder.scheduler import Scheduler, SchedulerConfig

    s = Scheduler(flaky, SchedulerConfig(), clock=clock)
    env.schedulers.append(s)
    assert await s.until_idle() == 2
    assert set(await env.bound("g-")) == {"g-0", "g-2"}
    g1 = s.cache.pods[("default", "g-1")]
    assert g1.assumed_node is None and g1.counted_node is None  # the assumption is forgotten
    used_cpu = int(s.cache.nodes.used[:, s.cache.nodes.columns["cpu"]].sum())
    assert used_cpu == 2000
    cond = await env.pod_condition("g-1")
    assert cond is not None and "injected failure" in cond["message"]
    # the group is requeued with its remaining need (1 pod) after a backoff
    assert s.next_wakeup() == clock.now() + 1.0
    clock.advance(1.0)
    assert await s.until_idle() == 1
    assert len(await env.bound("g-")) == 3


async def test_invariant_with_arrivals_and_departures(mem_env: tuple[Env, ManualClock]) -> None:
    env, clock = mem_env
    for i in range(6):
        await env.node(f"n{i}", cpu="16")
    watch = GangWatch(env.cluster, "default")
    await watch.start()
    s = env.scheduler(clock=clock)
    sizes = [12, 30, 7, 25, 16, 40, 9, 33, 18, 11]
    bound_total = 0
    for step, size in enumerate(sizes):
        await env.gang(f"g{step}", size, cpu="2")
        bound_total += await s.until_idle()
        await watch.settle()
        watch.check()
        if step % 3 == 2:  # the oldest running gang finishes
            running = sorted({n.rsplit("-", 1)[0] for n in await env.bound()})
            if running:
                for name in [n for n in await env.bound() if n.startswith(running[0] + "-")]:
                    await env.cluster.delete("Pod", name, "default", grace_period_seconds=0)
        clock.advance(1.0)
    for _ in range(5):
        clock.advance(10.0)
        bound_total += await s.until_idle()
        await watch.settle()
        watch.check()
    assert bound_total > 0


async def test_leader_election(mem_env: tuple[Env, ManualClock]) -> None:
    env, clock = mem_env
    a = LeaderElector(env.cluster, identity="a", lease_duration=15, clock=clock)
    b = LeaderElector(env.cluster, identity="b", lease_duration=15, clock=clock)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    clock.advance(10)
    assert await a.try_acquire_or_renew()  # renewal
    clock.advance(14)
    assert not await b.try_acquire_or_renew()  # a renewed 14s ago
    clock.advance(2)
    assert await b.try_acquire_or_renew()  # expired: b takes over
    lease = await env.cluster.get("Lease", "workloadbuilder-scheduler", "kube-system")
    assert isinstance(lease, dict)
    assert lease["spec"]["holderIdentity"] == "b" and lease["spec"]["leaseTransitions"] == 1
    b.leading = True
    await b.release()
    assert await a.try_acquire_or_renew()  # released: no need to wait


async def test_group_deleted_regates_and_pod_deletions_drop_quorum(
    mem_env: tuple[Env, ManualClock],
) -> None:
    env, clock = mem_env
    await env.node("a", cpu="1")
    await env.gang("g", 3)
    s = env.scheduler(clock=clock)
    await s.until_idle()
    assert _state(s, "g") == "unschedulable"
    # a pending pod goes away: 2 of minCount 3 remain, the group is gated again
    await env.cluster.delete("Pod", "g-2", "default", grace_period_seconds=0)
    await s.sync()
    e = s.queue.entities[("PodGroup", "default", "g")]
    assert e.state == "gated"
    assert e.gate_message == "waiting for minCount pods from a gang: 2 of 3 pods exist"
    # all pods gone: nothing left to schedule
    for name in ("g-0", "g-1"):
        await env.cluster.delete("Pod", name, "default", grace_period_seconds=0)
    await s.sync()
    assert ("PodGroup", "default", "g") not in s.queue.entities


async def test_run_loop_schedules_arrivals() -> None:
    import asyncio

    from workloadbuilder.cluster import MemoryCluster

    cluster = MemoryCluster()
    env = Env(cluster, "default", "memory")
    s = env.scheduler()
    runner = asyncio.create_task(s.run())
    try:
        await env.node("a", cpu="4")
        await env.gang("g", 4)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while len(await env.bound("g-")) < 4:
            assert loop.time() < deadline, "not bound before the deadline"
            await asyncio.sleep(0.01)
    finally:
        await s.stop()
        await runner
        await cluster.close()


async def test_failed_first_bind_leaves_the_gang_unbound(mem_env: tuple[Env, ManualClock]) -> None:
    env, clock = mem_env
    await env.node("a", cpu="4")
    await env.gang("g", 3)
    flaky = FlakyBind(env.cluster, {"g-0"})
    from workloadbuilder.scheduler import Scheduler, SchedulerConfig

    s = Scheduler(flaky, SchedulerConfig(), clock=clock)
    env.schedulers.append(s)
    assert await s.until_idle() == 0
    assert await env.bound("g-") == {}  # nothing of the gang was bound
    assert all(p.counted_node is None for p in s.cache.pods.values())  # all forgotten
    assert await env.group_condition("g") is None  # not claimed as scheduled
    clock.advance(1.0)
    assert await s.until_idle() == 3
    cond = await env.group_condition("g")
    assert (cond.status, cond.reason) == ("True", "Scheduled")


async def test_scheduling_gates_hold_pods_and_are_explained(
    mem_env: tuple[Env, ManualClock],
) -> None:
    env, clock = mem_env
    await env.node("a", cpu="4")
    await env.pod_group("g", 2)
    await env.pod("g-0", "g")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "g-1", "namespace": "default"},
        "spec": {
            "schedulerName": env.scheduler_name,
            "schedulingGroup": {"podGroupName": "g"},
            "schedulingGates": [{"name": "example.com/wait"}],
            "containers": [{"name": "c", "image": "x"}],
        },
    }
    await env.cluster.create(pod)
    s = env.scheduler(clock=clock)
    assert await s.until_idle() == 0
    assert s.explanations[("default", "g")] == (
        "minCount 2: only 1 pods can be scheduled (0 scheduled, 1 pending, 1 with scheduling gates)"
    )
    # removing the gate is a relevant change: the gang is placed
    await env.cluster.patch("Pod", "g-1", {"spec": {"schedulingGates": None}}, "default")
    clock.advance(1.0)
    assert await s.until_idle() == 2


async def test_run_loop_wakes_for_backoff_after_event() -> None:
    """In run(), an event that moves a failed group into backoff must wake the loop for the
    backoff's end (not only for the periodic flush minutes later)."""
    import asyncio

    from workloadbuilder.cluster import MemoryCluster

    cluster = MemoryCluster()
    env = Env(cluster, "default", "memory")
    s = env.scheduler(initial_backoff=0.2, max_in_unschedulable=3600.0)
    runner = asyncio.create_task(s.run())
    loop = asyncio.get_running_loop()
    try:
        await env.node("a", cpu="2")
        await env.gang("g", 3)
        deadline = loop.time() + 20
        while await env.group_condition("g") is None:
            assert loop.time() < deadline, "no attempt before the deadline"
            await asyncio.sleep(0.01)
        await env.node("b", cpu="2")
        deadline = loop.time() + 20
        while len(await env.bound("g-")) < 3:
            assert loop.time() < deadline, "not bound before the deadline"
            await asyncio.sleep(0.01)
    finally:
        await s.stop()
        await runner
        await cluster.close()


async def _failed_events(env: Env, pod: str) -> list[str]:
    evs = (await env.cluster.list("Event", env.namespace)).items
    return [
        str(e["message"])
        for e in evs
        if isinstance(e, dict)
        and e["involvedObject"]["name"] == pod
        and e["reason"] == "FailedScheduling"
    ]


async def test_count_only_explanation_changes_are_written_after_the_refresh_interval(
    mem_env: tuple[Env, ManualClock],
) -> None:
    # SchedulerConfig.status_refresh_interval: a new explanation that differs from the one
    # written less than the interval ago only in its numbers (here "1 of 1 nodes lack cpu"
    # -> "2 of 2 nodes ...") is held back: no PodGroup condition, pod condition or
    # FailedScheduling event is rewritten until the interval has passed since the last
    # write; then the latest one is written (the scheduler's next wakeup includes that
    # moment).
    env, clock = mem_env
    await env.node("a", cpu="1")
    await env.gang("g", 2)
    s = env.scheduler(clock=clock, status_refresh_interval=30.0)
    t0 = clock.now()
    await s.until_idle()
    first = (await env.group_condition("g")).message
    assert "of 1 nodes" in first
    assert len(await _failed_events(env, "g-0")) == 1
    await env.node("b", cpu="100m")  # relevant, does not help: only the counts change
    clock.advance(1.0)
    await s.until_idle()
    assert s.queue.entities[("PodGroup", "default", "g")].attempts == 2
    assert "of 2 nodes" in s.explanations[("default", "g")]
    assert (await env.group_condition("g")).message == first
    pod_cond = await env.pod_condition("g-0")
    assert pod_cond is not None and "of 1 nodes" in pod_cond["message"]
    assert len(await _failed_events(env, "g-0")) == 1
    assert s.status.held == 3  # the group and its two pods
    assert s.next_wakeup() == t0 + 30.0
    clock.advance(29.0)
    await s.until_idle()
    cond = await env.group_condition("g")
    assert cond.status == "False" and cond.reason == "Unschedulable"
    assert "of 2 nodes" in cond.message
    pod_cond = await env.pod_condition("g-1")
    assert pod_cond is not None and "of 2 nodes" in pod_cond["message"]
    events = await _failed_events(env, "g-1")
    assert len(events) == 2 and any("of 2 nodes" in m for m in events)
    assert s.status.held == 0


async def test_explanation_with_new_wording_is_written_at_once(
    mem_env: tuple[Env, ManualClock],
) -> None:
    # Only count changes wait: a node that rejects the pods for a new reason (a taint)
    # changes the wording, and the explanation is rewritten in that attempt.
    env, clock = mem_env
    await env.node("a", cpu="1")
    await env.gang("g", 2)
    s = env.scheduler(clock=clock, status_refresh_interval=30.0)
    await s.until_idle()
    await env.node("t", taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}])
    clock.advance(1.0)
    await s.until_idle()
    assert "untolerated taint" in (await env.group_condition("g")).message
    pod_cond = await env.pod_condition("g-0")
    assert pod_cond is not None and "untolerated taint" in pod_cond["message"]
    assert len(await _failed_events(env, "g-0")) == 2
    assert s.status.held == 0


async def test_refresh_interval_zero_rewrites_every_change(
    mem_env: tuple[Env, ManualClock],
) -> None:
    env, clock = mem_env
    await env.node("a", cpu="1")
    await env.gang("g", 2)
    s = env.scheduler(clock=clock, status_refresh_interval=0)
    await s.until_idle()
    await env.node("b", cpu="100m")
    clock.advance(1.0)
    await s.until_idle()
    assert "of 2 nodes" in (await env.group_condition("g")).message
    assert len(await _failed_events(env, "g-0")) == 2
    assert s.status.held == 0


async def test_held_explanation_of_a_group_scheduled_meanwhile_is_dropped(
    mem_env: tuple[Env, ManualClock],
) -> None:
    # A held-back Unschedulable explanation is not written once the group got bound: its
    # condition goes True and stays True (PodGroupInitiallyScheduled never regresses).
    env, clock = mem_env
    await env.node("a", cpu="1")
    await env.gang("g", 2)
    s = env.scheduler(clock=clock, status_refresh_interval=30.0)
    t0 = clock.now()
    await s.until_idle()
    await env.node("b", cpu="100m")
    clock.advance(1.0)
    await s.until_idle()
    assert s.status.held == 3
    await env.node("c", cpu="4")
    clock.advance(2.0)
    assert await s.until_idle() == 2
    assert (await env.group_condition("g")).status == "True"
    clock.advance(t0 + 30.0 - clock.now())
    await s.until_idle()
    assert (await env.group_condition("g")).status == "True"
    assert len(await _failed_events(env, "g-0")) == 1
    assert s.status.held == 0 and s.status.next_refresh() is None


class CountingStatus:
    """Delegates to a cluster; counts status patches per kind and created events."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.status: dict[str, int] = {}
        self.events = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def patch(self, kind: str, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("subresource") == "status":
            self.status[kind] = self.status.get(kind, 0) + 1
        return await self._inner.patch(kind, *args, **kwargs)

    async def create_event(self, **kwargs: Any) -> None:
        self.events += 1
        await self._inner.create_event(**kwargs)


async def _drain_writes(env: Env, clock: ManualClock, interval: float) -> CountingStatus:
    """A backlog of 6 gangs that do not fit while nodes too small for them are added one
    every 10 s (each node wakes every gang, each attempt explains with new node counts)."""
    from workloadbuilder.scheduler import Scheduler, SchedulerConfig

    await env.node("a", cpu="8")
    for i in range(6):
        await env.gang(f"b{i}", 2, node_selector={"pool": "x"})
    rec = CountingStatus(env.cluster)
    cfg = SchedulerConfig(scheduler_name=env.scheduler_name, status_refresh_interval=interval)
    s = Scheduler(rec, cfg, clock=clock)
    env.schedulers.append(s)
    await s.until_idle()
    for n in range(6):
        await env.node(f"x{n}", cpu="100m", labels={"pool": "x"})
        clock.advance(10.0)
        await s.until_idle()
    clock.advance(30.0)
    await s.until_idle()
    for i in range(6):
        assert "of 7 nodes" in (await env.group_condition(f"b{i}")).message
    return rec


async def test_a_drain_rewrites_explanations_once_per_interval_not_per_attempt(
    mem_env: tuple[Env, ManualClock],
) -> None:
    # The heavy-queueing drain in miniature: with the default refresh interval the
    # explanations of the waiting gangs are rewritten a few times in 90 s, not on each of
    # the 6 attempts, and the final one still names the final node count.
    env, clock = mem_env
    rec = await _drain_writes(env, clock, 30.0)
    assert rec.status["PodGroup"] <= 6 * 4
    assert rec.status["Pod"] <= 12 * 4 and rec.events <= 12 * 4


async def test_a_drain_without_the_interval_rewrites_every_attempt(
    mem_env: tuple[Env, ManualClock],
) -> None:
    env, clock = mem_env
    rec = await _drain_writes(env, clock, 0.0)
    assert rec.status["PodGroup"] == 6 * 7  # the first explanation and one per node
    assert rec.status["Pod"] == 12 * 7 and rec.events == 12 * 7


async def test_node_events_of_a_burst_wake_once_after_it(
    mem_env: tuple[Env, ManualClock],
) -> None:
    # SchedulerConfig.node_batch (what Scheduler.run sets on the handlers): Node events are
    # collected while they keep coming and offered to the queue node_batch seconds after
    # the last one, at most 4x node_batch after the first; the next wakeup names that time.
    env, clock = mem_env
    await env.node("a", cpu="1")
    await env.gang("g", 2)
    s = env.scheduler(clock=clock)
    await s.until_idle()
    s.handlers.node_batch = 1.0
    t0 = clock.now()
    await env.node("b", cpu="100m")
    await s.sync()
    assert _state(s, "g") == "unschedulable"
    assert s.handlers.next_node_flush() == t0 + 1.0 == s.next_wakeup()
    for i in range(7):  # a node every 0.5 s: the burst goes on, the wake is capped at 4 s
        clock.advance(0.5)
        await env.node(f"c{i}", cpu="100m")
        await s.sync()
        assert s.handlers.flush_node_events() == 0
        assert _state(s, "g") == "unschedulable"
    assert s.handlers.next_node_flush() == t0 + 4.0
    clock.advance(t0 + 4.0 - clock.now())
    assert s.handlers.flush_node_events() == 1
    assert _state(s, "g") in ("backoff", "active")
    assert s.handlers.next_node_flush() is None


async def test_run_attempts_a_backlog_once_per_node_burst() -> None:
    # In Scheduler.run, a burst of nodes (created within node_batch of each other) wakes a
    # waiting gang once: it is attempted again once, with every node of the burst there
    # (each node fits one pod of the three; without batching the first node's event would
    # start an attempt that fails).
    import asyncio

    from workloadbuilder.cluster import MemoryCluster
    from workloadbuilder.scheduler import Scheduler, SchedulerConfig

    cluster = MemoryCluster()
    env = Env(cluster, "default", "memory")
    runner = None
    try:
        await env.gang("g", 3, cpu="2")
        cfg = SchedulerConfig(  # (backoffs too short to batch the nodes themselves)
            scheduler_name=env.scheduler_name,
            node_batch=0.5,
            initial_backoff=0.001,
            max_backoff=0.001,
        )
        s = Scheduler(cluster, cfg)
        env.schedulers.append(s)
        attempts: list[Any] = []
        one = s.schedule_one

        def counted(e: Any) -> None:
            attempts.append(e.key)
            one(e)

        s.schedule_one = counted  # type: ignore[method-assign]
        runner = asyncio.create_task(s.run())
        loop = asyncio.get_running_loop()

        async def until(check: Any, what: str) -> None:
            deadline = loop.time() + 20.0
            while not check():
                assert loop.time() < deadline, what
                await asyncio.sleep(0.02)

        await until(lambda: len(attempts) == 1, "the first attempt")
        for i in range(3):
            await env.node(f"n{i}", cpu="2")
            await asyncio.sleep(0.05)

        async def bound() -> int:
            return len(await env.bound("g-"))

        deadline = loop.time() + 20.0
        while await bound() < 3:
            assert loop.time() < deadline, "the gang was not bound"
            await asyncio.sleep(0.02)
        assert len(attempts) == 2
    finally:
        if runner is not None:
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
        await env.cleanup()
        await cluster.close()
