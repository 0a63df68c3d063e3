"""The virtual clock."""

from __future__ import annotations

import asyncio

import pytest

from workloadbuilder.simulator import VirtualClock


async def test_sleepers_wake_only_when_time_is_advanced() -> None:
    clock = VirtualClock(epoch=1000.0)
    assert clock.now() == 1000.0 and clock.elapsed == 0.0
    woke: list[float] = []

    async def sleeper(seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append(clock.elapsed)

    tasks = [asyncio.create_task(sleeper(s)) for s in (5.0, 1.0, 3.0)]
    for _ in range(5):
        await asyncio.sleep(0)
    assert woke == [] and clock.next_deadline() == 1.0
    assert clock.advance_to(3.0) == 2
    for _ in range(5):
        await asyncio.sleep(0)
    assert woke == [3.0, 3.0] and clock.next_deadline() == 5.0
    clock.advance_to(10.0)
    await asyncio.gather(*tasks)
    assert woke == [3.0, 3.0, 10.0]
    assert clock.now() == 1010.0 and clock.to_elapsed(1004.0) == 4.0
    assert clock.next_deadline() is None


async def test_zero_sleep_yields_and_time_never_goes_back() -> None:
    clock = VirtualClock()
    await clock.sleep(0)
    clock.advance_to(2.0)
    with pytest.raises(ValueError):
        clock.advance_to(1.0)


async def test_cancelled_sleeper_is_forgotten() -> None:
    clock = VirtualClock()
    task = asyncio.create_task(clock.sleep(4.0))
    await asyncio.sleep(0)
    assert clock.next_deadline() == 4.0
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert clock.next_deadline() is None
