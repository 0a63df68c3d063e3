"""The binder sends one gang's burst at a time, gangs in placement order: few gangs are ever
partially bound, and the bind slots stay full."""

from __future__ import annotations

import asyncio
import math
from typing import Any

from sched_helpers import Env
from sched_invariant import GangWatch

from workloadbuilder.errors import Conflict
from workloadbuilder.runtime import ManualClock
from workloadbuilder.scheduler import Scheduler, SchedulerConfig
from workloadbuilder.scheduler._metrics import REGISTRY, WATCH_STALLS


class RecordingBind:
    """Delegates to a cluster; records when each bind starts and ends (each bind yields to
        the event loop a few times, as a request would); the first bind of each pod in ``fail``
    raises Conflict."""

    def __init__(self, inner: Any, fail: set[str] | None = None) -> None:
        self._inner = inner
        self.fail = set(fail or ())
        self.log: list[tuple[str, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def bind(
        self, namespace: str, pod_name: str, node_name: str, *, pod_uid: str | None = None
    ) -> None:
        self.log.append(("start", pod_name))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            for _ in range(3):
                await asyncio.sleep(0)
            if pod_name in self.fail:
                self.fail.discard(pod_name)
                raise Conflict("injected failure")
            await self._inner.bind(namespace, pod_name, node_name, pod_uid=pod_uid)
            self.log.append(("bound", pod_name))
        finally:
            self.in_flight -= 1


def _gang(pod: str) -> str:
    return pod.rsplit("-", 1)[0]


def _scheduler(env: Env, cluster: Any, clock: ManualClock, concurrency: int) -> Scheduler:
    s = Scheduler(cluster, SchedulerConfig(bind_concurrency=concurrency), clock=clock)
    env.schedulers.append(s)
    return s


def _max_partial(log: list[tuple[str, str]], sizes: dict[str, int]) -> int:
    """The most gangs with between 1 and size-1 pods bound at one moment of the log."""
    bound: dict[str, int] = {}
    peak = 0
    for what, pod in log:
        if what != "bound":
            continue
        g = _gang(pod)
        bound[g] = bound.get(g, 0) + 1
        peak = max(peak, sum(1 for k, n in bound.items() if 0 < n < sizes[k]))
    return peak


async def test_gangs_bind_one_burst_at_a_time_in_order(mem_env: tuple[Env, ManualClock]) -> None:
    env, clock = mem_env
    for i in range(4):
        await env.node(f"n{i}", cpu="32")
    sizes = {f"g{i}": size for i, size in enumerate([8, 12, 8, 10, 9, 8])}
    for name, size in sizes.items():
        await env.gang(name, size)
    rec = RecordingBind(env.cluster)
    concurrency = 4
    s = _scheduler(env, rec, clock, concurrency)
    assert await s.until_idle() == sum(sizes.values())
    starts = [_gang(p) for what, p in rec.log if what == "start"]
    # each gang's binds are sent together, gangs one after the other
    order = list(dict.fromkeys(starts))
    assert sorted(order) == sorted(sizes)
    assert starts == [g for g in order for _ in range(sizes[g])]
    # the first pod of each gang (the canary) returns before the rest of that gang is sent
    for g in order:
        first = next(p for what, p in rec.log if what == "start" and _gang(p) == g)
        i_first_done = rec.log.index(("bound", first))
        i_second = [i for i, (w, p) in enumerate(rec.log) if w == "start" and _gang(p) == g][1]
        assert i_first_done < i_second
    # the slots are used (no serialisation) and never exceeded
    assert rec.max_in_flight == concurrency
    # at most concurrency / smallest gang + 1 gangs are partially bound at once
    assert _max_partial(rec.log, sizes) <= math.ceil(concurrency / min(sizes.values())) + 1


async def test_single_pods_fill_the_bind_slots(mem_env: tuple[Env, ManualClock]) -> None:
    env, clock = mem_env
    await env.node("a", cpu="32")
    for i in range(12):
        await env.pod(f"p{i}")
    rec = RecordingBind(env.cluster)
    s = _scheduler(env, rec, clock, 5)
    assert await s.until_idle() == 12
    assert rec.max_in_flight == 5


async def test_failed_canary_lets_the_next_gang_proceed(mem_env: tuple[Env, ManualClock]) -> None:
    env, clock = mem_env
    await env.node("a", cpu="32")
    await env.gang("g0", 4)
    await env.gang("g1", 4)
    watch = GangWatch(env.cluster, "default")
    await watch.start()
    rec = RecordingBind(env.cluster, fail={"g0-0"})
    s = _scheduler(env, rec, clock, 3)
    assert await s.until_idle() == 4
    assert set(await env.bound()) == {f"g1-{i}" for i in range(4)}
    assert [p for w, p in rec.log if w == "start" and _gang(p) == "g0"] == ["g0-0"]
    await watch.settle()
    watch.check()
    clock.advance(1.0)  # the failed gang is retried after its backoff, whole
    assert await s.until_idle() == 4
    assert len(await env.bound("g0-")) == 4
    await watch.settle()
    watch.check()


async def test_failure_after_the_canary_requeues_the_rest(
    mem_env: tuple[Env, ManualClock],
) -> None:
    env, clock = mem_env
    await env.node("a", cpu="32")
    await env.gang("g0", 5)
    await env.gang("g1", 3)
    rec = RecordingBind(env.cluster, fail={"g0-3"})
    s = _scheduler(env, rec, clock, 2)
    assert await s.until_idle() == 7
    assert set(await env.bound("g0-")) == {"g0-0", "g0-1", "g0-2", "g0-4"}
    assert len(await env.bound("g1-")) == 3
    assert s.binder.pending == 0
    clock.advance(1.0)
    assert await s.until_idle() == 1
    assert len(await env.bound("g0-")) == 5


def test_unschedulable_flush_uses_the_latest_wait() -> None:
    """The periodic flush moves an entity ``max_in_unschedulable`` after it last became
    unschedulable (an older wait of the same entity does not count), without scanning every
    entity on each pop."""
    from workloadbuilder.scheduler._queue import SchedulingQueue

    now = [0.0]
    q = SchedulingQueue(lambda: now[0], max_in_unschedulable=300.0)
    key = ("PodGroup", "default", "g")
    q.upsert(key, priority=0, first_seen=0.0, seq=0, gate=None)
    others = [("PodGroup", "default", f"o{i}") for i in range(50)]
    for i, k in enumerate(others):
        q.upsert(k, priority=0, first_seen=0.0, seq=i + 1, gate=None)
    for _ in range(51):
        e = q.pop()
        assert e is not None
        q.done(e, "unschedulable")
    assert q.next_wakeup() == 300.0
    now[0] = 10.0
    assert q.move(key)  # an event moves it; it is attempted again and fails again
    now[0] = 20.0
    e = q.pop()
    assert e is not None and e.key == key
    q.done(e, "unschedulable")
    now[0] = 300.0
    flushed = []
    while (o := q.pop()) is not None:  # the others are flushed (their backoff is over)...
        flushed.append(o.key)
        q.done(o, "unschedulable")
    assert sorted(flushed) == sorted(others)
    assert q.entities[key].state == "unschedulable"  # ...but not g: it waits since t=20
    assert q.next_wakeup() == 320.0
    now[0] = 320.0
    popped = q.pop()
    assert popped is not None and popped.key == key


class CountingEvents:
    """Delegates to a cluster; counts concurrent ``create_event`` calls (overall, and
    started while ``binds()`` reports bindings in flight) and records their order."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.in_flight = 0
        self.max_in_flight = 0
        self.max_in_flight_binding = 0
        self.binds: Any = lambda: 0
        self.waiting: Any = lambda: False
        #: event writes started while a placed pod waited for a bind slot
        self.started_while_waiting = 0
        #: pods bound when the first event write started
        self.first_event_after: int | None = None
        self.reasons: list[tuple[str, str]] = []
        #: pods in the order their binding returned
        self.bound: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def bind(
        self, namespace: str, pod_name: str, node_name: str, *, pod_uid: str | None = None
    ) -> None:
        await self._inner.bind(namespace, pod_name, node_name, pod_uid=pod_uid)
        self.bound.append(pod_name)

    async def create_event(self, **kwargs: Any) -> None:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        if self.binds():
            self.max_in_flight_binding = max(self.max_in_flight_binding, self.in_flight)
        if self.waiting():
            self.started_while_waiting += 1
        if self.first_event_after is None:
            self.first_event_after = len(self.bound)
        try:
            for _ in range(3):
                await asyncio.sleep(0)
            await self._inner.create_event(**kwargs)
            self.reasons.append((kwargs["involved_object"]["name"], kwargs["reason"]))
        finally:
            self.in_flight -= 1


async def test_events_are_written_in_order_with_bounded_concurrency(
    mem_env: tuple[Env, ManualClock],
) -> None:
    env, clock = mem_env
    await env.node("a", cpu="32")
    await env.gang("g0", 6)
    await env.gang("g1", 6)
    rec = CountingEvents(env.cluster)
    cfg = SchedulerConfig(event_concurrency=2)
    s = Scheduler(rec, cfg, clock=clock)
    rec.binds = lambda: s.binder.in_flight
    rec.waiting = s.binder.waiting
    env.schedulers.append(s)
    assert await s.until_idle() == 12
    # event_concurrency: the queue stays under half full while bindings are in flight, and
    # holds fewer events than bind_concurrency once none is; none is written while a
    # placed pod waits for a bind slot
    assert rec.max_in_flight == 2
    assert rec.max_in_flight_binding <= 2
    assert rec.started_while_waiting == 0
    assert s.status.events_pending == 0
    assert sorted(rec.reasons) == sorted(
        (f"g{g}-{i}", "Scheduled") for g in (0, 1) for i in range(6)
    )
    # queued in binding order (the second gang's canary goes out while the first gang's
    # canary is in flight, so it binds before the first gang's burst): with 2 writers an
    # event lands at most one place away from its binding's
    events = [name for name, _ in rec.reasons]
    assert sorted(events) == sorted(rec.bound)
    assert all(abs(events.index(n) - rec.bound.index(n)) <= 1 for n in rec.bound)
    assert rec.bound[:2] == ["g0-0", "g1-0"]  # the canaries first, in placement order


async def test_small_gangs_canaries_go_out_together(mem_env: tuple[Env, ManualClock]) -> None:
    # Gangs of 2: while one gang's canary is in flight, the free slots beyond its rest go to
    # the next gangs' canaries, so the bind slots fill up (before, one canary in flight
    # held back every other batch: one round trip per gang). Each gang's rest still waits
    # for its canary, and few gangs are partial at once.
    env, clock = mem_env
    await env.node("a", cpu="64")
    sizes = {f"g{i:02d}": 2 for i in range(12)}
    for name, size in sizes.items():
        await env.gang(name, size)
    rec = RecordingBind(env.cluster)
    concurrency = 8
    s = _scheduler(env, rec, clock, concurrency)
    assert await s.until_idle() == 24
    # (the old binder: 2 at most, a canary and one gang's rest; now the canaries in flight
    # keep a slot each for their rest, so between half and all of the slots are busy)
    assert concurrency // 2 < rec.max_in_flight <= concurrency
    for g in sizes:
        starts = [i for i, (w, p) in enumerate(rec.log) if w == "start" and _gang(p) == g]
        first = rec.log[starts[0]][1]
        assert rec.log.index(("bound", first)) < starts[1]
    assert _max_partial(rec.log, sizes) <= math.ceil(concurrency / 2) + 1


async def test_a_large_gangs_canary_still_holds_the_slots_for_its_burst(
    mem_env: tuple[Env, ManualClock],
) -> None:
    # A gang of 10 with 4 slots: its canary reserves the slots its rest needs, so the next
    # gang (of 2) is not opened before that burst is sent.
    env, clock = mem_env
    await env.node("a", cpu="64")
    await env.gang("big", 10)
    await env.gang("small", 2)
    rec = RecordingBind(env.cluster)
    s = _scheduler(env, rec, clock, 4)
    assert await s.until_idle() == 12
    starts = [_gang(p) for what, p in rec.log if what == "start"]
    assert starts == ["big"] * 10 + ["small"] * 2


class SlowEvents(CountingEvents):
    """Every event takes ``delay`` event-loop turns (a loaded API server); samples the
    scheduler's event queue as each write starts."""

    def __init__(self, inner: Any, delay: int) -> None:
        super().__init__(inner)
        self.delay = delay
        self.scheduler: Scheduler | None = None
        self.max_queued = 0

    async def create_event(self, **kwargs: Any) -> None:
        assert self.scheduler is not None
        self.max_queued = max(self.max_queued, len(self.scheduler.status._event_queue))
        for _ in range(self.delay):
            await asyncio.sleep(0)
        await super().create_event(**kwargs)


async def test_a_burst_of_binds_writes_every_scheduled_event(
    mem_env: tuple[Env, ManualClock],
) -> None:
    # Issue 14: events written more slowly than pods are bound, a queue of 8: before, the
    # events beyond the queue were dropped (5,000 pods on a real API server: 2,807 events).
    # Now a binding waits for room, and the writers grow with the backlog: one Scheduled
    # event per pod, none dropped, the queue never beyond its bound.
    env, clock = mem_env
    await env.node("a", cpu="128", memory="512Gi")
    for g in range(10):
        await env.gang(f"g{g}", 8, cpu="1", memory="1Gi")
    rec = SlowEvents(env.cluster, delay=40)
    cfg = SchedulerConfig(scheduler_name=env.scheduler_name, max_queued_events=8)
    s = Scheduler(rec, cfg, clock=clock)
    rec.scheduler = s
    env.schedulers.append(s)
    assert await s.until_idle() == 80
    assert s.status.events_pending == 0
    assert s.status.events_dropped == 0
    assert sorted(rec.reasons) == sorted(
        (f"g{g}-{i}", "Scheduled") for g in range(10) for i in range(8)
    )
    assert rec.max_queued <= cfg.max_queued_events
    assert cfg.event_concurrency < rec.max_in_flight <= cfg.bind_concurrency


async def test_a_burst_is_bound_before_its_events_are_written(
    mem_env: tuple[Env, ManualClock],
) -> None:
    # 40 pods, 4 bind slots: while placed pods wait for a slot no event write starts (each
    # would cost the API server what a binding costs; the bindings go first, as with one
    # semaphore for both); once none waits, the events follow, one per pod.
    env, clock = mem_env
    await env.node("a", cpu="64", memory="64Gi")
    for g in range(5):
        await env.gang(f"g{g}", 8)
    rec = CountingEvents(env.cluster)
    s = Scheduler(rec, SchedulerConfig(bind_concurrency=4), clock=clock)
    rec.binds = lambda: s.binder.in_flight
    rec.waiting = s.binder.waiting
    env.schedulers.append(s)
    assert await s.until_idle() == 40
    assert rec.started_while_waiting == 0
    assert len(rec.reasons) == 40 and s.status.events_pending == 0
    # the writes came after the burst: the first one started once fewer than one burst of
    # bindings was left (the last pods were sent)
    assert rec.first_event_after is not None and rec.first_event_after >= 40 - 4


def test_event_writers_follow_the_backlog(mem_env: tuple[Env, ManualClock]) -> None:
    # event_concurrency while bindings are in flight and the queue is at most half full
    # (none while placed pods wait for a bind slot), then more up to bind_concurrency when
    # it is full; all of them with no binding in flight and more events queued than that
    env, clock = mem_env
    cfg = SchedulerConfig(event_concurrency=4, bind_concurrency=16, max_queued_events=100)
    st = Scheduler(env.cluster, cfg, clock=clock).status
    binds, waiting = 5, False
    st.binds_in_flight = lambda: binds
    st.binds_waiting = lambda: waiting
    queued = st._event_queue
    entry = ("default", "p", "uid", "Normal", "Scheduled", "n1")
    assert st.event_writers_limit() == 4
    queued.extend([entry] * 50)
    assert st.event_writers_limit() == 4
    waiting = True  # a burst: its bindings go first
    assert st.event_writers_limit() == 0
    queued.append(entry)  # beyond half full: the writers grow whatever waits
    assert st.event_writers_limit() == 4
    waiting = False
    queued.pop()
    queued.extend([entry] * 25)
    assert st.event_writers_limit() == 10
    queued.extend([entry] * 25)
    assert st.event_writers_limit() == 16
    binds = 0  # no binding in flight: a backlog drains with bind_concurrency writers...
    assert st.event_writers_limit() == 16
    queued.clear()
    queued.extend([entry] * 16)  # ...a few events keep event_concurrency
    assert st.event_writers_limit() == 4
    queued.append(entry)
    assert st.event_writers_limit() == 16


async def test_explanations_beyond_the_event_queue_are_dropped_and_counted(
    mem_env: tuple[Env, ManualClock],
) -> None:
    # A FailedScheduling event comes from a scheduling cycle, which does not wait for the
    # API server: beyond max_queued_events it is dropped, counted in events_dropped and in
    # scheduler_events_dropped_total{reason="FailedScheduling"}
    env, clock = mem_env
    await env.node("a", cpu="4")
    for i in range(12):
        await env.pod(f"big-{i}", cpu="64")
    rec = SlowEvents(env.cluster, delay=40)
    cfg = SchedulerConfig(
        scheduler_name=env.scheduler_name,
        event_concurrency=1,
        bind_concurrency=1,
        max_queued_events=2,
    )
    s = Scheduler(rec, cfg, clock=clock)
    rec.scheduler = s
    env.schedulers.append(s)
    labels = {"reason": "FailedScheduling"}
    before = REGISTRY.get_sample_value("scheduler_events_dropped_total", labels) or 0.0
    await s.until_idle()
    dropped = s.status.events_dropped
    assert dropped > 0
    assert dropped + len(rec.reasons) == 12
    assert REGISTRY.get_sample_value("scheduler_events_dropped_total", labels) == before + dropped


def test_watch_stalls_are_a_metric() -> None:
    # scheduler_watch_stalls_total{resource}: read from the client's counts at scrape time
    stalls = {"/api/v1/pods": 2, "/apis/scheduling.k8s.io/v1beta1/podgroups": 1}
    old = WATCH_STALLS.source
    WATCH_STALLS.source = lambda: stalls
    try:
        assert REGISTRY.get_sample_value("scheduler_watch_stalls_total", {"resource": "pods"}) == 2
        got = REGISTRY.get_sample_value("scheduler_watch_stalls_total", {"resource": "podgroups"})
        assert got == 1
        stalls["/api/v1/pods"] = 3
        assert REGISTRY.get_sample_value("scheduler_watch_stalls_total", {"resource": "pods"}) == 3
    finally:
        WATCH_STALLS.source = old
