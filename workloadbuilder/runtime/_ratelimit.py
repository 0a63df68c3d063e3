"""Client-side rate limiting (client-go's ``QPS`` / ``Burst``): a token bucket in front of
every request a component sends (watch streams are not limited once open)."""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from workloadbuilder.cluster import Cluster, ClusterProxy, ResourceInfo
from workloadbuilder.runtime._clock import Clock, WallClock

__all__ = ["RateLimitedCluster", "TokenBucket"]

T = TypeVar("T")


class TokenBucket:
    """``qps`` tokens per second, at most ``burst`` saved up. :meth:`take` reserves a token
    and waits until it is due, so callers are served in arrival order."""

    def __init__(self, qps: float, burst: int, *, clock: Clock | None = None) -> None:
        if qps <= 0:
            raise ValueError(f"qps must be positive, not {qps!r}")
        if burst < 1:
            raise ValueError(f"burst must be at least 1, not {burst!r}")
        self.qps = float(qps)
        self.burst = int(burst)
        self.clock: Clock = clock or WallClock()
        self._now: Callable[[], float] = time.monotonic if clock is None else clock.now
        self._tokens = float(burst)
        self._last = self._now()

    def reserve(self) -> float:
        """Take one token; returns how many seconds to wait before using it (0: now)."""
        now = self._now()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    async def take(self) -> None:
        """Wait for a token."""
        delay = self.reserve()
        if delay > 0:
            await self.clock.sleep(delay)


class RateLimitedCluster(ClusterProxy):
    """A :class:`~workloadbuilder.cluster.ClusterProxy` that sends at most ``qps`` requests
    per second on average and ``burst`` at once."""

    def __init__(self, inner: Cluster, *, qps: float, burst: int, clock: Clock | None = None):
        super().__init__(inner)
        self.bucket = TokenBucket(qps, max(1, burst), clock=clock)

    async def around(
        self, verb: str, info: ResourceInfo, subresource: str | None, call: Awaitable[T]
    ) -> T:
        """Wait for a token, then send."""
        try:
            await self.bucket.take()
        except BaseException:
            if inspect.iscoroutine(call):
                call.close()  # never sent: do not leave it un-awaited
            raise
        return await call
