"""Clocks: the scheduler reads time only through a :class:`Clock`, so the simulator can drive
it with virtual time."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "WallClock"]


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
