"""``Backoff``: the pause an :class:`~workloadbuilder.cluster.Informer` takes before it lists
or watches again after a failure.

The same schedule as client-go's reflector (its backoff manager in
``k8s.io/client-go/tools/cache/reflector.go``): the first pause is 0.8 s, each further one
doubles, capped at 30 s; every pause is stretched by a random factor in [1, 2) (jitter 1.0),
so a pause lies in [0.8, 1.6) s at first and in [30, 60) s at the cap; once two failures
are more than 2 minutes apart (the informer was healthy in between) it starts again from
0.8 s.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

__all__ = ["Backoff"]


class Backoff:
    """Exponential backoff with jitter, capped, reset after a quiet period.

    ``initial`` is the first pause (seconds), ``factor`` the growth per failure, ``cap`` the
    largest pause before jitter, ``jitter`` the random stretch (a pause of ``d`` becomes
    ``d * (1 + jitter * r)`` with ``r`` uniform in [0, 1)), ``reset_after`` the time between
    two pauses after which the schedule starts again from ``initial``. ``clock`` reads the
    time (seconds, any origin: tests pass a manual clock's ``now``); ``rng`` draws the jitter.
    """

    def __init__(
        self,
        *,
        initial: float = 0.8,
        cap: float = 30.0,
        factor: float = 2.0,
        jitter: float = 1.0,
        reset_after: float = 120.0,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        if initial < 0 or cap < 0 or factor < 1 or jitter < 0 or reset_after < 0:
            raise ValueError(
                "Backoff: initial, cap, jitter and reset_after must be >= 0 and factor >= 1"
            )
        self.initial = initial
        self.cap = cap
        self.factor = factor
        self.jitter = jitter
        self.reset_after = reset_after
        self.clock = clock
        self._rng = rng if rng is not None else random.Random()
        self._next = initial
        self._last: float | None = None

    @classmethod
    def constant(cls, seconds: float, *, clock: Callable[[], float] = time.monotonic) -> Backoff:
        """The same pause every time, no jitter (tests that want a fixed, short pause)."""
        return cls(initial=seconds, cap=seconds, factor=1.0, jitter=0.0, clock=clock)

    def next(self) -> float:
        """The pause to take now (seconds); advances the schedule."""
        now = self.clock()
        if self._last is None or now - self._last > self.reset_after:
            self._next = self.initial
        self._last = now
        base = min(self._next, self.cap)
        self._next = min(self._next * self.factor, self.cap)
        return base * (1.0 + self.jitter * self._rng.random()) if self.jitter else base

    def reset(self) -> None:
        """Start again from ``initial`` at the next pause."""
        self._next = self.initial
        self._last = None

    def __repr__(self) -> str:
        return (
            f"Backoff(initial={self.initial}, cap={self.cap}, factor={self.factor}, "
            f"jitter={self.jitter}, reset_after={self.reset_after})"
        )
