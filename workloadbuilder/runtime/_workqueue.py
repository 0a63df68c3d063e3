"""A rate-limited work queue with controller-runtime / client-go semantics.

* A key that is already queued is not queued twice (dedup).
* A key that is being processed is never handed out a second time: if it is added again
  meanwhile it is marked dirty and queued once :meth:`WorkQueue.done` is called.
* :meth:`WorkQueue.add_rate_limited` delays a key by its per-key exponential backoff
  (``base_delay * 2**failures``, capped at ``max_delay``); :meth:`WorkQueue.forget` resets it
  after a success. :meth:`WorkQueue.add_after` delays a key by a fixed time.

Time comes from a :class:`~workloadbuilder.runtime.Clock`, so a simulator or a test can step
the queue: :meth:`WorkQueue.pop_ready` hands out what is due *now* without waiting,
:meth:`WorkQueue.next_wakeup` says when the next delayed key is due, and the async
:meth:`WorkQueue.get` waits for a key (real time).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
from collections import deque

from workloadbuilder.runtime._clock import Clock, WallClock

__all__ = ["WorkQueue"]


class WorkQueue:
    """Keys (strings) waiting to be processed; see the module docstring for the semantics."""

    def __init__(
        self,
        *,
        base_delay: float = 0.005,
        max_delay: float = 1000.0,
        clock: Clock | None = None,
    ) -> None:
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.clock: Clock = clock or WallClock()
        self._queue: deque[str] = deque()
        self._queued: set[str] = set()
        self._processing: set[str] = set()
        self._dirty: set[str] = set()
        self._delayed: list[tuple[float, int, str]] = []
        self._seq = 0
        self._failures: dict[str, int] = {}
        self._wake = asyncio.Event()
        self._shutdown = False

    # ---- adding ----------------------------------------------------------------------

    def add(self, key: str) -> None:
        """Queue ``key`` now (a no-op when it is already queued; deferred while it is being
        processed)."""
        if self._shutdown:
            return
        if key in self._processing:
            self._dirty.add(key)
            return
        if key in self._queued:
            return
        self._queued.add(key)
        self._queue.append(key)
        self._wake.set()

    def add_after(self, key: str, delay: float) -> None:
        """Queue ``key`` after ``delay`` seconds of the queue's clock."""
        if self._shutdown:
            return
        if delay <= 0:
            self.add(key)
            return
        self._seq += 1
        heapq.heappush(self._delayed, (self.clock.now() + delay, self._seq, key))
        self._wake.set()

    def when(self, key: str) -> float:
        """The backoff of ``key``'s next rate-limited retry (and count the failure)."""
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        return float(min(self.max_delay, self.base_delay * (2**n)))

    def add_rate_limited(self, key: str) -> None:
        """Queue ``key`` after its exponential per-key backoff."""
        self.add_after(key, self.when(key))

    def forget(self, key: str) -> None:
        """Reset ``key``'s backoff (after a successful reconcile)."""
        self._failures.pop(key, None)

    def failures(self, key: str) -> int:
        """How many rate-limited retries ``key`` had since it was last forgotten."""
        return self._failures.get(key, 0)

    # ---- taking ----------------------------------------------------------------------

    def _promote(self) -> None:
        now = self.clock.now()
        while self._delayed and self._delayed[0][0] <= now:
            _, _, key = heapq.heappop(self._delayed)
            self.add(key)

    def pop_ready(self) -> str | None:
        """A key that is due now (it is then *processing* until :meth:`done`), or None."""
        self._promote()
        if not self._queue:
            return None
        key = self._queue.popleft()
        self._queued.discard(key)
        self._processing.add(key)
        return key

    async def get(self) -> str | None:
        """Wait for a due key; None once :meth:`shut_down`."""
        while not self._shutdown:
            key = self.pop_ready()
            if key is not None:
                return key
            self._wake.clear()
            timeout = None
            if self._delayed:
                timeout = max(0.0, self._delayed[0][0] - self.clock.now())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
        return None

    def done(self, key: str) -> None:
        """Processing of ``key`` ended; a key added meanwhile is queued again now."""
        self._processing.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)

    # ---- state -----------------------------------------------------------------------

    def next_wakeup(self) -> float | None:
        """Now when a key is ready, the time the next delayed key is due, or None."""
        if self._queue:
            return self.clock.now()
        return self._delayed[0][0] if self._delayed else None

    def __len__(self) -> int:
        """Keys queued now (not counting delayed or processing ones)."""
        return len(self._queue)

    @property
    def pending(self) -> int:
        """Keys queued, delayed or processing."""
        return len(self._queue) + len(self._delayed) + len(self._processing)

    def shut_down(self) -> None:
        """Stop handing out keys; :meth:`get` returns None."""
        self._shutdown = True
        self._wake.set()
