"""The informer's pause after a failed list or watch: client-go's reflector schedule (0.8 s,
doubling, capped at 30 s, jitter up to +100 %, reset after 2 minutes without a failure), on
a manual clock."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from workloadbuilder.cluster import Backoff, ClusterProxy, Informer, MemoryCluster
from workloadbuilder.errors import ApiError
from workloadbuilder.runtime import ManualClock


def test_the_schedule_doubles_from_0_8_s_to_a_30_s_cap_with_jitter() -> None:
    clock = ManualClock()
    b = Backoff(clock=clock.now, rng=random.Random(1))
    bases = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0, 30.0]
    for base in bases:
        pause = b.next()
        assert base <= pause < 2 * base, (base, pause)
        clock.advance(pause)  # failing again right after each pause: no reset


def test_without_jitter_the_pauses_are_exact() -> None:
    clock = ManualClock()
    b = Backoff(jitter=0.0, clock=clock.now)
    assert [b.next() for _ in range(8)] == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]


def test_two_quiet_minutes_start_the_schedule_again() -> None:
    clock = ManualClock()
    b = Backoff(jitter=0.0, clock=clock.now)
    assert [b.next() for _ in range(4)] == [0.8, 1.6, 3.2, 6.4]
    clock.advance(119.0)  # not quite two minutes since the last pause
    assert b.next() == 12.8
    clock.advance(120.5)
    assert b.next() == 0.8
    b.next()
    b.reset()
    assert b.next() == 0.8


def test_a_constant_backoff_and_bad_values() -> None:
    b = Backoff.constant(0.1)
    assert [b.next() for _ in range(3)] == [0.1, 0.1, 0.1]
    with pytest.raises(ValueError):
        Backoff(factor=0.5)


class _Flaky(ClusterProxy):
    """Lists fail while ``failing`` is set."""

    def __init__(self, inner: MemoryCluster) -> None:
        super().__init__(inner)
        self.failing = True
        self.lists = 0

    async def list(self, *args: Any, **kwargs: Any) -> Any:
        self.lists += 1
        if self.failing:
            raise ApiError("injected", status=500)
        return await super().list(*args, **kwargs)


class _Pauses:
    """An informer ``sleep`` on a manual clock that records every pause."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.pauses: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.pauses.append(seconds)
        await self.clock.sleep(seconds)


async def _until(cond: Any, rounds: int = 10_000) -> None:
    for _ in range(rounds):
        if cond():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition not reached")


async def test_an_informer_backs_off_exponentially_and_resets_when_healthy() -> None:
    clock = ManualClock()
    pauses = _Pauses(clock)
    cluster = _Flaky(MemoryCluster(clock=clock.now))
    inf = Informer(
        cluster,
        "ConfigMap",
        relist_backoff=Backoff(jitter=0.0, clock=clock.now),
        sleep=pauses,
    )
    await inf.start()
    try:
        await _until(lambda: len(pauses.pauses) >= 8)
        assert pauses.pauses[:8] == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]
        assert inf.failures >= 8 and not inf.synced
        cluster.failing = False
        await inf.wait_synced(5)
        n = len(pauses.pauses)
        clock.advance(121)  # healthy for more than two minutes
        cluster.failing = True
        await cluster.inner.close()  # the watch ends at once with nothing: a failure
        await _until(lambda: len(pauses.pauses) > n)
        assert pauses.pauses[n] == 0.8
    finally:
        await inf.stop()


async def test_a_number_is_a_fixed_pause() -> None:
    clock = ManualClock()
    pauses = _Pauses(clock)
    cluster = _Flaky(MemoryCluster(clock=clock.now))
    inf = Informer(cluster, "ConfigMap", relist_backoff=0.25, sleep=pauses)
    await inf.start()
    try:
        await _until(lambda: len(pauses.pauses) >= 5)
        assert pauses.pauses[:5] == [0.25] * 5
    finally:
        await inf.stop()


async def test_a_watch_that_ends_at_once_backs_off_too() -> None:
    clock = ManualClock()
    pauses = _Pauses(clock)
    inner = MemoryCluster(clock=clock.now)
    inf = Informer(
        inner, "ConfigMap", relist_backoff=Backoff(jitter=0.0, clock=clock.now), sleep=pauses
    )
    await inf.start()
    try:
        await inf.wait_synced(5)
        await inner.close()  # every watch now ends at once with nothing
        await _until(lambda: len(pauses.pauses) >= 4)
        assert pauses.pauses[:4] == [0.8, 1.6, 3.2, 6.4]
    finally:
        await inf.stop()
