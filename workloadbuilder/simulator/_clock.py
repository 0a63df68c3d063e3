"""A virtual clock: time moves only when the simulator advances it."""

from __future__ import annotations

import asyncio
import heapq
import itertools

__all__ = ["DEFAULT_EPOCH", "VirtualClock"]

#: 2026-01-01T00:00:00Z: simulation time 0 as seen by the cluster and the scheduler.
DEFAULT_EPOCH = 1_767_225_600.0


class VirtualClock:
    """Implements :class:`workloadbuilder.runtime.Clock` (``now()``, ``async sleep()``) on
    simulated time.

    ``now()`` is ``epoch + elapsed`` (seconds, like ``time.time()``), so timestamps written by
    the cluster look ordinary. ``sleep(s)`` suspends the caller until the simulator advances
    the clock to at least ``now() + s``; ``sleep(0)`` just yields.
    """

    def __init__(self, epoch: float = DEFAULT_EPOCH) -> None:
        self._epoch = epoch
        self._elapsed = 0.0
        self._seq = itertools.count()
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []

    @property
    def epoch(self) -> float:
        """Clock time of simulation time 0."""
        return self._epoch

    @property
    def elapsed(self) -> float:
        """Simulation time in seconds since the start."""
        return self._elapsed

    def now(self) -> float:
        """The current clock time (seconds since the Unix epoch)."""
        return self._epoch + self._elapsed

    def to_elapsed(self, clock_time: float) -> float:
        """Convert a clock time (as returned by ``now()``) to simulation time."""
        return clock_time - self._epoch

    async def sleep(self, seconds: float) -> None:
        """Wait until simulated time has advanced by ``seconds``."""
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._elapsed + seconds, next(self._seq), fut))
        try:
            await fut
        finally:
            if not fut.done():
                fut.cancel()

    def next_deadline(self) -> float | None:
        """Simulation time at which the earliest sleeper wakes, or None."""
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)  # cancelled sleepers
        return self._sleepers[0][0] if self._sleepers else None

    def advance_to(self, elapsed: float) -> int:
        """Move simulation time forward to ``elapsed`` and wake every sleeper that is due.
        Returns how many sleepers were woken. Time never goes backwards."""
        if elapsed < self._elapsed:
            raise ValueError(f"time cannot go backwards ({elapsed} < {self._elapsed})")
        self._elapsed = elapsed
        woken = 0
        while self._sleepers and self._sleepers[0][0] <= elapsed:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)
                woken += 1
        return woken
