"""Clocks: long-running components read time only through a :class:`Clock`, so a simulator
or a test can drive them with virtual time."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "ManualClock", "WallClock"]


@runtime_checkable
class Clock(Protocol):
    """A source of time in seconds (epoch-based for wall clocks) and a way to wait."""

    def now(self) -> float:
        """The current time in seconds."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of this clock's time."""
        ...


class WallClock:
    """Real time: ``time.time()`` and ``asyncio.sleep``."""

    def now(self) -> float:
        """Seconds since the epoch."""
        return time.time()

    async def sleep(self, seconds: float) -> None:
        """``asyncio.sleep``."""
        await asyncio.sleep(max(0.0, seconds))


class ManualClock:
    """A clock that moves only when told to (tests): :meth:`advance` moves it forward, and
    :meth:`sleep` moves it forward by the requested time and yields once (nothing waits)."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.t = start

    def now(self) -> float:
        """The current time (seconds)."""
        return self.t

    async def sleep(self, seconds: float) -> None:
        """Advance by ``seconds`` (never backwards), then yield to the event loop."""
        self.t += max(0.0, seconds)
        await asyncio.sleep(0)

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds``."""
        if seconds < 0:
            raise ValueError(f"time cannot go backwards ({seconds})")
        self.t += seconds
